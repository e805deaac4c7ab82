//! Byte ranges of single blob values, wherever their bytes are: sliced from the descriptor
//! of an inline value, and for sidecar values one coalesced ranged request per sidecar for
//! every range asked of it (`ObjectStore::get_ranges` merges neighbours).

use std::collections::HashMap;
use std::ops::Range;

use arrow::array::{ArrayRef, AsArray};
use bytes::Bytes;

use super::blob::{inline_value, read_sidecar_ranges, BlobLocation, Descriptors};
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{blob_descriptor, TablePath};

impl TableStore {
    /// For each `(row, range)` of `wanted`, bytes `range` of the value at `row` of
    /// `descriptors` (a blob column as the data file `data_file` holds it). A range past the
    /// value's end, a NULL value, or an external one is an error naming the row.
    pub async fn read_blob_ranges(
        &self,
        data_file: &TablePath,
        descriptors: &ArrayRef,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Bytes>> {
        let described = Descriptors::of(descriptors, data_file)?;
        let inline = descriptors.as_struct().column(blob_descriptor::INLINE);
        let mut out: Vec<Option<Bytes>> = vec![None; wanted.len()];
        let mut by_sidecar: HashMap<TablePath, Vec<(usize, Range<u64>)>> = HashMap::new();
        for (at, (row, range)) in wanted.iter().enumerate() {
            if *row >= described.len() || range.start > range.end {
                return Err(Error::invalid(format!(
                    "no bytes {range:?} of row {row} of a blob column"
                )));
            }
            let past = |size: u64| {
                Error::invalid(format!(
                    "bytes {range:?} are past the end of a blob value of {size} bytes"
                ))
            };
            match described.location(*row)? {
                BlobLocation::Null => {
                    return Err(Error::invalid("the blob value asked for is NULL"));
                }
                BlobLocation::Inline => {
                    let value = inline_value(inline, *row, data_file)?;
                    let end = usize::try_from(range.end).unwrap_or(usize::MAX);
                    if end > value.len() {
                        return Err(past(value.len() as u64));
                    }
                    out[at] = Some(Bytes::copy_from_slice(&value[range.start as usize..end]));
                }
                BlobLocation::Sidecar {
                    sidecar,
                    range: held,
                } => {
                    if range.end > held.end - held.start {
                        return Err(past(held.end - held.start));
                    }
                    let absolute = held.start + range.start..held.start + range.end;
                    by_sidecar.entry(sidecar).or_default().push((at, absolute));
                }
                BlobLocation::External { uri, .. } => {
                    return Err(Error::invalid(format!(
                        "the blob at {uri} is external; this natal does not read external blobs"
                    )));
                }
            }
        }
        for (sidecar, parts) in by_sidecar {
            let ranges: Vec<Range<u64>> = parts.iter().map(|(_, r)| r.clone()).collect();
            let fetched = read_sidecar_ranges(self, data_file, &sidecar, &ranges).await?;
            for ((at, _), bytes) in parts.iter().zip(fetched) {
                out[*at] = Some(bytes);
            }
        }
        out.into_iter()
            .map(|bytes| bytes.ok_or_else(|| Error::internal("a blob range went unread")))
            .collect()
    }
}
