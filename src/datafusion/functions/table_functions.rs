//! Maintenance as table functions — `natal_compact('t')`, `natal_checkpoint('t')`,
//! `natal_cleanup('t', keep_versions [, keep_newer_than_seconds [, min_file_age_seconds]])`,
//! `natal_restore('t', version)`, `natal_create_index('t', 'column' [, 'name' [, 'ivf_flat' | 'ivf_pq' [, 'options']]])`,
//! `natal_drop_index('t', 'name')`, `natal_clone('t', 'clone' [, version [, 'deep']])` (the
//! clone named as a table under the root or by a location) — schema changes as functions (`natal_add_column`,
//! `natal_drop_column`, `natal_rename_column`, `natal_alter_column`, for engines that do not
//! route `ALTER TABLE`; `natal_blob_options('t', 'col', inline_limit, dedicated_threshold,
//! pack_file_size)` for a blob column's later values) — DML as functions: `natal_delete`, `natal_update` — and reads a
//! scan does not give: one blob value's bytes (`natal_blob_read('t', 'column', rowid
//! [, offset, length])`, read when the plan is built), an index's segment placement, and
//! change reads (`natal_changes('t', from [, to])`, `change_feed.rs`).
//! Arguments are checked while planning; the work happens when the plan executes (so
//! `EXPLAIN` changes nothing) and yields one row of figures.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::DFSchema;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::session_state::SessionState;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use super::arguments::{literal_string, literal_u64};
use crate::datafusion::catalog::NatalSchemaProvider;
use crate::datafusion::leaf::{figures_stream, leaf_exec_methods, leaf_properties};
use crate::datafusion::progress_of;
use crate::datafusion::provider::{NatalTableProvider, ProviderView};
use crate::datafusion::write::dml::count_schema;
use crate::format::{FieldPath, Position, SchemaChange};
use crate::table::{
    CleanupPolicy, CompactOptions, IndexOptions, ProgressHandle, Table, VectorIndexOptions,
};

/// What a function does when executed.
#[derive(Debug, Clone)]
enum Operation {
    Compact,
    Checkpoint,
    Cleanup {
        keep_versions: u64,
        keep_newer_than_secs: u64,
        /// Unreferenced files younger than this are kept: a commit in flight may own them.
        min_file_age_secs: u64,
    },
    Restore {
        version: u64,
    },
    CreateIndex {
        name: String,
        column: String,
        /// A vector index's kind and options; `None` for a scalar index.
        vector: Option<VectorIndexOptions>,
    },
    DropIndex {
        name: String,
    },
    OptimizeIndex {
        name: String,
        stale_share: f64,
        options: VectorIndexOptions,
    },
    /// A schema change (`natal_add_column` and its kin), as `ALTER TABLE` makes it.
    Alter {
        change: SchemaChange,
    },
    /// A clone of the table's `version` (the latest if `None`) at `target`, shallow or
    /// deep.
    Clone {
        target: Box<Table>,
        version: Option<u64>,
        source_name: String,
        deep: bool,
    },
}

