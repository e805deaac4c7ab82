//! Nearest rows in SQL: the physical rule [`NearestRows`] finds a top-k sort by a vector
//! distance over a natal scan — `ORDER BY l2_distance(e, [..]) LIMIT k` (or
//! `cosine_distance`, or `inner_product(..) DESC`), through projections and operators that
//! pass rows on as they are — and puts a [`NearestExec`] in the scan's place: it returns the
//! `k` rows `Snapshot::nearest` finds, and the sort above orders them. With a vector index
//! on `e` that ranks by that metric the search goes through it; without one it is exact, and
//! reads only the vector column and the filter's before it takes the `k` rows whole (late
//! materialization: a table of images and embeddings is not read image by image). The exact
//! search stands in only where it answers as the sort would (one sort key, NULL distances
//! last), and where fewer than `k` rows have a finite distance it hands the sort every row.
//! The scan's own filter becomes the search's pre-filter (the `k` nearest of the rows that
//! pass; `prefilter=` in `EXPLAIN`). A scan with a `_rowid` mask, a limit, row addresses or
//! lineage columns is left as it is, as is everything when `natal.use_index` is false.
//!
//! ```text
//! SortExec: TopK(fetch=10), expr=[d ASC]           SortExec: TopK(fetch=10), expr=[d ASC]
//!   ProjectionExec: id, l2_distance(e, [..]) d  =>   ProjectionExec: id, l2_distance(e, [..]) d
//!     NatalScanExec: fragments=12                      NatalNearestExec: index=e_idx nprobes=20 k=10
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float32Type, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::utils::conjunction;
use datafusion::physical_expr::expressions::{CastExpr, Column, Literal};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::{
    ChildrenPropertiesMode, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use datafusion::scalar::ScalarValue;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::exec::NatalScanExec;
use super::file_source::{planned_scan, ScanSource};
use super::path::{passes_rows_on, with_scan_replaced};
use super::plan::ScanPlan;
use crate::datafusion::cluster::sent::SentScan;
use crate::datafusion::leaf::{leaf_exec_methods, leaf_properties};
use crate::datafusion::options::NatalOptions;
use crate::format::{Metric, WireNearest};
use crate::table::vector::vector_dimension;
use crate::table::{NearestOptions, RowPredicate, ScanRequest, Snapshot, ROW_ID};

/// The rule (registered by `natal::datafusion::register`).
#[derive(Debug, Default)]
pub struct NearestRows;

impl NearestRows {
    /// Its name among the session's physical optimizer rules.
    pub const NAME: &'static str = "natal_nearest_rows";
}

/// A distance a sort can rank by: the column (of the scan) and the query vector.
struct Ranking {
    column: String,
    query: Vec<f32>,
    metric: Metric,
}

/// `expr` (over the scan's columns) as a distance between a column and a literal vector,
/// nearest first when sorted `descending` or not.
fn ranking(expr: &Arc<dyn PhysicalExpr>, descending: bool) -> Option<Ranking> {
    let call = expr.downcast_ref::<ScalarFunctionExpr>()?;
    let (metric, nearest_descending) = match call.name() {
        "l2_distance" => (Metric::L2, false),
        "cosine_distance" => (Metric::Cosine, false),
        "inner_product" => (Metric::Dot, true),
        _ => return None,
    };
    if descending != nearest_descending {
        return None;
    }
    let [a, b] = call.args() else {
        return None;
    };
    let (column, literal) = match (column_of(a), column_of(b)) {
        (Some(column), None) => (column, b),
        (None, Some(column)) => (column, a),
        _ => return None,
    };
    let query = vector_literal(literal.downcast_ref::<Literal>()?.value())?;
    Some(Ranking {
        column,
        query,
        metric,
    })
}

/// The column `expr` reads, through casts (a vector read as another list of floats).
fn column_of(expr: &Arc<dyn PhysicalExpr>) -> Option<String> {
    if let Some(column) = expr.downcast_ref::<Column>() {
        return Some(column.name().to_string());
    }
    column_of(expr.downcast_ref::<CastExpr>()?.expr())
}

/// A literal list of numbers as a vector (no NULL component).
fn vector_literal(value: &ScalarValue) -> Option<Vec<f32>> {
    let array = value.to_array().ok()?;
    let items = match array.data_type() {
        DataType::List(_) => array.as_list::<i32>().values().clone(),
        DataType::LargeList(_) => array.as_list::<i64>().values().clone(),
        DataType::FixedSizeList(..) => array.as_fixed_size_list().values().clone(),
        _ => return None,
    };
    let floats = cast(&items, &DataType::Float32).ok()?;
    let floats = floats.as_primitive::<Float32Type>();
    (floats.null_count() == 0).then(|| floats.values().to_vec())
}

/// The natal scan under `plan` and `expr` in its columns, through projections and
/// operators that pass rows on as they are.
fn scan_below(
    plan: &Arc<dyn ExecutionPlan>,
    expr: Arc<dyn PhysicalExpr>,
) -> Option<(ScanPlan, SchemaRef, Arc<dyn PhysicalExpr>)> {
    if let Some(scan) = plan.downcast_ref::<NatalScanExec>() {
        return Some((scan.plan().clone(), scan.schema(), expr));
    }
    if let Some(scan) = plan.downcast_ref::<DataSourceExec>().and_then(planned_scan) {
        return Some((scan.plan().clone(), scan.schema(), expr));
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let exprs = projection.expr();
        let inner = expr
            .transform(|node| match node.downcast_ref::<Column>() {
                Some(column) => Ok(Transformed::yes(exprs[column.index()].expr.clone())),
                None => Ok(Transformed::no(node)),
            })
            .ok()?
            .data;
        return scan_below(projection.input(), inner);
    }
    match plan.children().as_slice() {
        [child] if passes_rows_on(plan) => scan_below(child, expr),
        _ => None,
    }
}

/// `plan` (a [`scan_below`] path) with `nearest` in its scan's place.
fn with_nearest(
    plan: &Arc<dyn ExecutionPlan>,
    nearest: &Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    with_scan_replaced(plan, &|node| {
        let is_scan = node.downcast_ref::<NatalScanExec>().is_some()
            || (node.downcast_ref::<DataSourceExec>())
                .and_then(planned_scan)
                .is_some();
        is_scan.then(|| Ok(nearest.clone()))
    })
}

impl PhysicalOptimizerRule for NearestRows {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = config.extensions.get::<NatalOptions>();
        if options.is_some_and(|o| !o.use_index) {
            return Ok(plan);
        }
        let defaults = NearestOptions::default();
        let search = NearestOptions {
            nprobes: options.map_or(defaults.nprobes, |o| o.nprobes),
            refine_factor: options.map_or(defaults.refine_factor, |o| o.refine_factor),
            ..defaults
        };
        Ok(plan
            .transform_down(|node| {
                let Some(sort) = node.downcast_ref::<SortExec>() else {
                    return Ok(Transformed::no(node));
                };
                let Some(k) = sort.fetch() else {
                    return Ok(Transformed::no(node));
                };
                let first = sort.expr().first();
                let Some((scan, schema, expr)) = scan_below(sort.input(), first.expr.clone())
                else {
                    return Ok(Transformed::no(node));
                };
                let Some(ranking) = ranking(&expr, first.options.descending) else {
                    return Ok(Transformed::no(node));
                };
                // Without an index, natal's exact search stands in only where it answers as
                // the sort would: one sort key (ties are the sort's to break) and NULL
                // distances last.
                let exact = sort.expr().len() == 1 && !first.options.nulls_first;
                let Some(nearest) =
                    NearestExec::try_new(&scan, schema, ranking, (k, exact), search)
                else {
                    return Ok(Transformed::no(node));
                };
                let nearest: Arc<dyn ExecutionPlan> = Arc::new(nearest);
                let input = with_nearest(sort.input(), &nearest)?;
                let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
                Ok(Transformed::yes(
                    node.clone().replace_children(vec![input], options)?,
                ))
            })?
            .data)
    }

    fn name(&self) -> &str {
        Self::NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The `k` rows of a natal scan nearest a query, found through a vector index
/// (`Snapshot::nearest`), in the scan's columns.
pub struct NearestExec {
    /// The scan it stands in for: its snapshot, and its filter as the pre-filter.
    scan: ScanSource,
    /// The index searched; `None`: every row, exactly.
    index: Option<String>,
    column: String,
    query: Vec<f32>,
    k: usize,
    options: NearestOptions,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl std::fmt::Debug for NearestExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NearestExec")
            .field("version", &self.scan.version())
            .field("index", &self.index)
            .field("column", &self.column)
            .field("k", &self.k)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl NearestExec {
    /// The search that can stand in for `scan`, if the scan reads nothing a search cannot
    /// give (a mask, a limit, row addresses or lineage): through the index that ranks its
    /// column by the metric asked, or, with none and `exact` allowed, exactly over a vector
    /// column of the query's length.
    fn try_new(
        plan: &ScanPlan,
        schema: SchemaRef,
        ranking: Ranking,
        (k, exact): (usize, bool),
        search: NearestOptions,
    ) -> Option<Self> {
        if plan.row_ids.is_some()
            || plan.row_id_range.is_some()
            || plan.limit.is_some()
            || plan.with_row_addr
            || plan.with_lineage
            || !plan.blob_sizes.is_empty()
        {
            return None;
        }
        let index =
            plan.snapshot
                .vector_index_for(&ranking.column, ranking.metric, ranking.query.len());
        if index.is_none() {
            let field = plan.snapshot.schema().field_by_name(&ranking.column)?;
            let fits = vector_dimension(&field.data_type) == Some(ranking.query.len())
                && ranking.query.iter().all(|x| x.is_finite());
            // Worth it only when the columns neither ranked by nor filtered on are wide:
            // an exact search reads the vectors as the scan would, and takes the k rows.
            let filtered = (plan.filter.as_ref()).map_or(&[][..], |f| f.columns());
            let others: Vec<String> = (schema.fields().iter())
                .map(|f| f.name().clone())
                .filter(|name| *name != ranking.column && !filtered.contains(name))
                .collect();
            let worth = plan.snapshot.worth_taking_after_ranking(&others);
            // Or when an index on the column ranks otherwise: EXPLAIN then says why the
            // search is exact.
            let indexed = (plan.snapshot.manifest().indexes.segments.iter())
                .any(|s| s.field_id == field.id && s.vector.is_some());
            if !(exact && fits && k > 0 && (worth || indexed)) {
                return None;
            }
        }
        let options = NearestOptions {
            metric: ranking.metric,
            use_index: index.is_some(),
            ..search
        };
        Some(Self {
            scan: ScanSource::Planned(Arc::new(plan.clone())),
            index,
            column: ranking.column,
            query: ranking.query,
            k,
            options,
            properties: leaf_properties(schema.clone(), 1, EmissionType::Final),
            schema,
        })
    }

    /// The search `wire` describes over `scan`, sent by another process (its output
    /// columns `schema`).
    pub(crate) fn sent(scan: Arc<SentScan>, wire: WireNearest, schema: SchemaRef) -> Self {
        let index = Some(wire.index).filter(|i| !i.is_empty());
        let options = NearestOptions {
            metric: wire.metric,
            nprobes: wire.nprobes,
            use_index: index.is_some(),
            refine_factor: wire.refine_factor,
        };
        Self {
            scan: ScanSource::Sent(scan),
            index,
            column: wire.column,
            query: wire.query,
            k: wire.k,
            options,
            properties: leaf_properties(schema.clone(), 1, EmissionType::Final),
            schema,
        }
    }

    /// The scan it stands in for.
    pub(crate) fn scan(&self) -> &ScanSource {
        &self.scan
    }

    /// The search, as the wire carries it.
    pub(crate) fn wire(&self) -> WireNearest {
        WireNearest {
            index: self.index.clone().unwrap_or_default(),
            column: self.column.clone(),
            query: self.query.clone(),
            k: self.k,
            metric: self.options.metric,
            nprobes: self.options.nprobes,
            refine_factor: self.options.refine_factor,
        }
    }
}

/// The pre-filter of a search standing in for the scan `plan`: the scan's own filter.
/// Hints pushed into the scan (a top-k's bound on the very distance searched) are left to
/// the operators above: as a pre-filter they had every vector read.
fn prefilter(plan: &ScanPlan) -> Result<Option<Arc<dyn RowPredicate>>> {
    Ok(match &plan.filter {
        Some(filter) if filter.pushed().is_some() => filter
            .without_pushed(&plan.snapshot)?
            .map(|f| Arc::new(f) as Arc<dyn RowPredicate>),
        Some(filter) => Some(filter.clone() as Arc<dyn RowPredicate>),
        None => None,
    })
}

impl DisplayAs for NearestExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let (version, column, metric) = (self.scan.version(), &self.column, self.options.metric);
        match &self.index {
            Some(index) => write!(
                f,
                "NatalNearestExec: version={version}, column={column}, index={index} metric={} \
                 nprobes={}, k={}",
                metric.name(),
                self.options.nprobes,
                self.k
            )?,
            None => write!(
                f,
                "NatalNearestExec: version={version}, column={column}, exact metric={} (no \
                 index on {column} ranks by it in {} components), k={}",
                metric.name(),
                self.query.len(),
                self.k
            )?,
        }
        if let Some(refine) = self.options.refine_factor {
            write!(f, ", refine={refine}")?;
        }
        match &self.scan {
            ScanSource::Planned(plan) => {
                if let Some(planned) = plan.filter.as_ref().and_then(|f| f.planned()) {
                    write!(f, ", prefilter={planned}")?;
                }
            }
            ScanSource::Sent(sent) => {
                if let Some(filter) = conjunction(sent.filters.iter().cloned()) {
                    write!(f, ", prefilter={filter}")?;
                }
            }
        }
        Ok(())
    }
}

impl ExecutionPlan for NearestExec {
    fn name(&self) -> &str {
        "NatalNearestExec"
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
        let scan = self.scan.clone();
        let (column, query) = (self.column.clone(), self.query.clone());
        let (k, options, output) = (self.k, self.options, self.schema.clone());
        let rows = async move {
            let plan = match &scan {
                ScanSource::Planned(plan) => plan.clone(),
                ScanSource::Sent(sent) => sent.plan().await?,
            };
            let filter = prefilter(&plan)?;
            let snapshot = plan.snapshot.clone();
            let search = (k, options, filter.clone());
            let found = nearest_rows(snapshot.clone(), column, query, search, output.clone());
            let found = found.await?;
            if options.use_index || found.num_rows() >= k {
                return Ok(futures::stream::once(async move { Ok(found) }).boxed());
            }
            // Fewer than k rows have a vector and a finite distance: the sort above ranks
            // every row (NULL distances last).
            every_row(snapshot, filter, output).await
        };
        let schema = self.schema.clone();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::once(rows).try_flatten(),
        )))
    }
}

