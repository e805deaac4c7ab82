//! [`ExprPredicate`]: a scan's column filters as natal's in-reader [`RowPredicate`], so they
//! are evaluated while reading (and reported `Exact`) instead of by a `FilterExec` above.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::DFSchema;
use datafusion::datasource::physical_plan::parquet::{
    PagePruningAccessPlanFilter, ParquetAccessPlan, ParquetFileMetrics, RowGroupAccess,
};
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::PhysicalExpr;

use crate::table::{predicate_layout, RowPredicate, Snapshot, ROW_ADDR, ROW_ID};

/// A DataFusion expression over a table's columns, compiled for the batches a scan reads to
/// evaluate it.
#[derive(Debug)]
pub(crate) struct ExprPredicate {
    columns: Vec<String>,
    needs_row_id: bool,
    needs_row_addr: bool,
    expr: Arc<dyn PhysicalExpr>,
    /// The conjuncts on one column, judged against page min/max (DataFusion's own page
    /// pruning, so NaN and null handling match its Parquet scan); `None` if there are none.
    pages: Option<PagePruningAccessPlanFilter>,
}

impl ExprPredicate {
    /// Compiles `filter` (over `snapshot`'s columns, system columns included).
    pub(crate) fn try_new(state: &dyn Session, snapshot: &Snapshot, filter: Expr) -> Result<Self> {
        let referenced: Vec<String> = filter
            .column_refs()
            .into_iter()
            .map(|c| c.name.clone())
            .collect();
        // Table order, so equal filters read equal batches.
        let columns: Vec<String> = snapshot
            .schema()
            .fields
            .iter()
            .map(|f| f.name.clone())
            .filter(|name| referenced.contains(name))
            .collect();
        let mut predicate = Self {
            columns,
            needs_row_id: referenced.iter().any(|c| c == ROW_ID),
            needs_row_addr: referenced.iter().any(|c| c == ROW_ADDR),
            expr: datafusion::physical_expr::expressions::lit(true),
            pages: None,
        };
        let probe = snapshot.scan_schema(&predicate_layout(&predicate))?;
        let schema = DFSchema::try_from(probe.as_ref().clone())?;
        predicate.expr = state.create_physical_expr(filter, &schema)?;
        let pages = PagePruningAccessPlanFilter::new(&predicate.expr, probe);
        predicate.pages = (pages.filter_number() > 0).then_some(pages);
        Ok(predicate)
    }
}

impl fmt::Display for ExprPredicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)
    }
}

impl RowPredicate for ExprPredicate {
    fn columns(&self) -> &[String] {
        &self.columns
    }

    fn needs_row_id(&self) -> bool {
        self.needs_row_id
    }

    fn needs_row_addr(&self) -> bool {
        self.needs_row_addr
    }

    fn evaluate(&self, batch: &RecordBatch) -> crate::Result<BooleanArray> {
        let outcome = self
            .expr
            .evaluate(batch)
            .and_then(|value| value.into_array(batch.num_rows()))
            .map_err(|e| crate::Error::External(Box::new(e)))?;
        match outcome.as_boolean_opt() {
            Some(keep) => Ok(keep.clone()),
            None => Err(crate::Error::invalid(format!(
                "filter {} is {}, not boolean",
                self.expr,
                outcome.data_type()
            ))),
        }
    }

    fn prunes_pages(&self) -> bool {
        self.pages.is_some()
    }

    fn select_pages(&self, metadata: &ParquetMetaData, schema: &SchemaRef) -> Option<RowSelection> {
        let pages = self.pages.as_ref()?;
        let row_groups = metadata.row_groups();
        let metrics = ExecutionPlanMetricsSet::new();
        let plan = pages.prune_plan_with_page_index(
            ParquetAccessPlan::new_all(row_groups.len()),
            schema,
            metadata.file_metadata().schema_descr(),
            metadata,
            &ParquetFileMetrics::new(0, "", &metrics),
        );
        // The whole file's rows, skipped row groups included (DataFusion's own conversion
        // leaves them out).
        let mut selectors = Vec::new();
        for (access, group) in plan.into_inner().into_iter().zip(row_groups) {
            let rows = group.num_rows().max(0) as usize;
            match access {
                RowGroupAccess::Skip => selectors.push(RowSelector::skip(rows)),
                RowGroupAccess::Scan => selectors.push(RowSelector::select(rows)),
                RowGroupAccess::Selection(selection) => selectors.extend(selection.iter().copied()),
            }
        }
        Some(RowSelection::from(selectors))
    }
}