impl Operation {
    /// The figures each operation reports.
    fn columns(&self) -> &'static [&'static str] {
        match self {
            Operation::Compact => &[
                "version",
                "fragments_removed",
                "fragments_added",
                "rows_rewritten",
                "deleted_rows_dropped",
            ],
            Operation::Checkpoint => &["version", "relocation_entries"],
            Operation::Cleanup { .. } => &["versions_removed", "files_removed", "bytes_removed"],
            Operation::Restore { .. } => &["version", "live_rows"],
            Operation::CreateIndex { .. } => &[
                "version",
                "segment_seq",
                "segments_added",
                "fragments_indexed",
                "rows_indexed",
                "bytes_written",
            ],
            Operation::OptimizeIndex { .. } => &[
                "version",
                "segment_seq",
                "segments_added",
                "segments_replaced",
                "fragments_indexed",
                "rows_indexed",
                "bytes_written",
            ],
            Operation::DropIndex { .. } | Operation::Alter { .. } => &["version"],
            Operation::Clone { .. } => &["version", "live_rows", "files_copied", "bytes_copied"],
        }
    }

    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns()
                .iter()
                .map(|c| Field::new(*c, DataType::UInt64, true))
                .collect::<Vec<_>>(),
        ))
    }

    async fn run(self, table: Table, progress: ProgressHandle) -> crate::Result<Vec<Option<u64>>> {
        Ok(match self {
            Operation::Compact => {
                let options = CompactOptions {
                    progress,
                    ..Default::default()
                };
                let r = table.compact(options).await?;
                let figures = &r.figures;
                vec![
                    // NULL: nothing to compact, nothing published.
                    r.published.then_some(r.version),
                    Some(figures.fragments_removed as u64),
                    Some(figures.fragments_added as u64),
                    Some(figures.rows_rewritten),
                    Some(figures.deleted_rows_dropped),
                ]
            }
            Operation::Checkpoint => {
                let committed = table.checkpoint().await?;
                let snapshot = table.at_version(committed.version).await?;
                let entries = snapshot
                    .manifest()
                    .relocation_checkpoint
                    .as_ref()
                    .map(|c| c.entry_count);
                vec![Some(committed.version), entries]
            }
            Operation::Cleanup {
                keep_versions,
                keep_newer_than_secs,
                min_file_age_secs,
            } => {
                let policy = CleanupPolicy {
                    keep_versions: keep_versions as usize,
                    keep_newer_than: Duration::from_secs(keep_newer_than_secs),
                    min_file_age: Duration::from_secs(min_file_age_secs),
                };
                let r = table.with_progress(progress).cleanup(policy).await?;
                vec![
                    Some(r.versions_removed),
                    Some(r.files_removed),
                    Some(r.bytes_removed),
                ]
            }
            Operation::Restore { version } => {
                let committed = table.restore(version).await?;
                let snapshot = table.at_version(committed.version).await?;
                vec![Some(committed.version), Some(snapshot.count_rows())]
            }
            Operation::CreateIndex {
                name,
                column,
                vector,
            } => {
                let r = match vector {
                    Some(options) => {
                        let options = VectorIndexOptions {
                            progress,
                            ..options
                        };
                        table.create_vector_index(&name, &column, options).await?
                    }
                    None => {
                        let options = IndexOptions {
                            progress,
                            ..Default::default()
                        };
                        table.create_index_with(&name, &column, options).await?
                    }
                };
                let figures = &r.figures;
                vec![
                    // NULL: every fragment was covered, nothing published.
                    r.published.then_some(r.version),
                    figures.segment_seq,
                    Some(figures.segments_added),
                    Some(figures.fragments_indexed),
                    Some(figures.rows_indexed),
                    Some(figures.bytes_written),
                ]
            }
            Operation::DropIndex { name } => vec![Some(table.drop_index(&name).await?.version)],
            Operation::OptimizeIndex {
                name,
                stale_share,
                options,
            } => {
                let options = VectorIndexOptions {
                    progress,
                    ..options
                };
                let r = table
                    .optimize_vector_index(&name, stale_share, options)
                    .await?;
                let (figures, replaced) = &r.figures;
                vec![
                    r.published.then_some(r.version),
                    figures.segment_seq,
                    Some(figures.segments_added),
                    Some(*replaced),
                    Some(figures.fragments_indexed),
                    Some(figures.rows_indexed),
                    Some(figures.bytes_written),
                ]
            }
            Operation::Alter { change } => {
                let committed = table.alter(vec![change]).await?;
                // NULL: the change changed nothing, nothing published.
                vec![committed.published.then_some(committed.version)]
            }
            Operation::Clone {
                target,
                version,
                source_name,
                deep,
            } => {
                let version = match version {
                    Some(v) => v,
                    None => table.latest().await?.version(),
                };
                let clone_target = crate::table::CloneTarget {
                    store: target.store().underlying().clone(),
                    root: target.store().root().clone(),
                    options: crate::table::TableOptions {
                        progress,
                        ..target.options().clone()
                    },
                    source_name,
                };
                let (_, committed) = match deep {
                    true => table.deep_clone(version, clone_target).await?,
                    false => table.shallow_clone(version, clone_target).await?,
                };
                let figures = committed.figures;
                vec![
                    Some(committed.version),
                    Some(figures.live_rows),
                    Some(figures.files_copied),
                    Some(figures.bytes_copied),
                ]
            }
        })
    }
}

