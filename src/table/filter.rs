//! Filters evaluated while reading. A scan with a [`RowPredicate`] reads, per fragment, only
//! the columns the predicate needs, evaluates it, and then reads the requested columns of
//! the rows that passed: other rows' values are skipped inside their pages, and pages with no
//! passing row are never fetched.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch, UInt64Array};
use arrow::datatypes::SchemaRef;
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryFutureExt, TryStreamExt};
use roaring::RoaringBitmap;

use super::snapshot::read_with_ids;
use super::ScanRequest;
use crate::error::{Error, Result};
use crate::format::Fragment;
use crate::io::TableStore;
use crate::rowid::RowAddress;

/// A condition on rows, evaluated batch by batch as a scan reads.
pub trait RowPredicate: fmt::Debug + fmt::Display + Send + Sync {
    /// The user columns it reads, by name.
    fn columns(&self) -> &[String];
    /// Whether it reads `_rowid`.
    fn needs_row_id(&self) -> bool;
    /// Which rows of `batch` pass; a null is a row that does not. `batch` is laid out as
    /// [`super::Snapshot::scan_schema`] lays out [`probe_request`] for this predicate.
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray>;
}

/// What a scan reads first to evaluate `predicate`: its columns, and `_rowaddr` to know
/// which rows passed.
pub fn probe_request(predicate: &dyn RowPredicate) -> ScanRequest {
    ScanRequest {
        columns: Some(predicate.columns().to_vec()),
        with_row_id: predicate.needs_row_id(),
        with_row_addr: true,
        ..Default::default()
    }
}

/// One read of a fragment: which fields, as what schema, for which request.
pub(super) struct FragmentRead {
    pub field_ids: Vec<u32>,
    pub schema: SchemaRef,
    pub request: ScanRequest,
}

/// Reads `probe` at `offsets`, keeps the offsets whose rows pass `predicate`, then reads
/// `read` at only those.
pub(super) fn read_filtered(
    store: TableStore,
    fragment: Fragment,
    predicate: Arc<dyn RowPredicate>,
    probe: FragmentRead,
    read: FragmentRead,
    offsets: Option<RoaringBitmap>,
) -> BoxStream<'static, Result<RecordBatch>> {
    let mut probed = read_with_ids(
        &store,
        &fragment,
        &probe.field_ids,
        &probe.schema,
        &probe.request,
        offsets,
    );
    async move {
        let mut passing = RoaringBitmap::new();
        let mut rejected = 0u64;
        while let Some(batch) = probed.try_next().await? {
            let keep = predicate.evaluate(&batch)?;
            let addresses = batch
                .columns()
                .last()
                .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
                .ok_or_else(|| Error::invalid("a filter's probe lost its address column"))?;
            if keep.len() != addresses.len() {
                return Err(Error::invalid(format!(
                    "filter {predicate} answered {} rows of {}",
                    keep.len(),
                    addresses.len()
                )));
            }
            for (i, address) in addresses.values().iter().enumerate() {
                if keep.is_valid(i) && keep.value(i) {
                    passing.insert(RowAddress::from_u64(*address).offset());
                } else {
                    rejected += 1;
                }
            }
        }
        if let Some(metrics) = &read.request.metrics {
            metrics.rows_filtered.fetch_add(rejected, Ordering::Relaxed);
        }
        Ok(if passing.is_empty() {
            stream::empty().boxed()
        } else {
            read_with_ids(
                &store,
                &fragment,
                &read.field_ids,
                &read.schema,
                &read.request,
                Some(passing),
            )
        })
    }
    .try_flatten_stream()
    .boxed()
}
