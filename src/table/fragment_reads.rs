//! How each fragment of one scan is read ([`FragmentReads`], planned by
//! `Snapshot::fragment_reads`): its columns with `_rowid` and `_rowaddr`, the filter applied
//! as rows are read, a limit cut per fragment, and deferred blob columns resolved for the
//! rows kept.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::stream::BoxStream;
use futures::StreamExt;
use roaring::RoaringBitmap;

use super::blobs::deferred::DeferredBlobs;
use super::filter::{filter_batch, RowPredicate};
use super::late_read::LateRead;
use super::rows_with_ids::read_with_ids;
use super::scan_request::ScanRequest;
use crate::error::Result;
use crate::format::Fragment;
use crate::io::{FileColumns, PagePruning, TableStore};

/// How each fragment of one scan is read (see `Snapshot::fragment_reads`).
pub(super) struct FragmentReads {
    pub(super) columns: FileColumns,
    pub(super) schema: SchemaRef,
    pub(super) request: ScanRequest,
    pub(super) filter: Option<Arc<ReadFilter>>,
    /// Rows ruled out before reading by the page index, for the filter.
    pub(super) pages: Option<PagePruning>,
    /// Blob columns fetched only for the rows the filter keeps.
    pub(super) deferred: Option<Arc<DeferredBlobs>>,
    /// The filter read first on its own, then the output for the passing rows only, where
    /// a fragment has enough rows for two steps to pay.
    pub(super) late: Option<Arc<LateRead>>,
}

/// A scan's filter, placed in the wider read it needs.
pub(super) struct ReadFilter {
    pub(super) predicate: Arc<dyn RowPredicate>,
    /// Where the predicate's columns sit in the read.
    pub(super) probe: Vec<usize>,
    /// Where the scan's output columns sit in the read.
    pub(super) wanted: Vec<usize>,
    pub(super) output: SchemaRef,
}

impl FragmentReads {
    /// The rows at `offsets` (all, if `None`) of `fragment`.
    pub(super) fn read(
        &self,
        store: &TableStore,
        fragment: &Fragment,
        offsets: Option<RoaringBitmap>,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        self.read_pruning(store, fragment, offsets, 0..fragment.physical_rows, true)
    }

    /// [`Self::read`] of the offsets in `rows`, judging pages by the filter only if
    /// `prune_pages`: rows an index found are few and hold the values, so judging every
    /// page would be wasted work.
    pub(super) fn read_pruning(
        &self,
        store: &TableStore,
        fragment: &Fragment,
        offsets: Option<RoaringBitmap>,
        rows: std::ops::Range<u32>,
        prune_pages: bool,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let pages = self.pages.clone().filter(|_| prune_pages);
        let late = (self.late.clone()).filter(|late| late.applies(offsets.as_ref(), &rows));
        match late {
            Some(late) => late.read(store, fragment, (offsets, rows), pages, &self.request),
            None => self.one_step(store, fragment, (offsets, rows), pages),
        }
    }

    /// The rows at `offsets` within `rows` of `fragment`, read in one step.
    fn one_step(
        &self,
        store: &TableStore,
        fragment: &Fragment,
        (offsets, rows): (Option<RoaringBitmap>, std::ops::Range<u32>),
        pages: Option<PagePruning>,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let rows = read_with_ids(
            store,
            fragment,
            &self.columns,
            &self.schema,
            &self.request,
            (offsets, rows),
            pages,
        );
        let limit = self.request.limit;
        let Some(filter) = self.filter.clone() else {
            return match self.deferred.clone() {
                Some(blobs) => blobs.resolve(store, fragment, at_most(rows, limit)),
                None => rows,
            };
        };
        let metrics = self.request.metrics.clone();
        let kept = rows
            .map(move |batch| {
                let batch = batch?;
                let kept = filter_batch(
                    filter.predicate.as_ref(),
                    &batch,
                    &filter.probe,
                    &filter.wanted,
                    &filter.output,
                )?;
                if let Some(m) = &metrics {
                    let rejected = (batch.num_rows() - kept.num_rows()) as u64;
                    m.rows_filtered.fetch_add(rejected, Ordering::Relaxed);
                }
                Ok(kept)
            })
            .boxed();
        match self.deferred.clone() {
            Some(blobs) => blobs.resolve(store, fragment, at_most(kept, limit)),
            None => kept,
        }
    }
}

/// `rows` cut after `limit` rows (all of them for `None`): no fragment gives a limited scan
/// more rows than its limit, so none has payloads fetched for rows past it.
pub(super) fn at_most(
    rows: BoxStream<'static, Result<RecordBatch>>,
    limit: Option<usize>,
) -> BoxStream<'static, Result<RecordBatch>> {
    let Some(limit) = limit else {
        return rows;
    };
    rows.scan(limit, |left, batch| {
        let cut = match batch {
            Ok(_) if *left == 0 => None,
            Ok(batch) => {
                let rows = batch.num_rows().min(*left);
                *left -= rows;
                Some(Ok(batch.slice(0, rows)))
            }
            Err(e) => Some(Err(e)),
        };
        futures::future::ready(cut)
    })
    .boxed()
}
