//! natal's session options (`SET natal.<option> = <value>`): [`NatalOptions`], listed by
//! `SHOW ALL` and sent with a Ballista client's settings under their `natal.` keys, and
//! what a statement reads of them.

use datafusion::common::config::{ConfigEntry, ConfigExtension, ConfigField, ExtensionOptions};
use datafusion::common::config::{ConfigOptions, Visit};
use datafusion::error::Result;

datafusion::common::config_namespace! {
    /// natal's session options, set with `SET natal.<option> = <value>` once
    /// [`super::register`] has added them to the session.
    pub struct NatalOptions {
        /// Merge small fragments after each write (`INSERT`, `UPDATE`, `natal_update`),
        /// this many of one size tier at a time (`TableOptions::merge`); 0: never.
        pub merge_fan_in: u32, default = 8
        /// Read a filtered scan of wide rows in two steps, the filter's columns first and
        /// the others only for the rows that pass (`table/late_read.rs`); false: one step.
        pub late_materialization: bool, default = true
        /// Search a vector index for `ORDER BY <distance>(e, [..]) LIMIT k` when one ranks
        /// `e` by that metric (`scan/nearest.rs`); false: every such search is exact.
        pub use_index: bool, default = true
        /// Partitions a vector index search probes in each segment: more find more of the
        /// true nearest rows, and read more.
        pub nprobes: usize, default = 20
        /// For an `ivf_pq` index: re-rank this many times k candidates by their rows' exact
        /// vectors (read by take); unset: rank by the codes' estimates.
        pub refine_factor: Option<usize>, default = None
        /// An UPDATE writes row patches, only its assigned columns of the rows it changes,
        /// when those columns hold at most this share of the table's bytes (by its files'
        /// statistics), and rewrites the rows otherwise; 0: always rewrite; unset: the
        /// table's `patch_max_share` property, or natal's default (0.1).
        pub patch_max_share: Option<f64>, default = None
    }
}

impl ConfigExtension for NatalOptions {
    const PREFIX: &'static str = "natal";
}

/// Written out rather than by `extensions_options!`, whose entries leave out the `natal.`
/// prefix: `SHOW ALL` listed `.merge_fan_in`, and a Ballista client's settings (sent as
/// its entries, set by key on the scheduler and each executor) lost every `natal.` option.
impl ExtensionOptions for NatalOptions {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        ConfigField::set(self, key, value)
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        struct Entries(Vec<ConfigEntry>);
        impl Visit for Entries {
            fn some<V: std::fmt::Display>(
                &mut self,
                key: &str,
                value: V,
                description: &'static str,
            ) {
                self.0.push(ConfigEntry {
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    description,
                })
            }

            fn none(&mut self, key: &str, description: &'static str) {
                self.0.push(ConfigEntry {
                    key: key.to_string(),
                    value: None,
                    description,
                })
            }
        }
        let mut entries = Entries(Vec::new());
        ConfigField::visit(self, &mut entries, <Self as ConfigExtension>::PREFIX, "");
        entries.0
    }
}

/// Resets the session's natal `option` to its default (`RESET natal.<option>`, which
/// DataFusion 55 refuses for options outside its own).
pub(crate) fn reset_option(ctx: &datafusion::prelude::SessionContext, option: &str) -> Result<()> {
    let state = ctx.state_ref();
    let mut state = state.write();
    let options = state.config_mut().options_mut();
    let Some(natal) = options.extensions.get_mut::<NatalOptions>() else {
        return Err(datafusion::error::DataFusionError::Plan(
            "RESET: the session has no natal options (natal::datafusion::register adds them)"
                .into(),
        ));
    };
    ConfigField::reset(natal, option)
}

/// The merging policy a session asks of its writes (`Some(None)`: none); `None` where the
/// session has no natal options, which leaves the table handle's own.
pub(crate) fn session_merge(
    options: &ConfigOptions,
) -> Result<Option<Option<crate::table::TieredMerge>>> {
    let Some(natal) = options.extensions.get::<NatalOptions>() else {
        return Ok(None);
    };
    match natal.merge_fan_in {
        0 => Ok(Some(None)),
        1 => Err(datafusion::error::DataFusionError::Plan(
            "natal.merge_fan_in must be 0 (off) or at least 2, not 1".into(),
        )),
        fan_in => Ok(Some(Some(crate::table::TieredMerge { fan_in }))),
    }
}

/// The largest share of a table's bytes an UPDATE's assigned columns may hold for it to
/// write row patches, if the session sets one (else the table's property decides).
pub(crate) fn session_patch_max_share(options: &ConfigOptions) -> Option<f64> {
    (options.extensions.get::<NatalOptions>()).and_then(|natal| natal.patch_max_share)
}

/// Whether the session lets filtered scans of wide rows read in two steps (`true` where it
/// has no natal options).
pub(crate) fn session_late_materialization(options: &ConfigOptions) -> bool {
    (options.extensions.get::<NatalOptions>()).is_none_or(|natal| natal.late_materialization)
}