/// One `natal_*` function, bound to a schema's tables: those under its root and those
/// registered in it by `CREATE EXTERNAL TABLE`, wherever they live.
#[derive(Debug)]
pub struct NatalFunction {
    name: &'static str,
    tables: Arc<NatalSchemaProvider>,
}

impl NatalFunction {
    /// Every `natal_*` function, for registration under their names.
    pub fn all(tables: Arc<NatalSchemaProvider>) -> Vec<Arc<NatalFunction>> {
        [
            "natal_compact",
            "natal_checkpoint",
            "natal_cleanup",
            "natal_restore",
            "natal_delete",
            "natal_update",
            "natal_create_index",
            "natal_drop_index",
            "natal_optimize_index",
            "natal_add_column",
            "natal_drop_column",
            "natal_rename_column",
            "natal_alter_column",
            "natal_segment_placement",
            "natal_blob_read",
            "natal_blob_options",
            "natal_clone",
            "natal_changes",
        ]
        .into_iter()
        .map(|name| {
            Arc::new(NatalFunction {
                name,
                tables: tables.clone(),
            })
        })
        .collect()
    }

    /// The SQL name of the function.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl TableFunctionImpl for NatalFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let name = self.name;
        let table_name = literal_string(name, exprs, 0, "table name")?;
        if table_name.is_empty() || table_name.contains(['/', '@', '$']) {
            return Err(DataFusionError::Plan(format!(
                "{name}: '{table_name}' is not a table name"
            )));
        }
        let table = self.tables.table_handle(&table_name);
        if matches!(name, "natal_delete" | "natal_update") {
            return dml_provider(name, table, exprs);
        }
        if name == "natal_blob_read" {
            let column = literal_string(name, exprs, 1, "column")?;
            let row_id = literal_u64(name, exprs, 2, "row id")?.ok_or_else(|| {
                DataFusionError::Plan(format!("{name}: missing argument 3 (row id)"))
            })?;
            let range = match exprs.len() {
                3 => None,
                5 => {
                    let offset = literal_u64(name, exprs, 3, "offset")?.unwrap_or(0);
                    let length = literal_u64(name, exprs, 4, "length")?.unwrap_or(0);
                    Some((offset, length))
                }
                n => {
                    return Err(DataFusionError::Plan(format!(
                        "{name} takes a table, a column and a row id, and optionally an offset \
                         and a length; got {n} arguments"
                    )))
                }
            };
            return Ok(Arc::new(super::blob_read::BlobReadProvider {
                table,
                column,
                row_id,
                range,
            }));
        }
        if name == "natal_clone" {
            let location = literal_string(name, exprs, 1, "the clone's name or location")?;
            let version = literal_u64(name, exprs, 2, "version")?;
            let deep = match exprs.get(3) {
                None => false,
                Some(_) => match literal_string(name, exprs, 3, "'shallow' or 'deep'")?.as_str() {
                    "shallow" => false,
                    "deep" => true,
                    other => {
                        return Err(DataFusionError::Plan(format!(
                            "{name}: argument 4 is 'shallow' or 'deep', not '{other}'"
                        )))
                    }
                },
            };
            if exprs.len() > 4 {
                return Err(DataFusionError::Plan(format!(
                    "{name} takes a table, the clone's name or location and optionally a \
                     version and 'shallow' or 'deep'; got {} arguments",
                    exprs.len()
                )));
            }
            let target = self
                .tables
                .handle_at(args.session().runtime_env(), &location)?;
            let operation = Operation::Clone {
                target: Box::new(target),
                version,
                source_name: table_name.clone(),
                deep,
            };
            return Ok(Arc::new(OperationProvider {
                table,
                operation,
                name,
            }));
        }
        if name == "natal_changes" {
            return super::change_feed::provider(table, exprs);
        }
        if name == "natal_segment_placement" {
            let index = literal_string(name, exprs, 1, "index name")?;
            let nodes = literal_u64(name, exprs, 2, "nodes")?
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    DataFusionError::Plan(format!("{name}: argument 3 (nodes) must be at least 1"))
                })?;
            if exprs.len() > 3 {
                return Err(DataFusionError::Plan(format!(
                    "{name} takes at most 3 arguments, got {}",
                    exprs.len()
                )));
            }
            return Ok(Arc::new(super::placement::PlacementProvider {
                table,
                index,
                nodes,
            }));
        }
        let (operation, max_args) = match name {
            "natal_compact" => (Operation::Compact, 1),
            "natal_checkpoint" => (Operation::Checkpoint, 1),
            "natal_cleanup" => {
                let defaults = CleanupPolicy::default();
                let keep_versions = literal_u64(name, exprs, 1, "versions to keep")?
                    .unwrap_or(defaults.keep_versions as u64);
                if keep_versions == 0 {
                    return Err(DataFusionError::Plan(format!(
                        "{name}: keep at least 1 version"
                    )));
                }
                let keep_newer_than_secs =
                    literal_u64(name, exprs, 2, "seconds of history to keep")?
                        .unwrap_or(defaults.keep_newer_than.as_secs());
                let min_file_age_secs =
                    literal_u64(name, exprs, 3, "minimum age in seconds of a file to remove")?
                        .unwrap_or(defaults.min_file_age.as_secs());
                (
                    Operation::Cleanup {
                        keep_versions,
                        keep_newer_than_secs,
                        min_file_age_secs,
                    },
                    4,
                )
            }
            "natal_create_index" => {
                let column = literal_string(name, exprs, 1, "column")?;
                let index = match exprs.get(2) {
                    Some(_) => literal_string(name, exprs, 2, "index name")?,
                    None => format!("{column}_idx"),
                };
                if index.is_empty() {
                    return Err(DataFusionError::Plan(format!(
                        "{name}: the index name is empty"
                    )));
                }
                // A vector index: its kind, and its options as text.
                let vector = match exprs.get(3) {
                    None => None,
                    Some(_) => {
                        let kind = literal_string(name, exprs, 3, "index kind")?;
                        let options = match exprs.get(4) {
                            Some(_) => literal_string(name, exprs, 4, "index options")?,
                            None => String::new(),
                        };
                        let parsed = VectorIndexOptions::parse(&kind, &options)
                            .map_err(|e| DataFusionError::Plan(format!("{name}: {e}")))?;
                        Some(parsed)
                    }
                };
                (
                    Operation::CreateIndex {
                        name: index,
                        column,
                        vector,
                    },
                    5,
                )
            }
            "natal_optimize_index" => {
                let index = literal_string(name, exprs, 1, "index name")?;
                let text = match exprs.get(2) {
                    Some(_) => literal_string(name, exprs, 2, "options")?,
                    None => String::new(),
                };
                let (stale_share, options) = VectorIndexOptions::parse_optimize(&text)
                    .map_err(|e| DataFusionError::Plan(format!("{name}: {e}")))?;
                (
                    Operation::OptimizeIndex {
                        name: index,
                        stale_share,
                        options,
                    },
                    3,
                )
            }
            "natal_drop_index" => {
                let index = literal_string(name, exprs, 1, "index name")?;
                (Operation::DropIndex { name: index }, 2)
            }
            "natal_add_column"
            | "natal_drop_column"
            | "natal_rename_column"
            | "natal_alter_column"
            | "natal_blob_options" => schema_change(name, exprs, args.session())?,
            _ => {
                let version = literal_u64(name, exprs, 1, "version")?.ok_or_else(|| {
                    DataFusionError::Plan(format!("{name}: missing argument 2 (version)"))
                })?;
                (Operation::Restore { version }, 2)
            }
        };
        if exprs.len() > max_args {
            return Err(DataFusionError::Plan(format!(
                "{name} takes at most {max_args} arguments, got {}",
                exprs.len()
            )));
        }
        Ok(Arc::new(OperationProvider {
            table,
            operation,
            name,
        }))
    }
}

