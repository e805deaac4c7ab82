//! [`NatalScanExec`]: reads one snapshot, one DataFusion partition per group of fragments.
//!
//! ```text
//! NatalScanExec: version=7, partitions=2, fragments=12 (pruned 3), row_ids=exact mask
//!   partition 0 ─ fragments 0..5, rows 0..400k of 6 ─ Snapshot::scan ─ reorder ─ limit
//!   partition 1 ─ rows 400k.. of fragment 6, fragments 7..11 ─ ...
//! ```
//! Partitions hold about equal bytes (`partitions.rs`). Filters on `_rowid` (`=`, `IN`,
//! ranges) arrive as a mask (native ranges − tombstones + moves, or per-fragment id ranges);
//! other filters prune fragments by statistics before any file is opened and are evaluated
//! inside the scan as batches decode. Filters operators above push into it as the query
//! runs (a hash join's build keys, a top-k's bound) join them as hints (`pushed_filter.rs`):
//! `pushed=` in `EXPLAIN`.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Statistics;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::conjunction_opt;
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

use super::filter::ExprPredicate;
use super::partitions::Piece;
use super::plan::ScanPlan;
use super::pushed_filter::bounds_computable;
use super::statistics::scan_statistics;
use crate::datafusion::leaf::leaf_properties;
use crate::rowid::FragmentId;
use crate::table::{RowPredicate, ScanMetrics, ScanRequest, ROW_ADDR, ROW_ID};

