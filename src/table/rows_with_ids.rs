//! A fragment's rows as a scan hands them over: the user columns a data-file read decodes,
//! then the columns computed from each row's offset — `_rowid` (from the fragment's id
//! sequence, or its birth address), `_rowaddr` and the lineage columns — as the request asks.
//! One-step reads, both steps of a two-step read and takes all read through it.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, UInt64Array};
use arrow::datatypes::{Schema as ArrowSchema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringBitmap;

use super::scan_request::ScanRequest;
use crate::error::{Error, Result};
use crate::format::Fragment;
use crate::io::{FileColumns, PagePruning, TableStore};
use crate::rowid::{RowAddress, RowId, SequenceCursor};

/// Streams the rows at `offsets` (all, if `None`) within the offsets `rows` of one fragment:
/// its `columns`, then `_rowid`, `_rowaddr` and the lineage columns if the request asks
/// for them, as `output`.
pub(super) fn read_with_ids(
    store: &TableStore,
    fragment: &Fragment,
    columns: &FileColumns,
    output: &SchemaRef,
    request: &ScanRequest,
    (offsets, rows): (Option<RoaringBitmap>, std::ops::Range<u32>),
    pages: Option<PagePruning>,
) -> BoxStream<'static, Result<RecordBatch>> {
    let user = Arc::new(ArrowSchema::new(output.fields()[..columns.len()].to_vec()));
    let output = output.clone();
    let (with_id, with_addr) = (request.with_row_id, request.with_row_addr);
    let fragment_id = fragment.id;
    let sequence = fragment.row_ids.sequence().cloned();
    // Per-row versions may be in a file of their own: read (once) before the first batch.
    let lineage = request.with_lineage.then(|| {
        let (store, stored, rows) = (
            store.clone(),
            fragment.lineage.clone(),
            fragment.physical_rows,
        );
        async move { store.lineage_of(&stored, rows).await }
    });
    let rows = store.read_fragment(fragment, columns, user, offsets, rows, pages);
    futures::stream::once(async move {
        let lineage = match lineage {
            Some(read) => Some(read.await?),
            None => None,
        };
        // One walk over the sequence for the whole fragment: batches come in offset order.
        let mut cursor = SequenceCursor::default();
        Ok::<_, Error>(rows.map(move |item| {
            let (batch, offsets) = item?;
            let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
            if with_id {
                let ids: Vec<u64> = match &sequence {
                    Some(seq) => offsets
                        .iter()
                        .map(|&o| seq.get_from(o, &mut cursor).map_or(u64::MAX, RowId::as_u64))
                        .collect(),
                    None => offsets
                        .iter()
                        .map(|&o| RowAddress::new(fragment_id, o).as_u64())
                        .collect(),
                };
                let ids = UInt64Array::from(ids);
                columns.push(Arc::new(ids));
            }
            if with_addr {
                let addrs: UInt64Array = offsets
                    .iter()
                    .map(|&o| RowAddress::new(fragment_id, o).as_u64())
                    .collect::<Vec<u64>>()
                    .into();
                columns.push(Arc::new(addrs));
            }
            if let Some(lineage) = &lineage {
                let created: UInt64Array = offsets.iter().map(|&o| lineage.created_at(o)).collect();
                let updated: UInt64Array = offsets.iter().map(|&o| lineage.updated_at(o)).collect();
                columns.push(Arc::new(created));
                columns.push(Arc::new(updated));
            }
            Ok(RecordBatch::try_new_with_options(
                output.clone(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
            )?)
        }))
    })
    .try_flatten()
    .boxed()
}
