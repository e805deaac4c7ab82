//! [`ExprPredicate`]: a scan's column filters as natal's in-reader [`RowPredicate`], so they
//! are evaluated while reading (and reported `Exact`) instead of by a `FilterExec` above;
//! with them, the filters operators above push into the scan as it runs (`pushed_filter.rs`).

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::compute::and;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::DFSchema;
use datafusion::datasource::physical_plan::parquet::{
    PagePruningAccessPlanFilter, ParquetAccessPlan, ParquetFileMetrics, RowGroupAccess,
};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, Operator};
use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::PhysicalExpr;

use super::pushed_filter::{evaluate, PushedFilter};
use crate::io::view_type;
use crate::table::{predicate_layout, RowPredicate, ScanRequest, Snapshot, ROW_ADDR, ROW_ID};

/// A DataFusion expression over a table's columns, compiled for the batches a scan reads to
/// evaluate it.
#[derive(Debug)]
pub(crate) struct ExprPredicate {
    columns: Vec<String>,
    needs_row_id: bool,
    needs_row_addr: bool,
    /// The planned filter (`None`: only pushed ones), over [`Self::layout`].
    expr: Option<Arc<dyn PhysicalExpr>>,
    /// The same over [`Self::stored`]: what page bounds are judged by and `EXPLAIN` shows.
    expr_as_stored: Option<Arc<dyn PhysicalExpr>>,
    /// The conjuncts on one column, judged against page min/max (DataFusion's own page
    /// pruning, so NaN and null handling match its Parquet scan); `None` if there are none.
    pages: Option<PagePruningAccessPlanFilter>,
    /// The batches it evaluates: its columns, then `_rowid` and `_rowaddr` if it reads them.
    layout: SchemaRef,
    /// [`Self::layout`] with every column as the table types it.
    stored: SchemaRef,
    /// The string and binary columns `layout` holds as views: those the scan reads for this
    /// filter alone, decoded without copying their values.
    views: Vec<String>,
    /// Filters pushed into the scan by operators above it, also over `layout`.
    pushed: Option<PushedFilter>,
}

impl ExprPredicate {
    /// Compiles `filter` (over `snapshot`'s columns, system columns included) for a scan
    /// returning the user columns `returned` (`None`: any): the string and binary columns
    /// the filter reads and the scan does not return are evaluated as views.
    pub(crate) fn try_new(
        state: &dyn Session,
        snapshot: &Snapshot,
        filter: Expr,
        returned: Option<&[String]>,
    ) -> Result<Self> {
        let referenced: Vec<String> = filter
            .column_refs()
            .into_iter()
            .map(|c| c.name.clone())
            .collect();
        let mut predicate = Self::over(snapshot, &referenced, Vec::new())?;
        let schema = DFSchema::try_from(predicate.stored.as_ref().clone())?;
        let expr = state.create_physical_expr(filter.clone(), &schema)?;
        predicate.pages = page_filter(&expr, &predicate.stored);
        predicate.expr_as_stored = Some(expr.clone());
        predicate.expr = Some(expr);
        let views = match returned {
            Some(returned) if !asks_types(&filter) => view_candidates(snapshot, &referenced)
                .filter(|name| !returned.contains(name))
                .collect(),
            _ => Vec::new(),
        };
        if views.is_empty() {
            return Ok(predicate);
        }
        // Coerced again over the view types; a filter that does not compile so (a function
        // taking only `Utf8`) reads its columns as stored.
        let viewed = ScanRequest {
            as_views: views,
            ..predicate_layout(&predicate)
        };
        let layout = snapshot.scan_schema(&viewed)?;
        let schema = DFSchema::try_from(layout.as_ref().clone())?;
        if let Ok(expr) = state.create_physical_expr(filter, &schema) {
            predicate.expr = Some(expr);
            predicate.layout = layout;
            predicate.views = viewed.as_views;
        }
        Ok(predicate)
    }

