//! [`NatalTableProvider`]: a natal table (latest or pinned version, with or without system
//! columns) as a DataFusion `TableProvider`: scans, `INSERT`, `DELETE`, `UPDATE`.
//! Nothing mutates while planning: DML returns a [`DmlExec`] that does its work in `execute`.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Constraints, DFSchema};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::scan::exec::NatalScanExec;
use super::scan::filter::ExprPredicate;
use super::scan::lineage::{is_lineage, may_match, on_lineage};
use super::scan::partitions::{partition_fragments, Piece};
use super::scan::plan::{ScanOrigin, ScanPlan};
use super::scan::pruning::prune_fragments;
use super::scan::pushdown::{classify, index_probe, Classified};
use super::write::dml::{DmlExec, DmlKind, NatalSink};
use crate::format::Fragment;
use crate::table::{
    RowMatch, RowPredicate, Snapshot, Table, ROW_ADDR, ROW_CREATED_VERSION, ROW_ID,
    ROW_UPDATED_VERSION,
};

/// Which rows and columns a provider exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderView {
    /// `None`: the latest version at each scan; `Some(v)`: version `v`, read-only.
    pub version: Option<u64>,
    /// Adds `_rowid` and `_rowaddr` (the `t$rows` names).
    pub system_columns: bool,
}

/// A natal table (or one of its versions) as a DataFusion table: scans, INSERT, DELETE and UPDATE.
#[derive(Debug)]
pub struct NatalTableProvider {
    table: Table,
    view: ProviderView,
    /// The snapshot the provider was created with; its schema is the provider's.
    snapshot: Arc<Snapshot>,
    schema: SchemaRef,
    /// Columns' defaults (SQL `DEFAULT`), for INSERTs that omit them, and the first kept
    /// default expression that no longer plans (writes refuse rather than store NULL where
    /// the default was asked for). Planned when a write first asks: reads never need them.
    defaults: std::sync::OnceLock<PlannedDefaults>,
    /// PRIMARY KEY and UNIQUE, over the provider's column positions.
    constraints: Constraints,
    /// Which blob values scans read as references ([`Self::copying_blobs`]).
    blob_references: crate::BlobReferences,
    /// Scans read the snapshot resolved when the provider was made, even of the latest
    /// version ([`Self::for_one_statement`]); otherwise each scan of the latest resolves it.
    pinned_at_planning: bool,
}

/// Columns' defaults by name, and why one no longer plans (see `declared::planned_defaults`).
type PlannedDefaults = (std::collections::HashMap<String, Expr>, Option<String>);

fn system_fields() -> [Field; 4] {
    [
        Field::new(ROW_ID, DataType::UInt64, false),
        Field::new(ROW_ADDR, DataType::UInt64, false),
        Field::new(ROW_CREATED_VERSION, DataType::UInt64, true),
        Field::new(ROW_UPDATED_VERSION, DataType::UInt64, true),
    ]
}

impl NatalTableProvider {
    /// A provider reading `view` of `table` (the version is resolved now, once).
    pub async fn try_new(table: Table, view: ProviderView) -> crate::Result<Self> {
        let snapshot = match view.version {
            Some(v) => table.at_version(v).await?,
            None => table.latest().await?,
        };
        Ok(Self::from_snapshot(table, view, snapshot))
    }

    /// A provider whose schema is `snapshot`'s (the version it pins, or the latest one).
    pub fn from_snapshot(
        table: Table,
        view: ProviderView,
        snapshot: impl Into<Arc<Snapshot>>,
    ) -> Self {
        let snapshot = snapshot.into();
        let schema = table_schema(&snapshot, view.system_columns);
        let constraints = super::write::declared::constraints(snapshot.schema());
        Self {
            table,
            view,
            snapshot,
            schema,
            defaults: std::sync::OnceLock::new(),
            constraints,
            blob_references: crate::BlobReferences::None,
            pinned_at_planning: false,
        }
    }

