//! Natal tables and scans received from another process (`codec.rs` decodes them): on a
//! Ballista scheduler, [`SentTable`] is the table a client's plan names, pinned at the
//! version the client planned; on an executor, [`SentScan`] is the scan a task reads.
//! Decoding cannot wait for storage, so both open the table at that version when first
//! used, and plan exactly as the provider did (`NatalTableProvider::plan_scan`).
//!
//! Writes are refused on the cluster: a natal statement commits one version through one
//! handle, and a plan spread over executors has no one place to commit from.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::SessionState;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use tokio::sync::OnceCell;

use crate::datafusion::catalog::{resolve_location, store_url_of};
use crate::datafusion::functions::external_blob::SessionStores;
use crate::datafusion::provider::{NatalTableProvider, ProviderView};
use crate::datafusion::scan::exec::NatalScanExec;
use crate::datafusion::scan::plan::ScanPlan;
use crate::format::{WireScan, WireTable};
use crate::table::{Table, TableOptions};

/// What a write on a cluster is told.
fn refused(what: &str, table: &WireTable) -> DataFusionError {
    DataFusionError::Plan(format!(
        "{what} into the natal table at {} cannot run on a Ballista cluster: natal commits \
         each statement as one version from one session; run it on a local natal session \
         (the natal CLI without --ballista) — reads of the new version then run on the \
         cluster",
        table.url
    ))
}

/// The table at `url`, through `runtime`'s stores the first time this process opens it;
/// later, the same handle. Every task of an executor opens the version its plan pinned,
/// and a kept handle has that manifest and the footers earlier tasks read in its caches
/// (as a session's catalog keeps its handles), instead of asking the store again per task.
pub(in crate::datafusion) fn open(url: &str, runtime: &RuntimeEnv) -> Result<Table> {
    static OPENED: std::sync::OnceLock<std::sync::Mutex<HashMap<String, Table>>> =
        std::sync::OnceLock::new();
    let opened = OPENED.get_or_init(Default::default);
    if let Some(table) = opened.lock().ok().and_then(|o| o.get(url).cloned()) {
        return Ok(table);
    }
    let (store, root) = resolve_location(runtime, url).map_err(|e| {
        DataFusionError::Plan(format!(
            "the natal table at {url} is not reachable from this Ballista process ({e}): \
             its store must be registered in every scheduler's and executor's runtime \
             (natal-scheduler, natal-executor: --root as the clients', credentials in their \
             environment)"
        ))
    })?;
    let options = TableOptions {
        store_url: Some(store_url_of(url)?),
        external_stores: Some(SessionStores::of(runtime)),
        ..TableOptions::default()
    };
    let table = Table::open_with(store, root, options);
    if let Ok(mut opened) = opened.lock() {
        opened
            .entry(url.to_string())
            .or_insert_with(|| table.clone());
    }
    Ok(table)
}

/// A provider of `wire`'s version.
async fn provider(wire: &WireTable, runtime: &RuntimeEnv) -> Result<NatalTableProvider> {
    let table = open(&wire.url, runtime)?;
    let snapshot = table.at_version(wire.version).await?;
    let view = ProviderView {
        version: Some(wire.version),
        system_columns: wire.system_columns,
    };
    Ok(NatalTableProvider::from_snapshot(table, view, snapshot))
}

/// Refuses columns other than those the plan was made with: another table was created at
/// that place since.
fn same_columns(wire: &WireTable, found: &SchemaRef, planned: &SchemaRef) -> Result<()> {
    let names = |s: &SchemaRef| {
        s.fields()
            .iter()
            .map(|f| f.name().clone())
            .collect::<Vec<_>>()
    };
    if names(found) != names(planned) {
        return Err(DataFusionError::Plan(format!(
            "version {} of the natal table at {} does not have the columns the query was \
             planned with: was the table dropped and created again?",
            wire.version, wire.url
        )));
    }
    Ok(())
}

/// A natal table a client's plan names, pinned at the version the client planned: scans
/// plan natal's scan as a file scan Ballista divides among tasks.
#[derive(Debug)]
pub struct SentTable {
    wire: WireTable,
    schema: SchemaRef,
}

impl SentTable {
    pub(crate) fn new(wire: WireTable, schema: SchemaRef) -> Self {
        Self { wire, schema }
    }

