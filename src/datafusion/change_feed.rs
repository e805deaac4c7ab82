//! `natal_changes('t', from [, to])`: the rows that changed after version `from` up to `to`
//! (the latest when planned, if not given), by row id ([`Table::changes`]): the table's
//! columns, then `_rowid`, `_change_type`, `_commit_version` and `_commit_timestamp`.
//! The versions are checked and pinned when the statement is planned; the change is read
//! when it runs.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::{StreamExt, TryStreamExt};

use super::catalog::blocking_for;
use super::functions::literal_u64;
use super::leaf::{leaf_exec_methods, leaf_properties};
use crate::table::{ScanRequest, Table};

const NAME: &str = "natal_changes";

/// The provider of one change read, its range pinned.
#[derive(Debug)]
pub(super) struct ChangesProvider {
    table: Table,
    from: u64,
    to: u64,
    schema: SchemaRef,
}

/// The provider `natal_changes(args)` names: checks the arguments, finds `to` (the latest
/// version if not given) and the schema its rows come in.
pub(super) fn provider(table: Table, args: &[Expr]) -> Result<Arc<dyn TableProvider>> {
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
    let (to, schema) = blocking_for(
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
            Ok((snapshot.version(), schema))
        },
    )?;
    if from > to {
        return Err(DataFusionError::Plan(format!(
            "{NAME}: version {from} is after the latest version ({to})"
        )));
    }
    Ok(Arc::new(ChangesProvider {
        table,
        from,
        to,
        schema,
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

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let schema = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => self.schema.clone(),
        };
        Ok(Arc::new(ChangesExec {
            table: self.table.clone(),
            range: (self.from, self.to),
            projection: projection.cloned(),
            properties: leaf_properties(schema, 1, EmissionType::Final),
        }))
    }
}

/// Reads the change when executed.
#[derive(Debug)]
struct ChangesExec {
    table: Table,
    range: (u64, u64),
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
}

impl DisplayAs for ChangesExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "NatalChangesExec: from={} to={}",
            self.range.0, self.range.1
        )
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
        let projection = self.projection.clone();
        let batches = futures::stream::once(async move {
            let changed = table.changes(from, to).await?;
            let batches = changed.batches.into_iter().map(move |batch| {
                Ok(match &projection {
                    Some(p) => batch.project(p)?,
                    None => batch,
                })
            });
            Ok::<_, DataFusionError>(futures::stream::iter(batches))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.properties.eq_properties.schema().clone(),
            batches.boxed(),
        )))
    }
}