    /// This provider for one statement, made as the statement is planned: its scans read
    /// the version resolved then, not the latest again (one LIST per statement, not one at
    /// planning and another per scan), and every scan of the statement reads the same one.
    pub(super) fn for_one_statement(mut self) -> Self {
        self.pinned_at_planning = true;
        self
    }

    /// This provider with its scans reading blob values as references, not bytes
    /// ([`crate::BlobReferences::Stored`]): for a statement that writes the rows it reads
    /// back to this table with those values untouched, so they stay where they are — an
    /// external value at its object, a stored one in its sidecar.
    pub(super) fn copying_blobs(mut self) -> Self {
        self.blob_references = crate::BlobReferences::Stored;
        self
    }

    /// This provider with its scans reading blob values as `references` say.
    pub(super) fn reading_blobs_as(mut self, references: crate::BlobReferences) -> Self {
        self.blob_references = references;
        self
    }

    /// The snapshot it resolved when it was made: the version it pins, or the latest then.
    pub(super) fn pinned_snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.clone()
    }

    /// Its user columns (no system columns), as of the version it resolved.
    pub(super) fn schema_of_user_columns(&self) -> SchemaRef {
        self.snapshot.schema().to_arrow()
    }

    /// Its columns' defaults (SQL `DEFAULT`), by column name.
    pub(super) fn column_defaults(&self) -> &std::collections::HashMap<String, Expr> {
        &self.planned_defaults().0
    }

    fn planned_defaults(&self) -> &PlannedDefaults {
        self.defaults
            .get_or_init(|| super::write::declared::planned_defaults(self.snapshot.schema()))
    }

    /// The table the provider reads and writes.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Which version and columns it exposes.
    pub fn view(&self) -> ProviderView {
        self.view
    }

    async fn current(&self) -> Result<Arc<Snapshot>> {
        match self.view.version.is_some() || self.pinned_at_planning {
            true => Ok(self.snapshot.clone()),
            false => Ok(Arc::new(self.table.latest().await?)),
        }
    }

    fn writable(&self, what: &str) -> Result<()> {
        match self.view.version {
            Some(v) => Err(DataFusionError::Plan(format!(
                "{what} is not allowed on version {v} of a table: pinned versions are read-only"
            ))),
            None => Ok(()),
        }
    }

    /// Refuses a write that might need a default natal can no longer plan.
    fn defaults_plan(&self, what: &str) -> Result<()> {
        match &self.planned_defaults().1 {
            Some(broken) => Err(DataFusionError::Plan(format!("{what}: {broken}"))),
            None => Ok(()),
        }
    }

    /// The schema filters and DML predicates are compiled against: user columns plus both
    /// system columns (what `delete_where`/`update_where` predicates see).
    pub(super) fn predicate_schema(&self) -> SchemaRef {
        table_schema(&self.snapshot, true)
    }
}

/// Whether a natal scan applies `filter` itself: every filter but a volatile one
/// (`random() < 0.1`: evaluating it twice would not be the same filter) and one calling an
/// async function (only DataFusion's own async exec can evaluate it).
pub(super) fn pushdown_of(filter: &Expr) -> TableProviderFilterPushDown {
    if filter.is_volatile() || calls_async(filter) {
        TableProviderFilterPushDown::Unsupported
    } else if on_lineage(filter) {
        // Lineage columns come after the rows are read: DataFusion filters them, and the
        // scan only skips fragments that cannot match.
        TableProviderFilterPushDown::Inexact
    } else {
        TableProviderFilterPushDown::Exact
    }
}

/// True when `expr` calls an async scalar function anywhere.
fn calls_async(expr: &Expr) -> bool {
    expr.exists(|e| Ok(matches!(e, Expr::ScalarFunction(call) if call.func.as_async().is_some())))
        .unwrap_or(true)
}

/// A snapshot's user columns, plus the system columns if asked.
fn table_schema(snapshot: &Snapshot, system_columns: bool) -> SchemaRef {
    let user = snapshot.schema().to_arrow();
    let mut fields: Vec<Field> = user.fields().iter().map(|f| f.as_ref().clone()).collect();
    if system_columns {
        fields.extend(system_fields());
    }
    Arc::new(Schema::new(fields).with_metadata(user.metadata().clone()))
}

