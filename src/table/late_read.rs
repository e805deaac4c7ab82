//! Late materialization: a filtered scan whose output is much wider than its filter reads
//! each fragment in two steps. First the filter's columns (and the rows' addresses), pages
//! ruled out by the filter's bounds skipped, to learn which rows pass; then the output's
//! columns for those rows only, so Parquet fetches and decodes only the pages of the wide
//! columns that hold a passing row, and skips within them the values of the rows that do not.
//!
//! It is chosen when planned, by width: the columns the filter does not read must be at
//! least [`WIDTH_RATIO`] times the bytes of those it does, and [`MIN_ROW_BYTES`] a row (the
//! manifest's per-file column sizes). A narrow table gains nothing (every page of every column still holds a passing
//! row, and decoding a few integers costs less than skipping them), and a filter that keeps
//! most rows then reads its columns twice: the ratio keeps that second read a small share of
//! the whole. The second step reads the passing rows by selection, which Parquet follows
//! run by run for rows this wide (`io::reader::selection_policy`): a value skipped costs the
//! read of its length, not its decoding, so two steps cost less than one whatever share of
//! rows passes (the `late` bench at 1M rows: 0.27× at 0.01%, 0.65× at 1%, 0.83× at 50%,
//! 0.81× at 90%; stop 59). A scan once turned to one step after its filter had passed a
//! quarter of the rows, when the second step decoded every row of a stretch of short runs.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{SchemaRef, UInt64Type};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringBitmap;

use super::filter::{passing_rows, RowPredicate};
use super::rows_with_ids::read_with_ids;
use super::scan_request::{ScanMetrics, ScanRequest, ROW_ADDR};
use super::Snapshot;
use crate::error::{Error, Result};
use crate::format::{FieldId, Fragment, Manifest};
use crate::io::{FileColumns, PagePruning, TableStore};
use crate::rowid::RowAddress;

/// How much wider (in bytes) the output's other columns must be than the filter's for a
/// scan to read in two steps. A judgment, not a tuned figure: the `sql` bench's rows (3.5×:
/// an id and a 20-byte string beside the filtered integer) stay in one step, where two were
/// measured slower; the `late` bench's (5 KiB beside an integer) gain at every selectivity.
/// Sizes are as stored, after Parquet's encodings: strings that share prefixes with their
/// neighbours count for less than they decode to, which errs towards one step.
const WIDTH_RATIO: u64 = 4;

/// The fewest bytes a row the output's other columns must hold, on average, for two steps.
/// Values of a few numbers decode faster than Parquet skips them: TPC-H's `lineitem`
/// filtered on a dictionary-coded flag (q10, q19: 24 bytes a row beside 1) ran 1.26-1.36×
/// DataFusion's Parquet in two steps, 0.8-1.0× in one (BENCHMARKS.md, stop 50).
const MIN_ROW_BYTES: u64 = 256;

/// Fewer rows than this in a fragment (a take, an index's answer) are read in one step:
/// a second step would be a second round of requests for rows that are few already.
const MIN_ROWS: u64 = 8 * 1024;

/// The first step of a two-step read: the filter's columns, then `_rowaddr`.
pub(super) struct LateRead {
    columns: FileColumns,
    schema: SchemaRef,
    request: ScanRequest,
    predicate: Arc<dyn RowPredicate>,
    /// Where the predicate's layout sits in the first step's batches.
    probe: Vec<usize>,
    addr_at: usize,
    /// The output's columns the filter does not read: what the first step spares.
    deferred_ids: Vec<FieldId>,
    /// The second step: the scan's output columns and schema.
    output: Projection,
}

/// The parts of a snapshot's projection a plan needs: a request's columns and their schema.
pub(super) type Projection = (FileColumns, SchemaRef);

