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
pub mod cluster;
mod damaged;
mod functions;
mod leaf;
mod metadata;
mod options;
mod provider;
mod scan;
mod session_rules;
mod write;

use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider};
use datafusion::error::Result;
use datafusion::execution::FunctionRegistry;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::prelude::SessionContext;

pub use catalog::{
    location_url, names_a_file, resolve_location, url_creating_directory, NatalSchemaProvider,
    NatalTableFactory, TableKind, TableName,
};
pub use cluster::codec::{NatalLogicalCodec, NatalPhysicalCodec};
pub use cluster::sent::SentTable;
pub use damaged::DamagedTable;
pub use functions::external_blob::{ExternalBlobFunction, SessionStores};
pub use functions::table_functions::NatalFunction;
pub use options::NatalOptions;
pub(crate) use options::{session_late_materialization, session_merge};
pub use provider::{NatalTableProvider, ProviderView};
pub use scan::blob_sizes::{BlobSizes, OctetLength};
pub use scan::exec::NatalScanExec;
pub use scan::file_source::NatalFileSource;
pub use scan::rowid_list::{FoldRowIdLists, RowIdIn};
pub use write::dml::{DmlExec, DmlKind, NatalSink};
pub use write::guard::DmlGuard;
pub use write::merge::MergeExec;
pub use write::statement::{is_natal_statement, parse, rewrite, run_statement, sql};

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
    let runtime = ctx.runtime_env();
    let (store, path) = resolve_location(&runtime, location)?;
    let options = crate::table::TableOptions {
        external_stores: Some(SessionStores::of(&runtime)),
        ..Default::default()
    };
    Ok(crate::table::Table::open_with(store, path, options))
}

/// natal's scalar functions, which a session that plans or runs natal's plans needs:
/// `natal_external_blob`, the vector distances (`l2_distance`, `cosine_distance`,
/// `inner_product`), and `octet_length` reading a blob column's sizes — over
/// `octet_length`, the session's own, unless that is natal's already.
pub(crate) fn scalar_functions(
    octet_length: Option<Arc<datafusion::logical_expr::ScalarUDF>>,
) -> Vec<datafusion::logical_expr::ScalarUDF> {
    let mut functions = vec![datafusion::logical_expr::ScalarUDF::new_from_impl(
        ExternalBlobFunction::new(),
    )];
    let natal_already = |f: &Arc<datafusion::logical_expr::ScalarUDF>| {
        f.inner().downcast_ref::<OctetLength>().is_some()
    };
    if let Some(strings) = octet_length.filter(|f| !natal_already(f)) {
        functions.push(datafusion::logical_expr::ScalarUDF::new_from_impl(
            OctetLength::new(strings),
        ));
    }
    functions.extend(functions::vector_distance::VectorDistance::all());
    functions
}

/// Registers natal with a session: `STORED AS NATAL`, the tables under `root` (a directory
/// or object-store URL) as the default schema, so `SELECT * FROM t` finds `<root>/t`, the
/// [`DmlGuard`], the [`FoldRowIdLists`] rewrite and the `natal.*` options ([`NatalOptions`]).
pub fn register(ctx: &SessionContext, root: &str) -> Result<()> {
    register_with(ctx, root, CatalogOptions::default())
}

/// How the tables [`register_with`] names are read.
#[derive(Debug, Clone, Copy, Default)]
pub struct CatalogOptions {
    /// How old a table's latest version a statement may read, when this session listed
    /// the table's versions that recently: such statements send no request to find the
    /// latest (a LIST otherwise), and another writer's commit may go unseen for up to this
    /// long; this session's own commits are always seen. Zero (the default): every
    /// statement lists. DataFusion's listing tables cache their file lists for
    /// `datafusion.runtime.list_files_cache_ttl` (by default, forever).
    pub staleness_limit: std::time::Duration,
}

/// [`register`], with `options`.
pub fn register_with(ctx: &SessionContext, root: &str, options: CatalogOptions) -> Result<()> {
    let root_url = url_creating_directory(root)?;
    let (store, path) = resolve_location(&ctx.runtime_env(), root)?;
    let state = ctx.state();
    let config = state.config_options();
    let catalog_name = config.catalog.default_catalog.clone();
    let schema_name = config.catalog.default_schema.clone();
    let session_progress = crate::table::ProgressHandle(
        state
            .config()
            .get_extension::<NatalProgress>()
            .map(|p| p.0.clone()),
    );
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
    let tables = Arc::new(
        NatalSchemaProvider::new(store, path)
            .with_store_url(root_url[..url::Position::BeforePath].to_string())
            .with_staleness_limit(options.staleness_limit)
            .with_progress(session_progress)
            .with_external_stores(SessionStores::of(&ctx.runtime_env())),
    );
    for function in NatalFunction::all(tables.clone()) {
        ctx.register_udtf(function.name(), function);
    }
    catalog.register_schema(&schema_name, tables)?;
    for function in scalar_functions(ctx.udf("octet_length").ok()) {
        // An application's own function of a distance's name keeps it.
        let distance = |f: &datafusion::logical_expr::ScalarUDF| {
            (f.inner()
                .downcast_ref::<functions::vector_distance::VectorDistance>())
            .is_some()
        };
        let taken = ctx.udf(function.name()).is_ok_and(|f| !distance(&f));
        if !(taken && distance(&function)) {
            ctx.register_udf(function);
        }
    }
    ctx.add_analyzer_rule(Arc::new(DmlGuard));
    let state_ref = ctx.state_ref();
    let mut state = state_ref.write();
    state.register_function_rewrite(Arc::new(FoldRowIdLists))?;
    let extensions = &mut state.config_mut().options_mut().extensions;
    if extensions.get::<NatalOptions>().is_none() {
        extensions.insert(NatalOptions::default());
    }
    // A session's physical rules are fixed once built: the state is rebuilt with natal's,
    // everything else it held kept as it was (`session_rules.rs`).
    let has = |name: &str| (state.physical_optimizers().iter()).any(|r| r.name() == name);
    let mut missing: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> = Vec::new();
    if !has(BlobSizes::NAME) {
        missing.push(Arc::new(BlobSizes));
    }
    if !has(scan::nearest::NearestRows::NAME) {
        missing.push(Arc::new(scan::nearest::NearestRows));
    }
    if !missing.is_empty() {
        *state = session_rules::with_physical_rules(&state, missing);
    }
    Ok(())
}