#[async_trait]
impl TableProvider for NatalTableProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.column_defaults().get(column)
    }

    fn constraints(&self) -> Option<&Constraints> {
        Some(&self.constraints)
    }

    async fn merge_into(
        &self,
        state: &dyn Session,
        source: Arc<dyn ExecutionPlan>,
        merge_schema: datafusion::common::DFSchemaRef,
        on: Expr,
        clauses: Vec<datafusion::logical_expr::dml::MergeIntoClause>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("MERGE")?;
        self.defaults_plan("MERGE")?;
        if self.view.system_columns {
            return Err(DataFusionError::Plan(format!(
                "MERGE into {ROW_ID}-bearing views is not allowed; merge into the table itself"
            )));
        }
        let table = self.writer(state)?;
        let exec = super::write::merge::MergeExec::try_new(
            self,
            table,
            state,
            source,
            (merge_schema, on, clauses),
        )?;
        Ok(Arc::new(exec))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // `_rowid` sets and ranges become masks; every other filter is evaluated while the
        // scan reads. A volatile one (`random() < 0.1`) stays with DataFusion: evaluating it
        // twice would not be the same filter. So does one calling an async function, which
        // only DataFusion's own async exec can evaluate.
        Ok(filters.iter().map(|f| pushdown_of(f)).collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let snapshot = self.current().await?;
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let projection = projection.cloned().unwrap_or(all);
        let (plan, output) = self.plan_scan(state, snapshot, &projection, filters, limit, None)?;
        Ok(Arc::new(NatalScanExec::new(plan, output)))
    }

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("INSERT")?;
        self.defaults_plan("INSERT")?;
        if self.view.system_columns {
            return Err(DataFusionError::Plan(format!(
                "INSERT into {ROW_ID}-bearing views is not allowed; insert into the table itself"
            )));
        }
        let overwrite = match insert_op {
            InsertOp::Append => false,
            InsertOp::Overwrite => true,
            other => {
                return Err(DataFusionError::NotImplemented(format!(
                    "{other} is not supported by natal tables"
                )))
            }
        };
        let sink = NatalSink::new(
            self.writer(state)?,
            self.snapshot.schema().to_arrow(),
            overwrite,
        );
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }

    async fn delete_from(
        &self,
        state: &dyn Session,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("DELETE")?;
        let rows = self.row_match(state, &filters)?;
        Ok(Arc::new(DmlExec::new(
            self.writer(state)?,
            DmlKind::Delete { rows },
        )))
    }

    async fn update(
        &self,
        state: &dyn Session,
        assignments: Vec<(String, Expr)>,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("UPDATE")?;
        let mut rows = self.row_match(state, &filters)?;
        // Rows whose filter and new values read no blob column are rewritten with their
        // blob values as references: never fetched, never copied.
        let schema = self.snapshot.schema();
        let reads_blobs = filters
            .iter()
            .chain(assignments.iter().map(|(_, expr)| expr))
            .flat_map(|expr| expr.column_refs())
            .any(|c| {
                schema
                    .field_by_name(&c.name)
                    .is_some_and(|f| f.blob.is_some())
            });
        if !reads_blobs {
            rows.blob_references = crate::BlobReferences::Stored;
        }
        let user = self.snapshot.schema().to_arrow();
        // New values are computed from the row as a predicate sees it: its user columns,
        // then `_rowid` and `_rowaddr`.
        let df_schema = DFSchema::try_from(self.predicate_schema().as_ref().clone())?;
        let mut values = Vec::new();
        let reads: Vec<usize> = (assignments.iter())
            .flat_map(|(_, expr)| expr.column_refs())
            .filter_map(|c| user.index_of(&c.name).ok())
            .collect();
        for (column, expr) in assignments {
            if column == ROW_ID || column == ROW_ADDR {
                return Err(DataFusionError::Plan(format!(
                    "{column} is assigned by natal and cannot be updated"
                )));
            }
            let index = user.index_of(&column).map_err(|_| {
                DataFusionError::Plan(format!("no column named '{column}' to update"))
            })?;
            values.push((index, state.create_physical_expr(expr, &df_schema)?));
        }
        let assigned: Vec<usize> = values.iter().map(|(index, _)| *index).collect();
        let patch = self.writes_patches(state.config_options(), &assigned);
        Ok(Arc::new(DmlExec::new(
            self.writer(state)?,
            DmlKind::Update {
                rows,
                values,
                schema: user,
                patch,
                reads,
            },
        )))
    }
}

