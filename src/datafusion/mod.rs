//! natal in DataFusion: table providers, the scan exec, SQL writes and the catalog. This is
//! the only module that builds plans.
//!
//! ```no_run
//! # async fn demo() -> datafusion::error::Result<()> {
//! let ctx = datafusion::prelude::SessionContext::new();
//! natal::datafusion::register(&ctx, "./warehouse")?;
//! ctx.sql("CREATE EXTERNAL TABLE t (id BIGINT) STORED AS NATAL LOCATION './warehouse/t'").await?;
//! ctx.sql("INSERT INTO t VALUES (1), (2)").await?.collect().await?;
//! ctx.sql("SELECT id, _rowid FROM \"t$rows\"").await?.show().await?;
//! # Ok(()) }
//! ```

mod catalog;
mod dml;
mod filter;
mod functions;
mod guard;
mod leaf;
mod metadata;
mod provider;
mod pruning;
mod rowid_list;
mod scan;

use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider};
use datafusion::error::Result;
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::SessionContext;

pub use catalog::{
    resolve_location, url_of, NatalSchemaProvider, NatalTableFactory, TableKind, TableName,
};
pub use dml::{DmlExec, DmlKind, NatalSink};
pub use functions::NatalFunction;
pub use guard::DmlGuard;
pub use provider::{NatalTableProvider, ProviderView};
pub use rowid_list::{FoldRowIdLists, RowIdIn};
pub use scan::NatalScanExec;

/// Set on a session (`SessionConfig::with_extension(Arc::new(NatalProgress(..)))`) to be
/// told how loads (`INSERT`) and compactions (`natal_compact`) are going.
pub struct NatalProgress(pub Arc<dyn crate::table::Progress>);

/// The session's progress reporter, if it set one.
pub(crate) fn progress_of(
    context: &datafusion::execution::TaskContext,
) -> crate::table::ProgressHandle {
    crate::table::ProgressHandle(
        context
            .session_config()
            .get_extension::<NatalProgress>()
            .map(|p| p.0.clone()),
    )
}

/// A handle on the natal table at `location` (a directory or URL), for the Rust API.
pub fn open_table(ctx: &SessionContext, location: &str) -> Result<crate::table::Table> {
    let (store, path) = resolve_location(&ctx.runtime_env(), location)?;
    Ok(crate::table::Table::open(store, path))
}

/// Registers natal with a session: `STORED AS NATAL`, the tables under `root` (a directory
/// or object-store URL) as the default schema, so `SELECT * FROM t` finds `<root>/t`, the
/// [`DmlGuard`], and the [`FoldRowIdLists`] rewrite.
pub fn register(ctx: &SessionContext, root: &str) -> Result<()> {
    let (store, path) = resolve_location(&ctx.runtime_env(), root)?;
    let state = ctx.state();
    let options = state.config_options();
    let catalog_name = options.catalog.default_catalog.clone();
    let schema_name = options.catalog.default_schema.clone();
    drop(state);
    ctx.state_ref()
        .write()
        .table_factories_mut()
        .insert("NATAL".to_string(), Arc::new(NatalTableFactory));
    let catalog = match ctx.catalog(&catalog_name) {
        Some(catalog) => catalog,
        None => {
            let catalog: Arc<dyn CatalogProvider> = Arc::new(MemoryCatalogProvider::new());
            ctx.register_catalog(&catalog_name, catalog.clone());
            catalog
        }
    };
    for function in NatalFunction::all(store.clone(), path.clone()) {
        ctx.register_udtf(function.name(), function);
    }
    catalog.register_schema(
        &schema_name,
        Arc::new(NatalSchemaProvider::new(store, path)),
    )?;
    ctx.add_analyzer_rule(Arc::new(DmlGuard));
    ctx.state_ref()
        .write()
        .register_function_rewrite(Arc::new(FoldRowIdLists))?;
    Ok(())
}