#[derive(Debug)]
struct OperationProvider {
    table: Table,
    operation: Operation,
    name: &'static str,
}

#[async_trait]
impl TableProvider for OperationProvider {
    fn schema(&self) -> SchemaRef {
        self.operation.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(OperationExec::new(
            self.table.clone(),
            self.operation.clone(),
            self.name,
            projection.cloned(),
        )))
    }
}

/// Runs one maintenance operation when executed.
#[derive(Debug)]
struct OperationExec {
    table: Table,
    operation: Operation,
    name: &'static str,
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
}

impl OperationExec {
    fn new(
        table: Table,
        operation: Operation,
        name: &'static str,
        projection: Option<Vec<usize>>,
    ) -> Self {
        let full = operation.schema();
        let schema = match &projection {
            Some(p) => Arc::new(full.project(p).unwrap_or_else(|_| full.as_ref().clone())),
            None => full,
        };
        let properties = leaf_properties(schema, 1, EmissionType::Final);
        Self {
            table,
            operation,
            name,
            projection,
            properties,
        }
    }
}

impl DisplayAs for OperationExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "NatalOperationExec: {}", self.name)
    }
}

impl ExecutionPlan for OperationExec {
    fn name(&self) -> &str {
        "NatalOperationExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    leaf_exec_methods!();

    fn execute(
        &self,
        _partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (table, operation) = (self.table.clone(), self.operation.clone());
        figures_stream(
            operation.schema(),
            self.projection.clone(),
            operation.run(table, progress_of(&context)),
        )
    }
}

/// The change `natal_add_column('t', 'c', 'TYPE')`, `natal_drop_column('t', 'c')`,
/// `natal_rename_column('t', 'a', 'b')` or `natal_alter_column('t', 'c', 'TYPE' | 'DROP NOT
/// NULL' | 'FIRST' | 'AFTER b')` asks for, with its argument count. Columns are field paths
/// (`'s.f'`, see [`FieldPath::parse`]); types are SQL types, read as a `CAST` reads them.
fn schema_change(name: &str, exprs: &[Expr], session: &dyn Session) -> Result<(Operation, usize)> {
    let column = |i: usize, what: &str| -> Result<FieldPath> {
        let path = literal_string(name, exprs, i, what)?;
        FieldPath::parse(&path).map_err(|e| DataFusionError::Plan(format!("{name}: {e}")))
    };
    let sql_type = |i: usize| -> Result<DataType> {
        let text = literal_string(name, exprs, i, "type")?;
        let state = session
            .as_any()
            .downcast_ref::<datafusion::execution::session_state::SessionState>()
            .ok_or_else(|| DataFusionError::Plan(format!("{name}: needs a SessionState")))?;
        crate::datafusion::write::alter::sql_type(state, &text)
            .map_err(|e| DataFusionError::Plan(format!("{name}: '{text}' is not a type: {e}")))
    };
    let change = match name {
        "natal_add_column" => SchemaChange::AddColumn {
            name: column(1, "column")?,
            data_type: sql_type(2)?,
        },
        "natal_drop_column" => SchemaChange::DropColumn {
            name: column(1, "column")?,
        },
        "natal_blob_options" => {
            let threshold = |i: usize, what: &str| {
                literal_u64(name, exprs, i, what)?.ok_or_else(|| {
                    DataFusionError::Plan(format!("{name}: missing argument {} ({what})", i + 1))
                })
            };
            SchemaChange::SetBlobOptions {
                name: column(1, "column")?,
                blob: crate::format::BlobColumn {
                    inline_limit: threshold(2, "inline_limit")?,
                    dedicated_threshold: threshold(3, "dedicated_threshold")?,
                    pack_file_size: threshold(4, "pack_file_size")?,
                },
            }
        }
        "natal_rename_column" => SchemaChange::RenameColumn {
            from: column(1, "column")?,
            to: literal_string(name, exprs, 2, "new name")?,
        },
        _ => {
            let column = column(1, "column")?;
            let what = literal_string(
                name,
                exprs,
                2,
                "type, 'DROP NOT NULL', 'FIRST' or 'AFTER <field>'",
            )?;
            let words: Vec<&str> = what.split_whitespace().collect();
            let is = |word: &str, expected: &str| word.eq_ignore_ascii_case(expected);
            match words.as_slice() {
                [drop, not, null] if is(drop, "drop") && is(not, "not") && is(null, "null") => {
                    SchemaChange::DropNotNull { name: column }
                }
                [first] if is(first, "first") => SchemaChange::Move {
                    name: column,
                    to: Position::First,
                },
                [after, _, ..] if is(after, "after") => {
                    let sibling = what.trim()[after.len()..].trim();
                    SchemaChange::Move {
                        name: column,
                        to: Position::After(sibling.trim_matches('"').to_string()),
                    }
                }
                _ => SchemaChange::SetDataType {
                    name: column,
                    data_type: sql_type(2)?,
                },
            }
        }
    };
    let arguments = match name {
        "natal_drop_column" => 2,
        "natal_blob_options" => 5,
        _ => 3,
    };
    Ok((Operation::Alter { change }, arguments))
}

/// `natal_delete('t', 'predicate')` and `natal_update('t', 'predicate', 'column', 'value'
/// [, 'column', 'value' ...])`: DML for engines that do not route `DELETE`/`UPDATE` to table
/// providers. Predicates (which may use `_rowid`) and values are SQL expressions, parsed
/// against the latest version when the plan is built; the rows change when it executes.
fn dml_provider(name: &str, table: Table, exprs: &[Expr]) -> Result<Arc<dyn TableProvider>> {
    let predicate = literal_string(name, exprs, 1, "predicate")?;
    let mut assignments = Vec::new();
    if name == "natal_update" {
        if exprs.len() < 4 || !exprs.len().is_multiple_of(2) {
            return Err(DataFusionError::Plan(format!(
                "{name} takes a table, a predicate, then pairs of column and value; got {} arguments",
                exprs.len()
            )));
        }
        for i in (2..exprs.len()).step_by(2) {
            assignments.push((
                literal_string(name, exprs, i, "column")?,
                literal_string(name, exprs, i + 1, "value")?,
            ));
        }
    } else if exprs.len() != 2 {
        return Err(DataFusionError::Plan(format!(
            "{name} takes a table and a predicate; got {} arguments",
            exprs.len()
        )));
    }
    Ok(Arc::new(DmlFunctionProvider {
        table,
        predicate,
        assignments,
    }))
}

#[derive(Debug)]
struct DmlFunctionProvider {
    table: Table,
    predicate: String,
    assignments: Vec<(String, String)>,
}

#[async_trait]
impl TableProvider for DmlFunctionProvider {
    fn schema(&self) -> SchemaRef {
        count_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let session = state
            .as_any()
            .downcast_ref::<SessionState>()
            .ok_or_else(|| {
                DataFusionError::Plan("natal DML functions need a DataFusion SessionState".into())
            })?;
        let snapshot = self.table.latest().await?;
        let view = ProviderView {
            version: None,
            system_columns: true,
        };
        let provider = NatalTableProvider::from_snapshot(self.table.clone(), view, snapshot);
        let all_columns = DFSchema::try_from(provider.schema().as_ref().clone())?;
        let predicate = session.create_logical_expr(&self.predicate, &all_columns)?;
        if self.assignments.is_empty() {
            return provider.delete_from(state, vec![predicate]).await;
        }
        let assignments = self
            .assignments
            .iter()
            .map(|(column, value)| {
                Ok((
                    column.clone(),
                    session.create_logical_expr(value, &all_columns)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        provider.update(state, assignments, vec![predicate]).await
    }
}