/// The scan of a natal snapshot: reads its fragments (pruned, masked, filtered as planned) in partitions, yielding user columns and, when asked, `_rowid` and `_rowaddr`.
#[derive(Debug)]
pub struct NatalScanExec {
    plan: ScanPlan,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// The blob columns of `output` (a scan of `plan`'s output, by position) that read as bytes
/// and that the plan's own filter does not read (it needs their bytes).
pub(crate) fn blob_columns(plan: &ScanPlan, output: &Schema) -> Vec<usize> {
    let table = plan.snapshot.schema();
    let filtered =
        |name: &String| (plan.filter.as_ref()).is_some_and(|f| f.columns().contains(name));
    (output.fields().iter().enumerate())
        .filter(|(_, f)| matches!(f.data_type(), DataType::Binary | DataType::LargeBinary))
        .filter(|(_, f)| {
            table
                .field_by_name(f.name())
                .is_some_and(|c| c.blob.is_some())
        })
        .filter(|(_, f)| !filtered(f.name()))
        .map(|(at, _)| at)
        .collect()
}

impl NatalScanExec {
    pub(crate) fn new(plan: ScanPlan, schema: SchemaRef) -> Self {
        let partitions = plan.partitions.len().max(1);
        let properties = leaf_properties(schema.clone(), partitions, EmissionType::Incremental);
        Self {
            plan,
            schema,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl NatalScanExec {
    /// What it reads.
    pub(in crate::datafusion) fn plan(&self) -> &ScanPlan {
        &self.plan
    }

    /// The blob columns of its output (by position) that read as bytes and that its own
    /// filter does not read (it needs their bytes).
    pub(crate) fn blob_columns(&self) -> Vec<usize> {
        blob_columns(&self.plan, &self.schema)
    }

    /// This scan with the blob columns at `positions` of its output read as their values'
    /// sizes (`Int64`), from descriptors.
    pub(crate) fn reading_sizes(&self, positions: &[usize]) -> Self {
        let mut plan = self.plan.clone();
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for &at in positions {
            plan.blob_sizes.push(fields[at].name().clone());
            fields[at] = Field::new(fields[at].name(), DataType::Int64, fields[at].is_nullable());
        }
        let schema = Arc::new(Schema::new(fields).with_metadata(self.schema.metadata().clone()));
        Self::new(plan, schema)
    }

    /// Whether every column `filter` reads is one of its output columns as stored: a user
    /// column (not read as blob sizes), `_rowid` or `_rowaddr`.
    fn reads_as_stored(&self, filter: &Arc<dyn PhysicalExpr>) -> bool {
        let table = self.plan.snapshot.schema();
        collect_columns(filter).iter().all(|column| {
            let name = column.name();
            let output = self.schema.fields().get(column.index());
            let user = table.field_by_name(name).is_some()
                && !self.plan.blob_sizes.iter().any(|b| b == name);
            let system = (name == ROW_ID && self.plan.with_row_id)
                || (name == ROW_ADDR && self.plan.with_row_addr);
            output.is_some_and(|f| f.name() == name) && (user || system)
        })
    }

    /// What the scan does beyond reading every row, as `key=value` pairs in display order.
    fn details(&self) -> Vec<(&'static str, String)> {
        let mut details = Vec::new();
        if let Some(ids) = &self.plan.row_ids {
            details.push(("row_ids", format!("exact mask of {} ids", ids.len())));
        }
        if let Some(range) = &self.plan.row_id_range {
            let shown = format!("exact range {}..={}", range.start(), range.end());
            details.push(("row_ids", shown));
        }
        if let Some(planned) = self.plan.filter.as_ref().and_then(|f| f.planned()) {
            details.push(("filter", planned.to_string()));
        }
        if let Some(views) = (self.plan.filter.as_ref()).map(|f| f.view_columns().join(", ")) {
            if !views.is_empty() {
                details.push(("filter_views", views));
            }
        }
        if let Some(pushed) = self.plan.filter.as_ref().and_then(|f| f.pushed()) {
            details.push(("pushed", pushed.to_string()));
        }
        if let Some(index) = &self.plan.index {
            let shown = format!("{} ({})", index.name, index.lookup.describe());
            details.push(("index", shown));
        }
        if let Some(limit) = self.plan.limit {
            details.push(("limit", limit.to_string()));
        }
        if !self.plan.blob_sizes.is_empty() {
            details.push(("blob_sizes", self.plan.blob_sizes.join(", ")));
        }
        details
    }

    /// Each partition's pieces: a fragment id, with the rows it reads when not all.
    fn pieces(&self) -> String {
        let partitions: Vec<String> = self
            .plan
            .partitions
            .iter()
            .map(|pieces| {
                let pieces: Vec<String> = pieces
                    .iter()
                    .map(|p| match &p.rows {
                        None => p.fragment.to_string(),
                        Some(rows) => format!("{}:{}..{}", p.fragment, rows.start, rows.end),
                    })
                    .collect();
                format!("[{}]", pieces.join(", "))
            })
            .collect();
        format!("[{}]", partitions.join(", "))
    }
}

impl DisplayAs for NatalScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let fragments = self
            .plan
            .partitions
            .iter()
            .flatten()
            .map(|p| p.fragment)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let version = self.plan.snapshot.version();
        let partitions = self.plan.partitions.len();
        let pruned = self.plan.fragments_pruned;
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "NatalScanExec: version={version}, partitions={partitions}, \
                     fragments={fragments} (pruned {pruned})"
                )?;
                for (key, value) in self.details() {
                    write!(f, ", {key}={value}")?;
                }
                if matches!(t, DisplayFormatType::Verbose) {
                    write!(f, ", pieces={}", self.pieces())?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "version={version}")?;
                writeln!(f, "partitions={partitions}")?;
                writeln!(f, "fragments={fragments}")?;
                writeln!(f, "pruned={pruned}")?;
                for (key, value) in self.details() {
                    writeln!(f, "{key}={value}")?;
                }
                Ok(())
            }
        }
    }
}