    /// No filter yet, over the columns `referenced` names: the table's in table order (so
    /// equal filters read equal batches), then `_rowid` and `_rowaddr` if named; `views`
    /// among them as views.
    fn over(snapshot: &Snapshot, referenced: &[String], views: Vec<String>) -> Result<Self> {
        let columns = (snapshot.schema().fields.iter())
            .map(|f| f.name.clone())
            .filter(|name| referenced.contains(name))
            .collect();
        let empty = Arc::new(datafusion::arrow::datatypes::Schema::empty());
        let mut predicate = Self {
            columns,
            needs_row_id: referenced.iter().any(|c| c == ROW_ID),
            needs_row_addr: referenced.iter().any(|c| c == ROW_ADDR),
            expr: None,
            expr_as_stored: None,
            pages: None,
            layout: empty.clone(),
            stored: empty,
            views: Vec::new(),
            pushed: None,
        };
        predicate.stored = snapshot.scan_schema(&predicate_layout(&predicate))?;
        predicate.layout = predicate.stored.clone();
        if !views.is_empty() {
            predicate.views = views;
            predicate.layout = snapshot.scan_schema(&predicate_layout(&predicate))?;
        }
        Ok(predicate)
    }

    /// This filter (`planned`, if any) and `pushed`, a filter an operator above pushed into
    /// the scan as it runs, over the scan's output columns — which must each be a user
    /// column read as stored, `_rowid` or `_rowaddr`. Pushed filters are hints: rows they
    /// reject are rows the operator would drop, so the scan may skip them or not
    /// (`pushed_filter.rs` decides as it reads).
    pub(crate) fn with_pushed(
        planned: Option<&Self>,
        snapshot: &Snapshot,
        pushed: Arc<dyn PhysicalExpr>,
    ) -> Result<Self> {
        // The planned filter's layout names every column it reads, system ones included.
        let planned_columns = planned.map(|p| p.layout.fields().iter().map(|f| f.name().clone()));
        let referenced: Vec<String> = (collect_columns(&pushed).iter())
            .map(|c| c.name().to_string())
            .chain(planned_columns.into_iter().flatten())
            .collect();
        let views = planned.map(|p| p.views.clone()).unwrap_or_default();
        let mut predicate = Self::over(snapshot, &referenced, views)?;
        let (layout, stored) = (predicate.layout.clone(), predicate.stored.clone());
        if let Some(expr) = planned.and_then(|p| p.expr.clone()) {
            predicate.expr = Some(reassign_expr_columns(expr, &layout)?);
        }
        if let Some(expr) = planned.and_then(|p| p.expr_as_stored.clone()) {
            let expr = reassign_expr_columns(expr, &stored)?;
            predicate.pages = page_filter(&expr, &stored);
            predicate.expr_as_stored = Some(expr);
        }
        // Pushed filters read returned columns only: never views.
        let pushed = reassign_expr_columns(pushed, &layout)?;
        predicate.pushed = Some(PushedFilter::new(pushed));
        Ok(predicate)
    }

    /// This filter without the hints pushed into it: `None` if it holds only those. What an
    /// operator standing in for the scan applies — the hints' operators above still apply
    /// them, and a top-k's bound over a vector distance would have it read every vector.
    pub(crate) fn without_pushed(&self, snapshot: &Snapshot) -> Result<Option<Self>> {
        let (Some(expr), Some(as_stored)) = (&self.expr, &self.expr_as_stored) else {
            return Ok(None);
        };
        let referenced: Vec<String> = (collect_columns(as_stored).iter())
            .map(|c| c.name().to_string())
            .collect();
        let views = (self.views.iter())
            .filter(|v| referenced.contains(v))
            .cloned()
            .collect();
        let mut predicate = Self::over(snapshot, &referenced, views)?;
        predicate.expr = Some(reassign_expr_columns(expr.clone(), &predicate.layout)?);
        let as_stored = reassign_expr_columns(as_stored.clone(), &predicate.stored)?;
        predicate.pages = page_filter(&as_stored, &predicate.stored);
        predicate.expr_as_stored = Some(as_stored);
        Ok(Some(predicate))
    }

