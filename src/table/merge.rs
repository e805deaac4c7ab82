//! Tiered merging of small fragments as writes add them ([`TieredMerge`]; on by default,
//! `TableOptions::merge`).
//!
//! Every update writes its rows to a new fragment, so a table taking many small updates
//! gathers many small fragments, and a take or a scan pays a file open for each. Merging
//! them as they accumulate keeps their number bounded. The policy is size-tiered, as in LSM
//! trees: a small fragment's tier is the logarithm of its live rows in base `fan_in`, and
//! `fan_in` small fragments of one tier are merged into one of the next. So at most
//! `fan_in - 1` small fragments wait per tier, and a row is rewritten at most
//! log_fan_in(fragment size / commit size) times before its fragment is no longer small:
//! the merging a commit pays for, amortized, does not grow with the table's history.
//!
//! A merge is a compaction of those fragments, committed as its own version right after
//! the write (as Delta's auto compaction is): rows keep their ids, and a merge that loses a
//! race with another writer is simply not published.

use std::collections::BTreeMap;

use super::commit::{Action, NewFragment};
use super::maintenance::index_coverage;
use super::snapshot::Snapshot;
use super::{Committed, ProgressHandle, RowChanges, Table};
use crate::error::Result;
use crate::format::{Fragment, IndexSection};

/// Merge small fragments after every write that adds rows, `fan_in` of one size tier at a
/// time. A fragment is small while it has fewer than half the table's rows per fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TieredMerge {
    /// Fragments of one tier merged at once (at least 2).
    pub fan_in: u32,
}

impl Default for TieredMerge {
    fn default() -> Self {
        Self { fan_in: 8 }
    }
}

/// Tiered merges repack a packed sidecar whose live values hold less than this fraction of
/// it, as compaction does by default.
const REPACK_BELOW: f64 = 0.5;

/// Merge rounds after one write: each round's output may fill the next tier, and the
/// number of tiers below a fragment's size is small (≤ 32 for any fan-in ≥ 2).
const MAX_ROUNDS: usize = 32;

impl Table {
    /// Commits a write that adds rows, then runs the merges its handle's [`TieredMerge`]
    /// asks for.
    ///
    /// The write is published whatever happens to the merges: a merge that fails (a
    /// conflict with a concurrent writer, a store error) leaves the table as the write left
    /// it, and the next write plans again. Its error is not the write's.
    /// `captured`: the rows the write removes, captured as it read them (change data).
    pub(super) async fn commit_write_then_merge(
        &self,
        read: &Snapshot,
        action: Action,
        captured: Option<Vec<NewFragment>>,
    ) -> Result<Committed> {
        if action.changes_nothing() {
            if let Some(captured) = &captured {
                super::write::delete_written(&self.store, read.schema(), captured).await;
            }
            return Ok(Committed::unchanged(read, RowChanges::default()));
        }
        let written = self.commit_manifest(read, action, captured).await?;
        let committed = Committed::of(&written);
        let Some(policy) = self.options().merge else {
            return Ok(committed);
        };
        // Most writes fill no tier: that is decided on the manifest just published, without
        // a request.
        let full = plan_tiers(
            &written.fragments,
            &written.indexes,
            written.fragment_row_target(),
            fan_in(policy),
        );
        if !full.is_empty() {
            let _ = self.merge_small_fragments(policy).await;
        }
        Ok(committed)
    }

    /// Merges full tiers of small fragments of the latest version until none is full;
    /// returns the versions published.
    pub async fn merge_small_fragments(&self, policy: TieredMerge) -> Result<Vec<u64>> {
        let mut published = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let read = self.latest().await?;
            let target = read.manifest().fragment_row_target();
            let groups = plan_tiers(
                &read.manifest().fragments,
                &read.manifest().indexes,
                target,
                fan_in(policy),
            );
            let report = self
                .rewrite_groups(
                    &read,
                    groups,
                    target,
                    (Some(REPACK_BELOW), &ProgressHandle::default()),
                )
                .await?;
            if !report.published {
                break;
            }
            published.push(report.version);
        }
        Ok(published)
    }
}