impl ExecutionPlan for NatalScanExec {
    fn name(&self) -> &str {
        "NatalScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    /// Its filters: the one planned and those pushed into it (an operator that pushed a
    /// filter looks for it here to know someone reads it, or it never fills it in).
    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let filter = self.plan.filter.as_ref();
        let filters =
            (filter.and_then(|f| f.planned()).into_iter()).chain(filter.and_then(|f| f.pushed()));
        for expr in filters {
            if f(expr)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn fetch(&self) -> Option<usize> {
        self.plan.limit
    }

    /// The scan stops after `limit` rows (counted after its own filter).
    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let mut plan = self.plan.clone();
        plan.limit = limit;
        Some(Arc::new(NatalScanExec::new(plan, self.schema.clone())))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let pieces = self
            .plan
            .partitions
            .get(partition)
            .cloned()
            .unwrap_or_default();
        let rows_out = MetricBuilder::new(&self.metrics).output_rows(partition);
        let read = PartitionRead {
            plan: &self.plan,
            schema: &self.schema,
            metrics: &self.metrics,
            partition,
            limit: self.plan.limit,
            batch_size: context.session_config().batch_size(),
        };
        let stream = read
            .stream(pieces)
            .inspect_ok(move |batch| rows_out.add(batch.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// Takes the filters operators above push as the query runs (a join's build keys, a
    /// top-k's bound: `pushed_filter.rs`) on the columns it reads as stored, and uses them
    /// as hints: the operators still apply them, so each is reported not pushed. Filters
    /// pushed while planning came through the provider already.
    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters: Vec<_> = (child_pushdown_result.parent_filters.into_iter())
            .map(|f| f.filter)
            .collect();
        let not_pushed = vec![PushedDown::No; filters.len()];
        // A limit counts rows after the scan's filter; a hint must not change which rows.
        if phase != FilterPushdownPhase::Post || self.plan.limit.is_some() {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                not_pushed,
            ));
        }
        let taken: Vec<_> = filters
            .into_iter()
            .filter(|f| self.reads_as_stored(f) && bounds_computable(f, &self.schema))
            .collect();
        let Some(pushed) = conjunction_opt(taken) else {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                not_pushed,
            ));
        };
        let pushed = match self.plan.filter.as_ref().and_then(|f| f.pushed()) {
            Some(before) => Arc::new(BinaryExpr::new(before.clone(), Operator::And, pushed)),
            None => pushed,
        };
        let planned = self.plan.filter.as_deref();
        let snapshot = &self.plan.snapshot;
        let filter = ExprPredicate::with_pushed(planned, snapshot, pushed)?;
        let plan = ScanPlan {
            filter: Some(Arc::new(filter)),
            ..self.plan.clone()
        };
        let node: Arc<dyn ExecutionPlan> = Arc::new(NatalScanExec::new(plan, self.schema.clone()));
        Ok(
            FilterPushdownPropagation::with_parent_pushdown_result(not_pushed)
                .with_updated_node(node),
        )
    }

    /// Row counts and column statistics from the manifest (`statistics.rs`).
    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        Ok(Arc::new(scan_statistics(
            &self.plan,
            &self.schema,
            args.partition(),
        )))
    }
}

/// One partition's read of a scan plan: its pieces, through [`crate::table::Snapshot::scan`],
/// in the plan's output order, its counters reported into `metrics` under `partition`. What
/// [`NatalScanExec`] runs for a partition, and `NatalFileSource` for a file group.
pub(in crate::datafusion) struct PartitionRead<'a> {
    pub plan: &'a ScanPlan,
    pub schema: &'a SchemaRef,
    pub metrics: &'a ExecutionPlanMetricsSet,
    pub partition: usize,
    /// Rows to stop after, counted after the scan's own filter.
    pub limit: Option<usize>,
    /// The rows a batch gathers to when the scan's filter leaves small ones.
    pub batch_size: usize,
}