/// Every row of `snapshot` that passes `filter`, in the columns of `output` (by name).
async fn every_row(
    snapshot: Arc<Snapshot>,
    filter: Option<Arc<dyn RowPredicate>>,
    output: SchemaRef,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let request = ScanRequest {
        columns: Some(user_columns(&output)),
        with_row_id: output.field_with_name(ROW_ID).is_ok(),
        filter,
        ..Default::default()
    };
    let batches = snapshot.scan(request).await?;
    Ok(batches
        .map(move |batch| in_columns(&batch?, &output))
        .boxed())
}

/// The user columns among `output`'s (those but `_rowid`: a search stands only for scans
/// that read no other system column).
fn user_columns(output: &SchemaRef) -> Vec<String> {
    (output.fields().iter())
        .map(|f| f.name().clone())
        .filter(|name| name != ROW_ID)
        .collect()
}

/// `batch`'s columns named as `output`'s, in its order.
fn in_columns(batch: &RecordBatch, output: &SchemaRef) -> Result<RecordBatch> {
    let mut columns = Vec::with_capacity(output.fields().len());
    for field in output.fields() {
        let column = batch.column_by_name(field.name()).cloned();
        columns.push(column.ok_or_else(|| {
            DataFusionError::Internal(format!("a nearest search lacks {}", field.name()))
        })?);
    }
    Ok(RecordBatch::try_new(output.clone(), columns)?)
}

/// The `k` rows nearest `query` in `column`, in the columns of `output` (by name).
async fn nearest_rows(
    snapshot: Arc<Snapshot>,
    column: String,
    query: Vec<f32>,
    (k, options, filter): (usize, NearestOptions, Option<Arc<dyn RowPredicate>>),
    output: SchemaRef,
) -> Result<RecordBatch> {
    let user = user_columns(&output);
    let search = (column.as_str(), query.as_slice(), k, options);
    let found = (snapshot.nearest_in_columns(search, filter, Some(user))).await?;
    in_columns(&found, &output)
}