impl LateRead {
    /// The two steps for `predicate` over a scan of `manifest` whose output is `output`, if
    /// the scan is worth reading in two steps. `probe` is the read of the predicate's columns
    /// (its [`super::filter::predicate_layout`], views only for columns the output does not hold) and its
    /// projection; `project` lays out a request as the scan would.
    pub(super) fn plan(
        manifest: &Manifest,
        output: Projection,
        predicate: &Arc<dyn RowPredicate>,
        (probe_request, probe_ids, probe): (&ScanRequest, &FileColumns, &SchemaRef),
        project: impl Fn(&ScanRequest) -> Result<Projection>,
    ) -> Result<Option<Self>> {
        let deferred_ids: Vec<FieldId> = (output.0.ids().iter())
            .filter(|id| !probe_ids.ids().contains(id))
            .copied()
            .collect();
        if deferred_ids.is_empty() || !wide_enough(manifest, &deferred_ids, probe_ids.ids()) {
            return Ok(None);
        }
        let read = ScanRequest {
            with_row_addr: true,
            ..probe_request.clone()
        };
        let (columns, schema) = project(&read)?;
        let probe = (probe.fields().iter())
            .map(|f| schema.index_of(f.name()))
            .collect::<std::result::Result<Vec<usize>, _>>()?;
        let addr_at = schema.index_of(ROW_ADDR)?;
        Ok(Some(Self {
            columns,
            schema,
            request: read,
            predicate: predicate.clone(),
            probe,
            addr_at,
            deferred_ids,
            output,
        }))
    }

    /// Whether a fragment's read of `selected` rows (all of `rows` if `None`) goes in two
    /// steps: enough of them ([`MIN_ROWS`]).
    pub(super) fn applies(&self, selected: Option<&RoaringBitmap>, rows: &Range<u32>) -> bool {
        let count = || u64::from(rows.end.saturating_sub(rows.start));
        selected.map_or_else(count, RoaringBitmap::len) >= MIN_ROWS
    }

    /// The rows of `fragment` at `offsets` (all, if `None`) within `rows` that pass the
    /// filter, as the scan's output with the system columns `request` asks for.
    pub(super) fn read(
        self: Arc<Self>,
        store: &TableStore,
        fragment: &Fragment,
        (offsets, rows): (Option<RoaringBitmap>, Range<u32>),
        pages: Option<PagePruning>,
        request: &ScanRequest,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let (store, fragment) = (store.clone(), fragment.clone());
        let ids = ScanRequest {
            with_row_id: request.with_row_id,
            with_row_addr: request.with_row_addr,
            with_lineage: request.with_lineage,
            ..ScanRequest::default()
        };
        let (limit, metrics) = (request.limit, request.metrics.clone());
        let read = async move {
            let first = (offsets, rows.clone());
            let passing = (self.passing(&store, &fragment, first, pages, limit, metrics)).await?;
            if passing.is_empty() {
                return Ok(futures::stream::empty().boxed());
            }
            let (columns, schema) = &self.output;
            let second = (Some(passing), rows);
            Ok::<_, Error>(read_with_ids(
                &store, &fragment, columns, schema, &ids, second, None,
            ))
        };
        futures::stream::once(read).try_flatten().boxed()
    }

    /// The offsets of `fragment`'s rows that pass the filter, among `offsets` (all, if
    /// `None`) within `rows`; at most `limit` of them, the first ones.
    async fn passing(
        &self,
        store: &TableStore,
        fragment: &Fragment,
        (offsets, rows): (Option<RoaringBitmap>, Range<u32>),
        pages: Option<PagePruning>,
        limit: Option<usize>,
        metrics: Option<Arc<ScanMetrics>>,
    ) -> Result<RoaringBitmap> {
        let mut batches: BoxStream<'static, Result<RecordBatch>> = read_with_ids(
            store,
            fragment,
            &self.columns,
            &self.schema,
            &self.request,
            (offsets, rows),
            pages,
        );
        let mut passing = RoaringBitmap::new();
        let mut rejected = 0u64;
        while let Some(batch) = batches.try_next().await? {
            let keep = passing_rows(self.predicate.as_ref(), &batch, &self.probe)?;
            let addrs = (batch.column(self.addr_at).as_primitive_opt::<UInt64Type>())
                .ok_or_else(|| Error::internal("a filter's read lost its rows' addresses"))?;
            let before = passing.len();
            for (row, addr) in addrs.values().iter().enumerate() {
                if keep.is_valid(row) && keep.value(row) {
                    // Batches come in offset order, so this appends.
                    passing.insert(RowAddress::from_u64(*addr).offset());
                }
            }
            rejected += batch.num_rows() as u64 - (passing.len() - before);
            if let Some(limit) = limit.map(|l| l as u64).filter(|&l| passing.len() >= l) {
                // The first `limit` passing rows are all a limited scan returns.
                match limit.checked_sub(1).and_then(|n| passing.select(n as u32)) {
                    Some(last) => {
                        passing.remove_range(last + 1..);
                    }
                    None => passing.clear(),
                }
                break;
            }
        }
        if let Some(metrics) = &metrics {
            metrics.rows_filtered.fetch_add(rejected, Ordering::Relaxed);
            metrics
                .rows_late_skipped
                .fetch_add(rejected, Ordering::Relaxed);
            let bytes = skipped_bytes(fragment, &self.deferred_ids, rejected);
            metrics
                .bytes_late_skipped
                .fetch_add(bytes, Ordering::Relaxed);
        }
        Ok(passing)
    }
}

