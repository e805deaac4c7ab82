//! `natal_changes('t', from [, to])`: the rows that changed after version `from` up to `to`
//! (the latest when planned, if not given), by row id ([`Table::changes`]): the table's
//! columns, then `_rowid`, `_change_type`, `_commit_version` and `_commit_timestamp`.
//! The versions are checked and pinned when the statement is planned; the change is read
//! when it runs, only as far as the query needs: no value when it selects no column of the
//! table, and no old value when its filters on `_change_type` keep only inserts and
//! postimages.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::{StreamExt, TryStreamExt};

use super::arguments::literal_u64;
use crate::datafusion::catalog::blocking_for;
use crate::datafusion::leaf::{leaf_exec_methods, leaf_properties};
use crate::table::{
    ChangeRequest, ChangeType, ScanRequest, Snapshot, Table, CHANGE_COLUMNS, CHANGE_TYPE,
    COMMIT_TIMESTAMP, COMMIT_VERSION,
};

const NAME: &str = "natal_changes";

/// The provider of one change read, its range pinned.
#[derive(Debug)]
pub(in crate::datafusion) struct ChangesProvider {
    table: Table,
    from: u64,
    to: u64,
    /// Version `to` as read when planning (not when sent): the read does not read it again.
    to_read: Option<Arc<Snapshot>>,
    schema: SchemaRef,
    /// Received by a Ballista scheduler: the change is read when the scheduler plans, and
    /// its rows go to the executors in the plan (an exec of its own would not reach them).
    sent: bool,
}

impl ChangesProvider {
    /// The provider a client sent (`codec.rs`), over `table` opened here.
    pub(in crate::datafusion) fn sent(
        table: Table,
        (from, to): (u64, u64),
        schema: SchemaRef,
    ) -> Self {
        Self {
            table,
            from,
            to,
            to_read: None,
            schema,
            sent: true,
        }
    }

    /// The table it reads.
    pub(in crate::datafusion) fn table(&self) -> &Table {
        &self.table
    }

    /// The versions compared: (from, to).
    pub(in crate::datafusion) fn range(&self) -> (u64, u64) {
        (self.from, self.to)
    }
}

/// The provider `natal_changes(args)` names: checks the arguments, finds `to` (the latest
/// version if not given) and the schema its rows come in.
pub(in crate::datafusion) fn provider(
    table: Table,
    args: &[Expr],
) -> Result<Arc<dyn TableProvider>> {
    let missing = || DataFusionError::Plan(format!("{NAME}: missing argument 2 (from version)"));
    let from = literal_u64(NAME, args, 1, "from version")?.ok_or_else(missing)?;
    let to = literal_u64(NAME, args, 2, "to version")?;
    if args.len() > 3 {
        return Err(DataFusionError::Plan(format!(
            "{NAME} takes a table, a version to compare from and optionally one to compare \
             to; got {} arguments",
            args.len()
        )));
    }
    if to.is_some_and(|to| from > to) {
        return Err(DataFusionError::Plan(format!(
            "{NAME}: the first version ({from}) must not be after the second ({})",
            to.unwrap_or_default()
        )));
    }
    let handle = table.clone();
    let (to_read, schema) = blocking_for(
        NAME,
        "; call Table::changes from Rust instead",
        async move {
            let snapshot = match to {
                Some(to) => handle.at_version(to).await?,
                None => handle.latest().await?,
            };
            let request = ScanRequest {
                with_row_id: true,
                ..Default::default()
            };
            let schema = crate::table::change_schema(snapshot.scan_schema(&request)?.as_ref());
            Ok((Arc::new(snapshot), schema))
        },
    )?;
    let to = to_read.version();
    if from > to {
        return Err(DataFusionError::Plan(format!(
            "{NAME}: version {from} is after the latest version ({to})"
        )));
    }
    Ok(Arc::new(ChangesProvider {
        table,
        from,
        to,
        to_read: Some(to_read),
        schema,
        sent: false,
    }))
}

