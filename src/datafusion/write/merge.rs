//! `MERGE INTO` on natal tables ([`MergeExec`], behind `TableProvider::merge_into`).
//!
//! When executed (never while planning: `EXPLAIN MERGE` changes nothing) it reads the
//! source, pins the latest version of the target, and joins the two with DataFusion's own
//! join on the `ON` condition: target rows with their `_rowid` and `_rowaddr`, source rows
//! with a marker, so each joined row is matched, not matched by target, or not matched by
//! source. Each row fires the first `WHEN` clause whose kind and `AND` predicate it meets.
//! Updated rows keep their ids (point entries, as `UPDATE`), deleted rows become tombstones,
//! inserted rows are native; all of it is one commit (`Table::commit_changes`), rebased as an
//! update is. A MERGE whose updates assign columns that hold a small share of the table's
//! bytes (`natal.patch_max_share`, or the table's) writes them as row patches of the
//! assigned columns, beside its deletes and inserts, in one version (`Table::patch_changes`). A target row matched by more than one source row that
//! a clause would update or delete is an error naming the row's `ON` key, and nothing is
//! committed.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions, UInt64Array,
};
use arrow::compute::{
    and, and_not, cast, filter_record_batch, is_not_null, is_null, prep_null_mask_filter,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use datafusion::catalog::{MemTable, Session};
use datafusion::common::{DFSchema, DFSchemaRef, ScalarValue, TableReference};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::provider_as_source;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::session_state::SessionState;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::dml::{MergeIntoAction, MergeIntoClause, MergeIntoClauseKind};
use datafusion::logical_expr::{Expr, JoinType, LogicalPlanBuilder};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, PlanProperties,
};
use futures::TryStreamExt;

use super::dml::{count_schema, naming_the_vector_column};
use crate::datafusion::leaf::{figures_stream, leaf_properties};
use crate::datafusion::{progress_of, NatalTableProvider, ProviderView};
use crate::rowid::{RowAddress, RowId};
use crate::table::{RowChangeSet, Table, ROW_ADDR, ROW_ID};

/// The column marking a joined row's source side (true where the source row is present).
const SOURCE_MARK: &str = "__natal_merge_source";

fn plan_error(what: impl fmt::Display) -> DataFusionError {
    DataFusionError::Plan(format!("MERGE: {what}"))
}

/// What `merge_into` was handed, kept to run when executed.
#[derive(Debug, Clone)]
struct MergeSpec {
    state: SessionState,
    target: TableReference,
    merge_schema: DFSchemaRef,
    on: Expr,
    clauses: Vec<MergeIntoClause>,
    /// Defaults of target columns an INSERT clause leaves out.
    defaults: HashMap<String, Expr>,
    /// The target columns the clauses assign, when no clause deletes and they are few
    /// enough to write as row patches.
    patched: Option<Vec<String>>,
}

/// Runs a `MERGE INTO` when executed and yields one row: `count`, the rows inserted,
/// updated or deleted.
#[derive(Debug)]
pub struct MergeExec {
    table: Table,
    source: Arc<dyn ExecutionPlan>,
    spec: MergeSpec,
    properties: Arc<PlanProperties>,
}