impl NatalTableProvider {
    /// Whether an update assigning the user columns at `assigned` writes row patches: when
    /// they hold at most the session's patch share (else the table's) of the table's bytes.
    pub(in crate::datafusion) fn writes_patches(
        &self,
        options: &datafusion::common::config::ConfigOptions,
        assigned: &[usize],
    ) -> bool {
        let schema = self.snapshot.schema();
        let ids: Vec<u32> = (assigned.iter())
            .filter_map(|&index| schema.fields.get(index).map(|f| f.id))
            .collect();
        let most = super::options::session_patch_max_share(options)
            .unwrap_or_else(|| self.snapshot.patch_max_share());
        self.snapshot.patches_suit(&ids, most)
    }

    /// The plan of a scan of `snapshot` (a version of this provider's table with its
    /// schema) and its output schema: `projection` of the provider's columns, `filters`
    /// (all applied by the scan), at most `limit` rows; `partitions` as given, or of about
    /// equal bytes for the session's target partitions. Planning the same arguments over
    /// the same version makes the same plan, in any process.
    pub(super) fn plan_scan(
        &self,
        state: &dyn Session,
        snapshot: Arc<Snapshot>,
        projection: &[usize],
        filters: &[Expr],
        limit: Option<usize>,
        partitions: Option<Vec<Vec<Piece>>>,
    ) -> Result<(ScanPlan, SchemaRef)> {
        let output = Arc::new(self.schema.project(projection)?);
        // Scan order: user columns as projected, then _rowid, then _rowaddr.
        let names: Vec<&str> = output.fields().iter().map(|f| f.name().as_str()).collect();
        let columns: Vec<String> = names
            .iter()
            .filter(|n| **n != ROW_ID && **n != ROW_ADDR && !is_lineage(n))
            .map(|n| n.to_string())
            .collect();
        let with_row_id = names.contains(&ROW_ID);
        let with_row_addr = names.contains(&ROW_ADDR);
        let with_lineage = names.iter().any(|n| is_lineage(n));
        let mut scan_order: Vec<&str> = columns.iter().map(String::as_str).collect();
        if with_row_id {
            scan_order.push(ROW_ID);
        }
        if with_row_addr {
            scan_order.push(ROW_ADDR);
        }
        if with_lineage {
            scan_order.extend([ROW_CREATED_VERSION, ROW_UPDATED_VERSION]);
        }
        let output_order = names
            .iter()
            .map(|n| scan_order.iter().position(|s| s == n).unwrap_or(0))
            .collect();
        let (lineage_filters, filters): (Vec<Expr>, Vec<Expr>) =
            filters.iter().cloned().partition(on_lineage);
        let Classified {
            row_ids,
            row_id_range: row_id_range_all,
            column_filters,
        } = classify(&filters);
        let index = index_probe(&snapshot, &column_filters).map(Arc::new);
        let candidates: Vec<&Fragment> = snapshot.manifest().fragments.iter().collect();
        let conjunction = column_filters.into_iter().reduce(|a, b| a.and(b));
        let keep = match (&conjunction, &partitions) {
            (Some(conjunction), None) => {
                let df_schema = DFSchema::try_from(self.predicate_schema().as_ref().clone())?;
                let predicate = state.create_physical_expr(conjunction.clone(), &df_schema)?;
                prune_fragments(
                    &candidates,
                    snapshot.schema(),
                    predicate,
                    self.predicate_schema(),
                )
            }
            // Given pieces were pruned where they were planned.
            _ => vec![true; candidates.len()],
        };
        let keep: Vec<bool> = (keep.into_iter().zip(&candidates))
            .map(|(keep, f)| keep && lineage_filters.iter().all(|e| may_match(e, f)))
            .collect();
        let filter = conjunction
            .map(|c| ExprPredicate::try_new(state, &snapshot, c, Some(&columns)).map(Arc::new))
            .transpose()?;
        let fragments: Vec<&Fragment> = candidates
            .iter()
            .zip(&keep)
            .filter(|(_, keep)| **keep)
            .map(|(f, _)| *f)
            .collect();
        let fragments_pruned = candidates.len() - fragments.len();
        let partitions = match partitions {
            Some(given) => given,
            None => {
                // A take reads few rows: splitting its fragments would only add readers.
                let partition_count = if row_ids.is_some() {
                    state
                        .config()
                        .target_partitions()
                        .clamp(1, fragments.len().max(1))
                } else if small_scan(&fragments, state.config_options()) {
                    1
                } else {
                    state.config().target_partitions()
                };
                partition_fragments(&fragments, partition_count)
            }
        };
        let plan = ScanPlan {
            snapshot,
            origin: ScanOrigin {
                table: self.table.clone(),
                system_columns: self.view.system_columns,
                projection: projection.to_vec(),
                filters: filters.to_vec(),
            },
            columns,
            with_row_id,
            with_row_addr,
            with_lineage,
            output_order,
            row_ids,
            row_id_range: row_id_range_all,
            partitions,
            fragments_pruned,
            filter,
            index,
            // Every filter DataFusion handed over is applied here, so a limit is too.
            limit,
            filter_selectivity: f64::from(
                state
                    .config_options()
                    .optimizer
                    .default_filter_selectivity
                    .min(100),
            ) / 100.0,
            blob_sizes: Vec::new(),
            blob_references: self.blob_references,
            late_materialization: super::session_late_materialization(state.config_options()),
        };
        Ok((plan, output))
    }

