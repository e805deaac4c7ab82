//! [`ExprPredicate`]: a scan's column filters as natal's in-reader [`RowPredicate`], so they
//! are evaluated while reading (and reported `Exact`) instead of by a `FilterExec` above.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use datafusion::catalog::Session;
use datafusion::common::DFSchema;
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
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
        };
        let probe = snapshot.scan_schema(&predicate_layout(&predicate))?;
        let schema = DFSchema::try_from(probe.as_ref().clone())?;
        predicate.expr = state.create_physical_expr(filter, &schema)?;
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
}