    /// The filters pushed into the scan, if any.
    pub(crate) fn pushed(&self) -> Option<&Arc<dyn PhysicalExpr>> {
        self.pushed.as_ref().map(|p| p.expr())
    }

    /// The scan's own filter, if it was planned with one (not only pushed ones), over the
    /// columns as the table types them.
    pub(crate) fn planned(&self) -> Option<&Arc<dyn PhysicalExpr>> {
        self.expr_as_stored.as_ref()
    }

    /// The page filter for the pushed filters as they are now, with the planned ones.
    fn pages_now(&self) -> Option<PagePruningAccessPlanFilter> {
        let pushed = self.pushed.as_ref()?.now()?;
        let expr = match &self.expr_as_stored {
            Some(planned) => Arc::new(BinaryExpr::new(planned.clone(), Operator::And, pushed)),
            None => pushed,
        };
        page_filter(&expr, &self.stored)
    }
}

/// The columns among `referenced` a filter could read as views: string and binary columns
/// that are not blobs. Those the table types as views already are read as decoded, their
/// values left in one buffer per page (a column returned gets them in one buffer).
fn view_candidates<'a>(
    snapshot: &'a Snapshot,
    referenced: &'a [String],
) -> impl Iterator<Item = String> + 'a {
    (snapshot.schema().fields.iter())
        .filter(|f| referenced.contains(&f.name) && f.blob.is_none())
        .filter(|f| view_type(&f.data_type).is_some())
        .map(|f| f.name.clone())
}

/// Whether `filter` asks for a type by name (`arrow_typeof`): a view would answer otherwise.
fn asks_types(filter: &Expr) -> bool {
    filter
        .exists(|e| Ok(matches!(e, Expr::ScalarFunction(f) if f.name() == "arrow_typeof")))
        .unwrap_or(true)
}

/// DataFusion's page filter for `expr` over `layout`; `None` if no conjunct of it can rule
/// a page out.
fn page_filter(
    expr: &Arc<dyn PhysicalExpr>,
    layout: &SchemaRef,
) -> Option<PagePruningAccessPlanFilter> {
    let pages = PagePruningAccessPlanFilter::new(expr, layout.clone());
    (pages.filter_number() > 0).then_some(pages)
}

impl fmt::Display for ExprPredicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.expr_as_stored, self.pushed()) {
            (Some(expr), None) => write!(f, "{expr}"),
            (Some(expr), Some(pushed)) => write!(f, "{expr} (pushed: {pushed})"),
            (None, Some(pushed)) => write!(f, "pushed: {pushed}"),
            (None, None) => write!(f, "true"),
        }
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

    fn view_columns(&self) -> &[String] {
        &self.views
    }

    fn evaluate(&self, batch: &RecordBatch) -> crate::Result<BooleanArray> {
        let planned = match &self.expr {
            Some(expr) => Some(evaluate(expr, batch)?),
            None => None,
        };
        let pushed = match &self.pushed {
            Some(pushed) => pushed.evaluate(batch, planned.as_ref())?,
            None => None,
        };
        match (planned, pushed) {
            (Some(planned), Some(pushed)) => Ok(and(&planned, &pushed)?),
            (Some(keep), None) | (None, Some(keep)) => Ok(keep),
            (None, None) => Ok(BooleanArray::new(
                BooleanBuffer::new_set(batch.num_rows()),
                None,
            )),
        }
    }

    /// A pushed filter may bring bounds only once the operator that pushed it has run
    /// (a join's build side), after the scan is planned: its fragments load their page
    /// index, as DataFusion's Parquet scan does for any filter.
    fn prunes_pages(&self) -> bool {
        self.pages.is_some() || self.pushed.is_some()
    }

    fn select_pages(&self, metadata: &ParquetMetaData, schema: &SchemaRef) -> Option<RowSelection> {
        // Pushed filters as they are when the fragment is opened: a join's build side is
        // complete by then; a top-k's bound only tightens.
        let now = self.pages_now();
        let pages = now.as_ref().or(self.pages.as_ref())?;
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