impl MergeExec {
    pub(in crate::datafusion) fn try_new(
        provider: &NatalTableProvider,
        table: Table,
        state: &dyn Session,
        source: Arc<dyn ExecutionPlan>,
        (merge_schema, on, clauses): (DFSchemaRef, Expr, Vec<MergeIntoClause>),
    ) -> Result<Self> {
        let state = state
            .as_any()
            .downcast_ref::<SessionState>()
            .ok_or_else(|| plan_error("needs DataFusion's SessionState"))?
            .clone();
        let target = merge_schema
            .iter()
            .next()
            .and_then(|(q, _)| q.cloned())
            .ok_or_else(|| plan_error("the target's columns have no qualifier"))?;
        // Assignments name columns the table has, checked while planning.
        let user = provider.schema_of_user_columns();
        let mut assigned = Vec::new();
        for clause in &clauses {
            if let MergeIntoAction::Update(assignments) = &clause.action {
                for (column, _) in assignments {
                    assigned.push(assigned_column(&user, column)?);
                }
            }
        }
        let may_patch = !assigned.is_empty();
        let patched = (may_patch && provider.writes_patches(state.config_options(), &assigned))
            .then(|| {
                assigned
                    .iter()
                    .map(|&i| user.field(i).name().clone())
                    .collect()
            });
        let properties = leaf_properties(count_schema(), 1, EmissionType::Final);
        Ok(Self {
            table,
            source,
            spec: MergeSpec {
                state,
                target,
                merge_schema,
                on,
                clauses,
                defaults: provider.column_defaults().clone(),
                patched,
            },
            properties,
        })
    }
}

