//! [`NatalFileSource`]: a natal scan as DataFusion's own file scan, a `DataSourceExec` over a
//! `FileScanConfig` whose file groups are the scan's partitions, each one synthetic file
//! carrying that partition's pieces. An engine that divides a plan by file groups reads
//! exactly the groups it keeps: Ballista's scheduler hands each task a slice of a stage's
//! partitions and cuts only the leaves it knows (`DataSourceExec` over `FileScanConfig`
//! among them) down to that slice; any other leaf would be read whole by every task.
//!
//! The runtime work is [`NatalScanExec`]'s, partition for partition (`PartitionRead`). The
//! source refuses what would change a group's rows: byte-range repartitioning (a piece is
//! not a byte range), projection and filter pushdown (the plan's own columns and filter
//! are already in it). It reads through the snapshot the plan holds, not the store
//! DataFusion passes it.
//!
//! The provider plans [`NatalScanExec`]; [`NatalScanExec::as_data_source`] makes this form
//! of it, the one natal's plans take to a Ballista cluster (a table decoded from a plan,
//! `sent.rs`, plans it). Sent to an executor (`codec.rs`), the source holds what the
//! provider was asked, and plans the scan again over the same version when first read.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Statistics;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileGroup, FileOpenFuture, FileOpener, FileScanConfig, FileScanConfigBuilder, FileSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::physical_expr::{LexOrdering, Partitioning, PhysicalExpr};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan};
use object_store::ObjectStore;

use super::exec::{NatalScanExec, PartitionRead};
use super::partitions::Piece;
use super::plan::ScanPlan;
use super::statistics::scan_statistics;
use crate::datafusion::cluster::sent::SentScan;

/// DataFusion's default batch size, for a source opened before it was told the session's.
const DEFAULT_BATCH_SIZE: usize = 8192;

/// The pieces of one natal partition: the payload of its file group's one file.
#[derive(Debug, Clone)]
pub(crate) struct NatalPieces(pub Vec<Piece>);

/// The shared part of a natal scan as a `FileSource`: everything but which pieces each
/// partition reads (those travel with the files) and the limit (the `FileScanConfig`'s).
#[derive(Clone)]
pub struct NatalFileSource {
    scan: ScanSource,
    table_schema: TableSchema,
    metrics: ExecutionPlanMetricsSet,
    /// The session's batch size, once DataFusion gives it: what a filtered scan's small
    /// batches gather to.
    batch_size: Option<usize>,
}

/// Where a source's plan comes from.
#[derive(Clone)]
pub(crate) enum ScanSource {
    /// Planned in this process, over a snapshot it holds.
    Planned(Arc<ScanPlan>),
    /// Sent by another process: planned again, over the same version, when first read.
    Sent(Arc<SentScan>),
}

impl ScanSource {
    /// The version it reads.
    pub(crate) fn version(&self) -> u64 {
        match self {
            ScanSource::Planned(plan) => plan.snapshot.version(),
            ScanSource::Sent(sent) => sent.version(),
        }
    }
}

impl fmt::Debug for NatalFileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatalFileSource")
            .field("version", &self.scan.version())
            .finish_non_exhaustive()
    }
}

impl NatalFileSource {
    /// Where its plan comes from.
    pub(crate) fn scan(&self) -> &ScanSource {
        &self.scan
    }
}

/// A natal scan as a `DataSourceExec`: `groups[i]` (pieces, and their statistics when
/// known) is partition `i`.
pub(crate) fn data_source_exec(
    scan: ScanSource,
    schema: SchemaRef,
    groups: Vec<(Vec<Piece>, Option<Statistics>)>,
    limit: Option<usize>,
    statistics: Option<Statistics>,
) -> Arc<DataSourceExec> {
    let version = scan.version();
    let groups: Vec<FileGroup> = (groups.into_iter().enumerate())
        .map(|(i, (pieces, statistics))| {
            // A name that says what it is in EXPLAIN; nothing is read by it.
            let file = PartitionedFile::new(format!("natal/v{version}/p{i}"), 0)
                .with_extension(NatalPieces(pieces));
            let group = FileGroup::new(vec![file]);
            match statistics {
                Some(statistics) => group.with_statistics(Arc::new(statistics)),
                None => group,
            }
        })
        .collect();
    let source = NatalFileSource {
        scan,
        table_schema: TableSchema::from(schema.clone()),
        metrics: ExecutionPlanMetricsSet::new(),
        batch_size: None,
    };
    // The local file system's URL is always registered, so the scan opens anywhere;
    // the source never uses the store it is given. A declared partitioning keeps each
    // group in its partition: without one, DataFusion lets a partition's stream take
    // other groups' files at run time (`enable_file_stream_work_stealing`), and a
    // partition's rows would depend on which ran first.
    let partitioning = Partitioning::UnknownPartitioning(groups.len());
    let mut config =
        FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(source))
            .with_output_partitioning(Some(partitioning))
            .with_file_groups(groups)
            .with_limit(limit);
    if let Some(statistics) = statistics {
        config = config.with_statistics(statistics);
    }
    DataSourceExec::from_data_source(config.build())
}

