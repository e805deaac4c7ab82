//! Byte ranges of single blob values, wherever their bytes are: sliced from the descriptor
//! of an inline value, and for sidecar values fetched as a scan fetches whole ones
//! (`blob::fetch_ranges`: one coalesced request per sidecar).

use std::ops::Range;

use arrow::array::{ArrayRef, AsArray};
use bytes::Bytes;

use super::external::read_external;
use super::sidecars::{fetch_ranges, inline_value, BlobLocation, Descriptors};
use crate::error::{Error, Result};
use crate::format::{blob_descriptor, DataFile};
use crate::io::TableStore;

impl TableStore {
    /// For each `(row, range)` of `wanted`, bytes `range` of the value at `row` of
    /// `descriptors` (a blob column as the data file `data_file` holds it). A range past the
    /// value's end, a NULL value, or an external one is an error naming the row.
    pub async fn read_blob_ranges(
        &self,
        file: &DataFile,
        descriptors: &ArrayRef,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Bytes>> {
        let data_file = &file.path;
        let described = Descriptors::of(descriptors, file)?;
        let inline = descriptors.as_struct().column(blob_descriptor::INLINE);
        // Per range: its bytes sliced from an inline value, or its index among those to fetch.
        let mut parts: Vec<Result<Bytes, Part>> = Vec::with_capacity(wanted.len());
        let mut to_fetch = Vec::new();
        let mut external = Vec::new();
        for (row, range) in wanted {
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
            parts.push(match described.location(*row)? {
                BlobLocation::Null => {
                    return Err(Error::invalid("the blob value asked for is NULL"));
                }
                BlobLocation::Inline => {
                    let value = inline_value(inline, *row, data_file)?;
                    let end = usize::try_from(range.end).unwrap_or(usize::MAX);
                    if end > value.len() {
                        return Err(past(value.len() as u64));
                    }
                    Ok(Bytes::copy_from_slice(&value[range.start as usize..end]))
                }
                BlobLocation::Sidecar {
                    sidecar,
                    range: held,
                } => {
                    if range.end > held.end - held.start {
                        return Err(past(held.end - held.start));
                    }
                    to_fetch.push((sidecar, held.start + range.start..held.start + range.end));
                    Err(Part::Sidecar(to_fetch.len() - 1))
                }
                BlobLocation::External { uri, range: held } => {
                    let wanted = match held {
                        Some(held) if range.end > held.end - held.start => {
                            return Err(past(held.end - held.start));
                        }
                        Some(held) => held.start + range.start..held.start + range.end,
                        // The whole object: its size is known only to its store, which
                        // refuses a range past its end.
                        None => range.clone(),
                    };
                    external.push((uri, Some(wanted)));
                    Err(Part::External(external.len() - 1))
                }
            });
        }
        let mut from_sidecars = fetch_ranges(self, data_file, to_fetch).await?;
        let mut from_elsewhere = read_external(self.external.as_ref(), external).await?;
        Ok(parts
            .into_iter()
            .map(|part| match part {
                Ok(bytes) => bytes,
                Err(Part::Sidecar(at)) => std::mem::take(&mut from_sidecars[at]),
                Err(Part::External(at)) => std::mem::take(&mut from_elsewhere[at]),
            })
            .collect())
    }
}

/// A range still to fetch: its index among the sidecar or the external ranges.
enum Part {
    Sidecar(usize),
    External(usize),
}