    /// The handle a write runs on: with the session's merging policy
    /// (`SET natal.merge_fan_in`), where the session has natal's options.
    fn writer(&self, state: &dyn Session) -> Result<Table> {
        Ok(match super::session_merge(state.config_options())? {
            Some(merge) => self.table.with_merge(merge),
            None => self.table.clone(),
        })
    }

    /// The rows a DELETE or UPDATE with `filters` names: `_rowid` sets and ranges as masks
    /// (a take, as in a SELECT), the other filters evaluated as the scan reads.
    fn row_match(&self, state: &dyn Session, filters: &[Expr]) -> Result<RowMatch> {
        if filters.iter().any(on_lineage) {
            return Err(DataFusionError::Plan(format!(
                "DELETE and UPDATE cannot filter on {ROW_CREATED_VERSION} or \
                 {ROW_UPDATED_VERSION} yet; select the rows' _rowid first and filter on it"
            )));
        }
        let Classified {
            row_ids,
            row_id_range,
            column_filters,
        } = classify(filters);
        let filter = column_filters
            .into_iter()
            .reduce(|a, b| a.and(b))
            .map(|c| {
                ExprPredicate::try_new(state, &self.snapshot, c, None)
                    .map(|p| Arc::new(p) as Arc<dyn RowPredicate>)
            })
            .transpose()?;
        Ok(RowMatch {
            filter,
            row_ids,
            row_id_range,
            blob_references: crate::BlobReferences::None,
        })
    }
}

/// Whether `fragments` are too few bytes for splitting their read to pay: less than
/// DataFusion's `repartition_file_min_size`, below which it reads a Parquet file as one
/// partition. Such a scan reads in one partition, its fragments in table order, so a query
/// that names no order gets the rows in the order they were written, as from one small
/// Parquet file or DataFusion's own tables.
fn small_scan(fragments: &[&Fragment], config: &datafusion::config::ConfigOptions) -> bool {
    let bytes: u64 = (fragments.iter())
        .flat_map(|f| f.files.iter().map(|d| d.file_size_bytes))
        .sum();
    let below = u64::try_from(config.optimizer.repartition_file_min_size).unwrap_or(u64::MAX);
    bytes < below
}