    /// Where it is and the version read.
    pub(crate) fn wire(&self) -> &WireTable {
        &self.wire
    }
}

#[async_trait]
impl TableProvider for SentTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| crate::datafusion::provider::pushdown_of(f))
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let provider = provider(&self.wire, state.runtime_env()).await?;
        same_columns(&self.wire, &provider.schema(), &self.schema)?;
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let projection = projection.cloned().unwrap_or(all);
        let snapshot = provider.pinned_snapshot();
        let (plan, output) =
            provider.plan_scan(state, snapshot, &projection, filters, limit, None)?;
        Ok(NatalScanExec::new(plan, output).as_data_source())
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        _input: Arc<dyn ExecutionPlan>,
        _insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(refused("INSERT", &self.wire))
    }

    async fn delete_from(
        &self,
        _state: &dyn Session,
        _filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(refused("DELETE", &self.wire))
    }

    async fn update(
        &self,
        _state: &dyn Session,
        _assignments: Vec<(String, Expr)>,
        _filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(refused("UPDATE", &self.wire))
    }

    async fn merge_into(
        &self,
        _state: &dyn Session,
        _source: Arc<dyn ExecutionPlan>,
        _merge_schema: datafusion::common::DFSchemaRef,
        _on: Expr,
        _clauses: Vec<datafusion::logical_expr::dml::MergeIntoClause>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(refused("MERGE", &self.wire))
    }
}

/// A scan a task received: what its provider was asked, planned again over the same
/// version (once per task, whichever partition reads first) through the task's stores.
pub(crate) struct SentScan {
    /// Its table and request; `partitions` is empty (the pieces travel with the files).
    pub wire: WireScan,
    /// `wire.filters`, decoded.
    pub filters: Vec<Expr>,
    /// Its output columns as planned.
    pub output: SchemaRef,
    runtime: Arc<RuntimeEnv>,
    config: SessionConfig,
    planned: OnceCell<Arc<ScanPlan>>,
}

impl SentScan {
    pub(crate) fn new(
        wire: WireScan,
        filters: Vec<Expr>,
        output: SchemaRef,
        runtime: Arc<RuntimeEnv>,
        config: SessionConfig,
    ) -> Self {
        Self {
            wire,
            filters,
            output,
            runtime,
            config,
            planned: OnceCell::new(),
        }
    }

    /// The version it reads.
    pub(crate) fn version(&self) -> u64 {
        self.wire.table.version
    }

    /// Its plan: the provider's over the same version, pieces left to the files.
    pub(crate) async fn plan(&self) -> Result<Arc<ScanPlan>> {
        let planned = self.planned.get_or_try_init(|| async {
            let wire = &self.wire;
            let provider = provider(&wire.table, &self.runtime).await?;
            let provider = provider.reading_blobs_as(blob_references(wire.blob_references)?);
            let state: SessionState = SessionStateBuilder::new()
                .with_config(self.config.clone())
                .with_runtime_env(self.runtime.clone())
                .build();
            let snapshot = provider.pinned_snapshot();
            let (mut plan, output) = provider.plan_scan(
                &state,
                snapshot,
                &wire.projection,
                &self.filters,
                wire.limit,
                Some(Vec::new()),
            )?;
            same_columns(&wire.table, &output, &self.output)?;
            plan.blob_sizes = wire.blob_sizes.clone();
            Ok::<_, DataFusionError>(Arc::new(plan))
        });
        Ok(planned.await?.clone())
    }
}

/// The wire's code for how blob values are read.
pub(crate) fn blob_references(code: u32) -> Result<crate::BlobReferences> {
    match code {
        0 => Ok(crate::BlobReferences::None),
        1 => Ok(crate::BlobReferences::External),
        2 => Ok(crate::BlobReferences::Stored),
        other => Err(DataFusionError::from(crate::Error::PlanPayload(format!(
            "unknown blob reading {other}"
        )))),
    }
}

/// [`blob_references`] the other way.
pub(crate) fn blob_references_code(references: crate::BlobReferences) -> u32 {
    match references {
        crate::BlobReferences::None => 0,
        crate::BlobReferences::External => 1,
        crate::BlobReferences::Stored => 2,
    }
}