impl NatalScanExec {
    /// This scan as a `DataSourceExec` over a `FileScanConfig` of [`NatalFileSource`]: the
    /// same rows, partition for partition (file group `i` is partition `i`), with the
    /// same statistics.
    pub fn as_data_source(&self) -> Arc<DataSourceExec> {
        let plan = self.plan();
        let schema = self.schema();
        let groups = (plan.partitions.iter().enumerate())
            .map(|(i, pieces)| {
                let statistics = scan_statistics(plan, &schema, Some(i));
                (pieces.clone(), Some(statistics))
            })
            .collect();
        let statistics = scan_statistics(plan, &schema, None);
        let shared = ScanPlan {
            partitions: Vec::new(),
            limit: None,
            ..plan.clone()
        };
        let scan = ScanSource::Planned(Arc::new(shared));
        data_source_exec(scan, schema, groups, plan.limit, Some(statistics))
    }
}

/// The natal scan `exec` is in its file-scan form, when it was planned in this process (not
/// sent from another): its configuration (file group `i` holds partition `i`'s pieces) and
/// the plan its partitions share.
pub(crate) fn planned_source(exec: &DataSourceExec) -> Option<(&FileScanConfig, &ScanPlan)> {
    let (config, source) = exec.downcast_to_file_source::<NatalFileSource>()?;
    match &source.scan {
        ScanSource::Planned(shared) => Some((config, shared)),
        ScanSource::Sent(_) => None,
    }
}

/// [`planned_source`]'s scan as the exec it was made from.
pub(crate) fn planned_scan(exec: &DataSourceExec) -> Option<NatalScanExec> {
    let (config, shared) = planned_source(exec)?;
    let mut partitions = Vec::with_capacity(config.file_groups.len());
    for group in &config.file_groups {
        let mut pieces = Vec::new();
        for file in group.files() {
            pieces.extend(file.extension::<NatalPieces>()?.0.iter().cloned());
        }
        partitions.push(pieces);
    }
    let plan = ScanPlan {
        partitions,
        limit: config.limit,
        ..shared.clone()
    };
    Some(NatalScanExec::new(plan, config.file_schema().clone()))
}

impl FileSource for NatalFileSource {
    fn create_file_opener(
        &self,
        _object_store: Arc<dyn ObjectStore>,
        base_config: &FileScanConfig,
        partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        Ok(Arc::new(NatalOpener {
            source: self.clone(),
            partition,
            limit: base_config.limit,
        }))
    }

    fn table_schema(&self) -> &TableSchema {
        &self.table_schema
    }

    fn with_batch_size(&self, batch_size: usize) -> Arc<dyn FileSource> {
        // natal's reader sizes its own batches (DataFusion splits larger ones); a filtered
        // scan gathers small ones to this.
        Arc::new(Self {
            batch_size: Some(batch_size),
            ..self.clone()
        })
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        &self.metrics
    }

    fn file_type(&self) -> &str {
        "natal"
    }

    fn fmt_extra(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, ", version={}", self.scan.version())
    }

    fn supports_repartitioning(&self) -> bool {
        false
    }

    /// Never: a file's byte ranges are not its pieces' rows.
    fn repartitioned(
        &self,
        _target_partitions: usize,
        _repartition_file_min_size: usize,
        _output_ordering: Option<LexOrdering>,
        _config: &FileScanConfig,
    ) -> Result<Option<FileScanConfig>> {
        Ok(None)
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }
}

/// Opens a natal partition's file: reads its pieces.
struct NatalOpener {
    source: NatalFileSource,
    partition: usize,
    limit: Option<usize>,
}

impl FileOpener for NatalOpener {
    fn open(&self, file: PartitionedFile) -> Result<FileOpenFuture> {
        let pieces = file.extension::<NatalPieces>().cloned().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal(format!(
                "{} is not a natal partition (no pieces)",
                file.object_meta.location
            ))
        })?;
        let schema = self.source.table_schema.file_schema().clone();
        let (scan, metrics) = (self.source.scan.clone(), self.source.metrics.clone());
        let (partition, limit) = (self.partition, self.limit);
        let batch_size = (self.source.batch_size).unwrap_or(DEFAULT_BATCH_SIZE);
        Ok(Box::pin(async move {
            let plan = match scan {
                ScanSource::Planned(plan) => plan,
                ScanSource::Sent(sent) => sent.plan().await?,
            };
            let read = PartitionRead {
                plan: &plan,
                schema: &schema,
                metrics: &metrics,
                partition,
                limit,
                batch_size,
            };
            Ok(read.stream(pieces.0))
        }))
    }
}
