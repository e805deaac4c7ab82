//! Reading parts of blob values by row id (`Snapshot::read_blob_ranges`): the rows'
//! descriptors are taken as a take reads rows, then each sidecar gets one coalesced ranged
//! request for every range asked of it; no whole value is fetched to read part of it.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::UInt64Type;
use bytes::Bytes;
use futures::TryStreamExt;

use super::scan_request::ScanRequest;
use super::snapshot::Snapshot;
use crate::error::{Error, Result};
use crate::rowid::{RowAddress, RowId, RowIdSet};

/// A row of a batch of descriptors, and the bytes asked of its value.
type RowRange = (usize, Range<u64>);

impl Snapshot {
    /// For each `(row id, range)` of `wanted`, bytes `range` of the row's value in the blob
    /// column `column` (a range may cover the whole value: `0..size`). Ranges of one sidecar
    /// are fetched together, in as few requests as the store can merge them into.
    ///
    /// # Errors
    /// A column that is not a blob column, an id with no live row, a range past its value's
    /// end, a NULL value: `InvalidInput`. A sidecar missing or short: `Corrupt`; an external
    /// value that cannot be read: `ExternalBlob`.
    pub async fn read_blob_ranges(
        &self,
        column: &str,
        wanted: &[(RowId, Range<u64>)],
    ) -> Result<Vec<Bytes>> {
        let field = self
            .schema()
            .field_by_name(column)
            .filter(|f| f.blob.is_some())
            .ok_or_else(|| Error::invalid(format!("{column} is not a blob column")))?;
        let field_id = field.id;
        let ids: RowIdSet = wanted.iter().map(|(id, _)| *id).collect();
        let request = ScanRequest {
            columns: Some(vec![column.to_string()]),
            with_row_id: true,
            with_row_addr: true,
            row_ids: Some(ids),
            blob_descriptors: true,
            ..Default::default()
        };
        let batches: Vec<RecordBatch> = self.scan(request).await?.try_collect().await?;
        // Where each id's descriptor is: its batch and row, and its fragment.
        let mut found: HashMap<u64, (usize, usize, u32)> = HashMap::new();
        for (at, batch) in batches.iter().enumerate() {
            let ids = batch.column(1).as_primitive::<UInt64Type>();
            let addrs = batch.column(2).as_primitive::<UInt64Type>();
            for row in 0..batch.num_rows() {
                let fragment = RowAddress::from_u64(addrs.value(row)).fragment_id();
                found.insert(ids.value(row), (at, row, fragment));
            }
        }
        let mut groups: BTreeMap<(usize, u32), Vec<(usize, RowRange)>> = BTreeMap::new();
        for (at, (id, range)) in wanted.iter().enumerate() {
            let (batch, row, fragment) = *found
                .get(&id.as_u64())
                .ok_or_else(|| Error::invalid(format!("no live row has id {}", id.as_u64())))?;
            groups
                .entry((batch, fragment))
                .or_default()
                .push((at, (row, range.clone())));
        }
        let mut out: Vec<Option<Bytes>> = vec![None; wanted.len()];
        for ((batch, fragment_id), items) in groups {
            let fragment = self
                .manifest()
                .fragments
                .iter()
                .find(|f| f.id == fragment_id)
                .ok_or_else(|| Error::internal("a row's fragment is not in its version"))?;
            let file = fragment
                .file_holding(field_id)
                .map(|i| &fragment.files[i])
                .ok_or_else(|| Error::invalid(format!("the row's {column} is NULL")))?;
            let asked: Vec<(usize, Range<u64>)> = items.iter().map(|(_, a)| a.clone()).collect();
            let read = self
                .store()
                .read_blob_ranges(&file.path, batches[batch].column(0), &asked)
                .await?;
            for ((at, _), bytes) in items.iter().zip(read) {
                out[*at] = Some(bytes);
            }
        }
        out.into_iter()
            .map(|bytes| bytes.ok_or_else(|| Error::internal("a blob range went unread")))
            .collect()
    }
}