impl DisplayAs for MergeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let kinds: Vec<String> = self
            .spec
            .clauses
            .iter()
            .map(|c| {
                let action = match &c.action {
                    MergeIntoAction::Update(_) => "UPDATE",
                    MergeIntoAction::Insert { .. } => "INSERT",
                    MergeIntoAction::Delete => "DELETE",
                };
                format!("{:?} THEN {action}", c.kind.canonical())
            })
            .collect();
        write!(
            f,
            "NatalMergeExec: on={}, when=[{}]",
            self.spec.on,
            kinds.join(", ")
        )?;
        if self.spec.patched.is_some() {
            write!(f, ", updates as row patches")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for MergeExec {
    fn name(&self) -> &str {
        "NatalMergeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.source]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(
            &Arc<dyn PhysicalExpr>,
        ) -> Result<datafusion::common::tree_node::TreeNodeRecursion>,
    ) -> Result<datafusion::common::tree_node::TreeNodeRecursion> {
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [source] = <[_; 1]>::try_from(children)
            .map_err(|_| DataFusionError::Internal("MERGE takes one source".into()))?;
        Ok(Arc::new(Self {
            table: self.table.clone(),
            source,
            spec: self.spec.clone(),
            properties: self.properties.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let source = self.source.execute(partition, context.clone())?;
        let table = self.table.with_progress(progress_of(&context));
        let spec = self.spec.clone();
        figures_stream(count_schema(), None, async move {
            let count = merge(table, source, spec)
                .await
                .map_err(|e| crate::Error::External(Box::new(e)))?;
            Ok(vec![Some(count)])
        })
    }
}

/// The compiled clauses over the joined rows.
struct Clause {
    kind: MergeIntoClauseKind,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    action: Compiled,
}

enum Compiled {
    /// Per target column, its new value.
    Values(Vec<Arc<dyn PhysicalExpr>>, bool),
    Delete,
}

async fn merge(table: Table, source: SendableRecordBatchStream, spec: MergeSpec) -> Result<u64> {
    let source_schema = source.schema();
    let batches: Vec<RecordBatch> = source.try_collect().await?;
    let snapshot = Arc::new(table.latest().await?);
    let version = snapshot.version();
    let user = snapshot.schema().to_arrow();
    let target_columns = user.fields().len();

    // The source, with its marker, under its own qualifier.
    let source_qualifier = spec
        .merge_schema
        .iter()
        .nth(target_columns)
        .and_then(|(q, _)| q.cloned())
        .unwrap_or_else(|| TableReference::bare("__natal_merge_source_rows"));
    let source_table = marked_source(&source_schema, batches)?;
    let target_view = ProviderView {
        version: Some(version),
        system_columns: true,
    };
    // The join reads the version the commit plans against.
    let mut target_provider =
        NatalTableProvider::from_snapshot(table.clone(), target_view, snapshot.clone());
    if blobs_only_carried(&spec, snapshot.schema()) {
        target_provider = target_provider.copying_blobs();
    }

    let source_plan = LogicalPlanBuilder::scan(
        source_qualifier,
        provider_as_source(Arc::new(source_table)),
        None,
    )?
    .build()?;
    let plan = LogicalPlanBuilder::scan(
        spec.target.clone(),
        provider_as_source(Arc::new(target_provider)),
        None,
    )?
    .join_on(source_plan, join_type(&spec.clauses), vec![spec.on.clone()])?
    .build()?;
    let joined = DataFrame::new(spec.state.clone(), plan);
    let joined_schema: DFSchemaRef = Arc::new(joined.schema().clone());
    let clauses = compile(&spec, &joined_schema, &user)?;
    let key = on_key_columns(&spec, &joined_schema);
    let mut stream = joined.execute_stream().await?;

    let mut changes = RowChangeSet::default();
    let mut touched: HashSet<u64> = HashSet::new();
    let mut count = 0u64;
    let (id_at, addr_at) = (target_columns, target_columns + 1);
    while let Some(batch) = stream.try_next().await? {
        let rows = batch.num_rows();
        let ids = batch.column(id_at);
        let marks = batch.column(batch.num_columns() - 1);
        let (target_present, source_present) = (is_not_null(ids)?, is_not_null(marks)?);
        let mut open = BooleanArray::from(vec![true; rows]);
        for clause in &clauses {
            let kind = match clause.kind.canonical() {
                MergeIntoClauseKind::Matched => and(&target_present, &source_present)?,
                MergeIntoClauseKind::NotMatchedBySource => is_null(marks)?,
                _ => is_null(ids)?,
            };
            let mut fires = and(&kind, &open)?;
            if let Some(predicate) = &clause.predicate {
                let value = predicate.evaluate(&batch)?.into_array(rows)?;
                let value = value
                    .as_boolean_opt()
                    .ok_or_else(|| plan_error("a WHEN clause's AND condition is not a boolean"))?;
                // A NULL condition does not fire.
                let holds = match value.null_count() {
                    0 => value.clone(),
                    _ => prep_null_mask_filter(value),
                };
                fires = and(&fires, &holds)?;
            }
            open = and_not(&open, &fires)?;
            if fires.true_count() == 0 {
                continue;
            }
            let chosen = filter_record_batch(&batch, &fires)?;
            count += chosen.num_rows() as u64;
            let is_target_row = clause.kind.canonical() != MergeIntoClauseKind::NotMatchedByTarget;
            let id_pairs = if is_target_row {
                let pairs = system_pairs(&chosen, id_at, addr_at)?;
                for (i, (id, _)) in pairs.iter().enumerate() {
                    if !touched.insert(id.as_u64()) {
                        return Err(duplicate_match(&chosen, i, &key));
                    }
                }
                pairs
            } else {
                Vec::new()
            };
            match &clause.action {
                Compiled::Delete => changes.deleted.extend(id_pairs),
                Compiled::Values(values, inserts) => {
                    let columns = values
                        .iter()
                        .zip(user.fields())
                        .map(|(expr, field)| {
                            let value = expr.evaluate(&chosen)?.into_array(chosen.num_rows())?;
                            Ok(match value.data_type() == field.data_type() {
                                true => value,
                                false => cast(&value, field.data_type())?,
                            })
                        })
                        .collect::<Result<Vec<ArrayRef>>>()
                        // A list of another length than a vector column's names the column.
                        .map_err(|e| naming_the_vector_column(e, &user, None))?;
                    let new_rows = crate::io::table_batch(&user, columns)?;
                    match inserts {
                        true => changes.inserted.push(new_rows),
                        false => changes.updated.push((new_rows, id_pairs)),
                    }
                }
            }
        }
    }
    if changes.is_empty() {
        return Ok(0);
    }
    let planned = table.planned_at(snapshot);
    match &spec.patched {
        Some(names) => {
            let assigned = (names.iter())
                .map(|name| assigned_column(&user, name))
                .collect::<Result<Vec<_>>>()?;
            planned.patch_changes(&assigned, changes).await?
        }
        None => planned.commit_changes(changes).await?,
    };
    Ok(count)
}

/// Whether the target's blob columns are only carried through the MERGE: no `ON` or `WHEN`
/// condition and no value reads one, except an updated row's own value kept as it is. The
/// target is then read with external values as references, so an updated row's external
/// values stay external (not fetched, nor copied into the table).
fn blobs_only_carried(spec: &MergeSpec, schema: &crate::format::Schema) -> bool {
    let blobs: Vec<&str> = (schema.fields.iter())
        .filter(|f| f.blob.is_some())
        .map(|f| f.name.as_str())
        .collect();
    if blobs.is_empty() {
        return false;
    }
    let is_target_blob = |column: &datafusion::common::Column| {
        let of_target = (column.relation.as_ref()).is_none_or(|r| r.resolved_eq(&spec.target));
        of_target && blobs.contains(&column.name.as_str())
    };
    let reads_blob = |expr: &Expr| expr.column_refs().into_iter().any(is_target_blob);
    let mut read: Vec<&Expr> = vec![&spec.on];
    for clause in &spec.clauses {
        read.extend(&clause.predicate);
        match &clause.action {
            MergeIntoAction::Delete => {}
            MergeIntoAction::Insert { values, .. } => read.extend(values),
            MergeIntoAction::Update(assignments) => {
                for (column, value) in assignments {
                    let kept = matches!(value, Expr::Column(c)
                        if is_target_blob(c) && c.name == *column);
                    if !kept {
                        read.push(value);
                    }
                }
            }
        }
    }
    !read.into_iter().any(reads_blob)
}

/// The source's rows with a column [`SOURCE_MARK`] of `true`, which reads NULL in a joined
/// row that has no source row.
fn marked_source(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<MemTable> {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(SOURCE_MARK, DataType::Boolean, false));
    let marked_schema: SchemaRef = Arc::new(Schema::new(fields));
    let marked = batches
        .into_iter()
        .map(|b| {
            let mut columns = b.columns().to_vec();
            columns.push(Arc::new(BooleanArray::from(vec![true; b.num_rows()])));
            RecordBatch::try_new_with_options(
                marked_schema.clone(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
            )
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    MemTable::try_new(marked_schema, vec![marked])
}

/// The join the clauses need (target on the left): target rows no source row matches only
/// with a `NOT MATCHED BY SOURCE` clause, source rows no target row matches only with a
/// `NOT MATCHED` one.
fn join_type(clauses: &[MergeIntoClause]) -> JoinType {
    let by_source = clauses
        .iter()
        .any(|c| c.kind.canonical() == MergeIntoClauseKind::NotMatchedBySource);
    let by_target = clauses.iter().any(|c| c.kind.is_not_matched_by_target());
    match (by_source, by_target) {
        (true, true) => JoinType::Full,
        (true, false) => JoinType::Left,
        (false, true) => JoinType::Right,
        (false, false) => JoinType::Inner,
    }
}

/// The position among the target's user columns of `column`, an UPDATE's assignment
/// (maybe qualified); natal's system columns are not assignable.
fn assigned_column(user: &Schema, column: &str) -> Result<usize> {
    let name = column.rsplit('.').next().unwrap_or(column);
    if name == ROW_ID || name == ROW_ADDR {
        return Err(plan_error(format!(
            "{name} is assigned by natal and cannot be updated"
        )));
    }
    user.index_of(name)
        .map_err(|_| plan_error(format!("no column named '{column}' to update")))
}

/// Each clause's predicate and values as physical expressions over the joined rows.
fn compile(spec: &MergeSpec, joined: &DFSchemaRef, user: &SchemaRef) -> Result<Vec<Clause>> {
    let physical = |expr: &Expr| spec.state.create_physical_expr(expr.clone(), joined);
    let target_column = |name: &str| {
        Expr::Column(datafusion::common::Column::new(
            Some(spec.target.clone()),
            name,
        ))
    };
    spec.clauses
        .iter()
        .map(|clause| {
            let predicate = clause.predicate.as_ref().map(&physical).transpose()?;
            let action = match &clause.action {
                MergeIntoAction::Delete => Compiled::Delete,
                MergeIntoAction::Update(assignments) => {
                    let mut values: Vec<Expr> = user
                        .fields()
                        .iter()
                        .map(|f| target_column(f.name()))
                        .collect();
                    for (column, value) in assignments {
                        values[assigned_column(user, column)?] = value.clone();
                    }
                    Compiled::Values(values.iter().map(&physical).collect::<Result<_>>()?, false)
                }
                MergeIntoAction::Insert { columns, values } => {
                    let named: Vec<String> = match columns.is_empty() {
                        true => user.fields().iter().map(|f| f.name().clone()).collect(),
                        false => columns.clone(),
                    };
                    if named.len() != values.len() {
                        return Err(plan_error(format!(
                            "INSERT names {} columns but gives {} values",
                            named.len(),
                            values.len()
                        )));
                    }
                    let mut exprs = Vec::with_capacity(user.fields().len());
                    for field in user.fields() {
                        let given = named.iter().position(|n| n == field.name());
                        let expr = match (given, spec.defaults.get(field.name())) {
                            (Some(at), _) => values[at].clone(),
                            (None, Some(default)) => default.clone(),
                            (None, None) => {
                                Expr::Literal(ScalarValue::try_from(field.data_type())?, None)
                            }
                        };
                        exprs.push(expr);
                    }
                    for name in &named {
                        user.index_of(name).map_err(|_| {
                            plan_error(format!("no column named '{name}' to insert into"))
                        })?;
                    }
                    Compiled::Values(exprs.iter().map(&physical).collect::<Result<_>>()?, true)
                }
            };
            Ok(Clause {
                kind: clause.kind,
                predicate,
                action,
            })
        })
        .collect()
}

/// The target columns the `ON` condition names, with their positions in the joined rows:
/// what an error names a target row by.
fn on_key_columns(spec: &MergeSpec, joined: &DFSchema) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for column in spec.on.column_refs() {
        if column
            .relation
            .as_ref()
            .is_some_and(|r| r.resolved_eq(&spec.target))
        {
            if let Some(at) = joined.maybe_index_of_column(column) {
                out.push((column.name.clone(), at));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn duplicate_match(batch: &RecordBatch, row: usize, key: &[(String, usize)]) -> DataFusionError {
    let named: Vec<String> = key
        .iter()
        .map(|(name, at)| {
            let value = ScalarValue::try_from_array(batch.column(*at), row)
                .map_or_else(|_| "?".to_string(), |v| v.to_string());
            format!("{name} = {value}")
        })
        .collect();
    plan_error(format!(
        "the target row with {} is matched by more than one source row; \
         each target row may be changed once (nothing was committed)",
        if named.is_empty() {
            "this key".to_string()
        } else {
            named.join(", ")
        }
    ))
}

/// The (id, address) of each row of `batch` (target rows: both are present).
fn system_pairs(
    batch: &RecordBatch,
    id_at: usize,
    addr_at: usize,
) -> Result<Vec<(RowId, RowAddress)>> {
    let column = |at: usize| -> Result<&UInt64Array> {
        batch
            .column(at)
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| DataFusionError::Internal("the merge join lost _rowid".into()))
    };
    let (ids, addrs) = (column(id_at)?, column(addr_at)?);
    Ok(ids
        .values()
        .iter()
        .zip(addrs.values())
        .map(|(&id, &addr)| (RowId::from_u64(id), RowAddress::from_u64(addr)))
        .collect())
}