#[async_trait]
impl TableProvider for ChangesProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok((filters.iter())
            .map(|f| match change_kinds(f) {
                Some(_) => TableProviderFilterPushDown::Exact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let projection = projection.cloned().unwrap_or(all);
        let schema = Arc::new(self.schema.project(&projection)?);
        // The table's columns come first, then `_rowid` and the change's three.
        let user = self.schema.fields().len() - CHANGE_COLUMNS;
        let columns = (projection.iter().filter(|&&i| i < user))
            .map(|&i| self.schema.field(i).name().clone())
            .collect();
        let mut kinds: Option<Vec<ChangeType>> = None;
        for filter in filters {
            let allowed = change_kinds(filter).ok_or_else(|| {
                DataFusionError::Internal(format!("{NAME}: a filter it cannot apply: {filter}"))
            })?;
            kinds = Some(match kinds {
                None => allowed,
                Some(kinds) => kinds.into_iter().filter(|k| allowed.contains(k)).collect(),
            });
        }
        let exec = ChangesExec {
            table: self.table.clone(),
            range: (self.from, self.to),
            to_read: self.to_read.clone(),
            request: ChangeRequest {
                columns: Some(columns),
                kinds,
                // Which version deleted a row is found only if shown.
                undated_deletes: !(schema.fields().iter())
                    .any(|f| [COMMIT_VERSION, COMMIT_TIMESTAMP].contains(&f.name().as_str())),
            },
            properties: leaf_properties(schema.clone(), 1, EmissionType::Final),
        };
        if !self.sent {
            return Ok(Arc::new(exec));
        }
        let batches: Vec<_> = exec.execute(0, state.task_ctx())?.try_collect().await?;
        Ok(MemorySourceConfig::try_new_exec(&[batches], schema, None)?)
    }
}

/// The kinds of change `filter` keeps, if it is a test of `_change_type` against literals
/// (`=`, `IN`, `OR`s of them) that the read can apply itself.
fn change_kinds(filter: &Expr) -> Option<Vec<ChangeType>> {
    let is_kind_column = |e: &Expr| matches!(e, Expr::Column(c) if c.name == CHANGE_TYPE);
    let kind = |e: &Expr| match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _) => {
            // A name no change has keeps nothing, which the read applies as well.
            Some(ChangeType::parse(s))
        }
        _ => None,
    };
    match filter {
        Expr::BinaryExpr(b) if b.op == Operator::Eq => {
            let named = match (is_kind_column(&b.left), is_kind_column(&b.right)) {
                (true, _) => kind(&b.right)?,
                (_, true) => kind(&b.left)?,
                _ => return None,
            };
            Some(named.into_iter().collect())
        }
        Expr::BinaryExpr(b) if b.op == Operator::Or => {
            let mut kinds = change_kinds(&b.left)?;
            kinds.extend(change_kinds(&b.right)?);
            Some(kinds)
        }
        Expr::InList(list) if !list.negated && is_kind_column(&list.expr) => {
            let named = list.list.iter().map(kind).collect::<Option<Vec<_>>>()?;
            Some(named.into_iter().flatten().collect())
        }
        _ => None,
    }
}

/// Reads the change when executed.
#[derive(Debug)]
struct ChangesExec {
    table: Table,
    range: (u64, u64),
    to_read: Option<Arc<Snapshot>>,
    request: ChangeRequest,
    properties: Arc<PlanProperties>,
}

impl DisplayAs for ChangesExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "NatalChangesExec: from={} to={}",
            self.range.0, self.range.1
        )?;
        if let Some(kinds) = &self.request.kinds {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            write!(f, ", kinds=[{}]", names.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for ChangesExec {
    fn name(&self) -> &str {
        "NatalChangesExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    leaf_exec_methods!();

    fn execute(
        &self,
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (table, (from, to)) = (self.table.clone(), self.range);
        let to_read = self.to_read.clone();
        let request = self.request.clone();
        let output = self.properties.eq_properties.schema().clone();
        // The versions are diffed when first polled; values are read chunk by chunk.
        let batches = futures::stream::once(async move {
            let changed = match to_read {
                Some(to) => table.change_stream_to(from, &to, request).await?,
                None => table.change_stream(from, to, request).await?,
            };
            // The read's columns in the order the plan asked for them.
            let batches = changed.batches.map(move |batch| {
                let batch = batch?;
                let positions = (output.fields().iter())
                    .map(|f| batch.schema().index_of(f.name()))
                    .collect::<std::result::Result<Vec<usize>, _>>()?;
                Ok::<_, DataFusionError>(batch.project(&positions)?)
            });
            Ok::<_, DataFusionError>(batches)
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.properties.eq_properties.schema().clone(),
            batches.boxed(),
        )))
    }
}