impl PartitionRead<'_> {
    pub fn stream(
        &self,
        pieces: Vec<Piece>,
    ) -> futures::stream::BoxStream<'static, Result<RecordBatch>> {
        let partition = self.partition;
        let fragments: Vec<FragmentId> = pieces.iter().map(|p| p.fragment).collect();
        let fragment_rows: std::collections::BTreeMap<FragmentId, std::ops::Range<u32>> = pieces
            .into_iter()
            .filter_map(|p| Some((p.fragment, p.rows?)))
            .collect();
        MetricBuilder::new(self.metrics)
            .counter("fragments_scanned", partition)
            .add(fragments.len());
        if partition == 0 {
            MetricBuilder::new(self.metrics)
                .counter("fragments_pruned", partition)
                .add(self.plan.fragments_pruned);
        }
        let counters = Arc::new(ScanMetrics::default());
        // The scan's counters reach DataFusion's metrics with each batch it yields, at its
        // end, and when it is dropped before its end: a LIMIT above it may stop polling and
        // EXPLAIN ANALYZE read the metrics before the stream is dropped, so what produced
        // the batches it took is counted by then.
        let counter =
            |name: &'static str| MetricBuilder::new(self.metrics).counter(name, partition);
        let reporter = Arc::new(MetricsReporter {
            counters: counters.clone(),
            reported: Default::default(),
            bytes_read: counter("bytes_read"),
            rows_masked: counter("rows_masked"),
            rows_filtered: counter("rows_filtered"),
            rows_page_pruned: counter("rows_page_pruned"),
            rows_late_skipped: counter("rows_late_skipped"),
            bytes_late_skipped: counter("bytes_late_skipped"),
        });
        let on_batch = reporter.clone();
        let report = futures::stream::once(async move { reporter.report() })
            .filter_map(|()| futures::future::ready(None::<Result<RecordBatch>>));
        let plan = self.plan;
        let request = ScanRequest {
            columns: Some(plan.columns.clone()),
            with_row_id: plan.with_row_id,
            with_row_addr: plan.with_row_addr,
            with_lineage: plan.with_lineage,
            row_ids: plan.row_ids.clone(),
            row_id_range: plan.row_id_range.clone(),
            fragments: Some(fragments),
            fragment_rows: (!fragment_rows.is_empty()).then_some(fragment_rows),
            metrics: Some(counters.clone()),
            filter: plan.filter.clone().map(|f| f as Arc<dyn RowPredicate>),
            index: plan.index.clone(),
            blob_descriptors: false,
            lean_blob_descriptors: false,
            blob_references: plan.blob_references,
            filter_in_one_step: !plan.late_materialization,
            blob_sizes: plan.blob_sizes.clone(),
            // Exact (the planner may drop its own limit for it, `with_fetch`): the snapshot
            // scan cuts the last batch, and fetches no blob payload past it.
            limit: self.limit,
            // The filter's own columns are read as views where it asks (`view_columns`).
            as_views: Vec::new(),
        };
        let snapshot = plan.snapshot.clone();
        let order = plan.output_order.clone();
        let schema = self.schema.clone();
        let coalesce = plan
            .filter
            .is_some()
            .then(|| (schema.clone(), self.batch_size));
        let batches = futures::stream::once(async move { snapshot.scan(request).await })
            .try_flatten()
            .map_err(DataFusionError::from)
            .and_then(move |batch| {
                let out = batch
                    .project(&order)
                    .and_then(|b| b.with_schema(schema.clone()))
                    .map_err(|e| DataFusionError::ArrowError(Box::new(e), None));
                futures::future::ready(out)
            })
            .inspect_ok(move |_| on_batch.report())
            // Holds the reporter: dropped unfinished, the stream reports as it goes.
            .chain(report)
            .boxed();
        match coalesce {
            Some((schema, target)) => super::coalesce::coalesce_small(batches, schema, target),
            None => batches,
        }
    }
}

/// Copies a partition's scan counters into its DataFusion metrics as they grow: each call
/// adds what was counted since the last.
struct MetricsReporter {
    counters: Arc<ScanMetrics>,
    /// What has been added so far: bytes read, rows masked, filtered, page-pruned, rows
    /// and bytes a two-step read skipped.
    reported: [std::sync::atomic::AtomicU64; 6],
    bytes_read: Count,
    rows_masked: Count,
    rows_filtered: Count,
    rows_page_pruned: Count,
    rows_late_skipped: Count,
    bytes_late_skipped: Count,
}

impl MetricsReporter {
    fn report(&self) {
        let counters = [
            (&*self.counters.bytes_read, &self.bytes_read),
            (&self.counters.rows_masked, &self.rows_masked),
            (&self.counters.rows_filtered, &self.rows_filtered),
            (&*self.counters.rows_page_pruned, &self.rows_page_pruned),
            (&self.counters.rows_late_skipped, &self.rows_late_skipped),
            (&self.counters.bytes_late_skipped, &self.bytes_late_skipped),
        ];
        for ((counter, metric), reported) in counters.into_iter().zip(&self.reported) {
            // Counters only grow: whoever raises `reported` adds the difference, once.
            let now = counter.load(Ordering::Relaxed);
            let before = reported.fetch_max(now, Ordering::Relaxed);
            if now > before {
                metric.add((now - before) as usize);
            }
        }
    }
}

impl Drop for MetricsReporter {
    fn drop(&mut self) {
        self.report();
    }
}