fn fan_in(policy: TieredMerge) -> u64 {
    u64::from(policy.fan_in.max(2))
}

/// The tier of a small fragment: ⌊log_fan_in(live rows)⌋; fragments without live rows
/// share the lowest.
fn tier(fragment: &Fragment, fan_in: u64) -> u32 {
    fragment.live_rows().max(1).ilog(fan_in)
}

/// The groups to merge: for every tier holding at least `fan_in` small fragments (of the
/// same index coverage), all of them, cut into groups of at most `target` live rows.
fn plan_tiers(
    fragments: &[Fragment],
    indexes: &IndexSection,
    target: u64,
    fan_in: u64,
) -> Vec<Vec<Fragment>> {
    let coverage = index_coverage(indexes);
    let mut tiers: BTreeMap<(u32, Vec<bool>), Vec<&Fragment>> = BTreeMap::new();
    for fragment in fragments {
        if (fragment.physical_rows as u64) < target / 2 {
            let key = (tier(fragment, fan_in), coverage(fragment));
            tiers.entry(key).or_default().push(fragment);
        }
    }
    let mut groups = Vec::new();
    for members in tiers.into_values() {
        if (members.len() as u64) < fan_in {
            continue;
        }
        let mut group: Vec<Fragment> = Vec::new();
        let mut rows = 0u64;
        for fragment in members {
            if rows + fragment.live_rows() > target && !group.is_empty() {
                groups.push(std::mem::take(&mut group));
                rows = 0;
            }
            rows += fragment.live_rows();
            group.push(fragment.clone());
        }
        groups.push(group);
    }
    // A lone fragment gains nothing from being rewritten.
    groups.retain(|g| g.len() > 1);
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(id: u32, rows: u32) -> Fragment {
        Fragment {
            id,
            physical_rows: rows,
            files: Vec::new(),
            deletion: None,
            row_ids: crate::format::FragmentRowIds::Native,
            lineage: Default::default(),
            patches: Vec::new(),
        }
    }

    fn ids(groups: &[Vec<Fragment>]) -> Vec<Vec<u32>> {
        groups
            .iter()
            .map(|g| g.iter().map(|f| f.id).collect())
            .collect()
    }

    #[test]
    fn merges_only_full_tiers_of_small_fragments() {
        let indexes = IndexSection::default();
        // Target 1,000 rows: fragments under 500 are small. Tiers in base 4: 64..255 is 3,
        // 16..63 is 2.
        let mut fragments = vec![fragment(0, 1000), fragment(1, 600)];
        fragments.extend((2..5).map(|id| fragment(id, 100)));
        fragments.extend((5..9).map(|id| fragment(id, 20)));
        // Three of tier 3 wait; four of tier 2 merge; the large ones stay.
        assert_eq!(
            ids(&plan_tiers(&fragments, &indexes, 1000, 4)),
            [vec![5, 6, 7, 8]]
        );
        fragments.push(fragment(9, 200));
        assert_eq!(
            ids(&plan_tiers(&fragments, &indexes, 1000, 4)),
            [vec![5, 6, 7, 8], vec![2, 3, 4, 9]]
        );
    }

    #[test]
    fn a_full_tier_is_cut_at_the_target() {
        let indexes = IndexSection::default();
        // Target 100: fragments under 50 are small; tier 1 in base 4 is 4..15 rows.
        let fragments: Vec<Fragment> = (0..12).map(|id| fragment(id, 15)).collect();
        let groups = plan_tiers(&fragments, &indexes, 100, 4);
        assert_eq!(
            ids(&groups),
            [(0..6).collect::<Vec<_>>(), (6..12).collect::<Vec<_>>()]
        );
        // A remainder of one is left alone.
        let groups = plan_tiers(&fragments[..7], &indexes, 100, 4);
        assert_eq!(ids(&groups), [(0..6).collect::<Vec<_>>()]);
    }
}