/// Whether the columns `deferred` hold at least [`WIDTH_RATIO`] times the bytes of
/// `probe` across `manifest`'s fragments, and [`MIN_ROW_BYTES`] a row. A column whose size
/// no file records counts as nothing deferred, and as too much to probe: an unknown width
/// never picks two steps.
fn wide_enough(manifest: &Manifest, deferred: &[FieldId], probe: &[FieldId]) -> bool {
    let mut deferred_bytes = 0u64;
    let mut probe_bytes = 0u64;
    let mut rows = 0u64;
    for fragment in &manifest.fragments {
        rows += u64::from(fragment.physical_rows);
        deferred_bytes += fragment.uncompressed_bytes(deferred);
        for id in probe {
            // A fragment that predates a column reads it as nulls: nothing to read.
            if fragment.file_holding(*id).is_none() {
                continue;
            }
            match fragment
                .column_stats(*id)
                .and_then(|s| s.uncompressed_bytes)
            {
                Some(bytes) => probe_bytes += bytes,
                None => return false,
            }
        }
    }
    deferred_bytes >= rows.max(1).saturating_mul(MIN_ROW_BYTES)
        && deferred_bytes >= probe_bytes.max(1).saturating_mul(WIDTH_RATIO)
}

/// Bytes a row, at least, of the columns a top-k by a distance does not rank by, for the
/// rows to be taken after it (`Snapshot::worth_taking_after_ranking`): under it a take of
/// `k` rows costs more than reading them with the vectors (an id and a short label).
const MIN_TAKEN_ROW_BYTES: u64 = 64;

impl Snapshot {
    /// Whether reading the columns `others` for the few rows a top-k keeps, after it,
    /// spares a scan more than those takes cost: one of them is a blob column (its values
    /// are fetched apart), or they hold at least [`MIN_TAKEN_ROW_BYTES`] a row across the
    /// fragments. A column whose size no file records counts as nothing.
    pub(crate) fn worth_taking_after_ranking(&self, others: &[String]) -> bool {
        let fields: Vec<&crate::format::Field> = (others.iter())
            .filter_map(|name| self.schema().field_by_name(name))
            .collect();
        if fields.iter().any(|f| f.blob.is_some()) {
            return true;
        }
        let ids: Vec<FieldId> = fields.iter().map(|f| f.id).collect();
        let manifest = self.manifest();
        let rows: u64 = (manifest.fragments.iter())
            .map(|f| u64::from(f.physical_rows))
            .sum();
        let bytes: u64 = (manifest.fragments.iter())
            .map(|f| f.uncompressed_bytes(&ids))
            .sum();
        bytes >= rows.max(1).saturating_mul(MIN_TAKEN_ROW_BYTES)
    }
}

/// The bytes (before compression) of the columns `deferred` that `rows` of `fragment` hold,
/// by the columns' average width in the fragment: what the first step spared the scan.
fn skipped_bytes(fragment: &Fragment, deferred: &[FieldId], rows: u64) -> u64 {
    if fragment.physical_rows == 0 {
        return 0;
    }
    let bytes = fragment.uncompressed_bytes(deferred);
    let per_row = bytes as f64 / f64::from(fragment.physical_rows);
    (per_row * rows as f64) as u64
}
