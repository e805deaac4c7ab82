//! [`ObjectFileReader`]: Parquet's `AsyncFileReader` over an object store, reading the footer
//! and page index with one suffix-sized request when the file is small enough, and a read of
//! scattered rows with one request for all their pages ([`page_ranges`]), and how such a
//! read follows its selection ([`selection_policy`]).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use object_store::path::Path;
use object_store::ObjectStore;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, RowSelection, RowSelectionPolicy};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::ProjectionMask;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

/// Bytes fetched from the end of a file on open: the footer and, usually, the page index.
const FOOTER_PREFETCH: usize = 64 * 1024;

/// The fewest bytes a row (decoded, of the columns read) at which a selection is followed
/// run by run, however short its runs ([`selection_policy`]). A judgment, as is the
/// `late` bench's row width (5 KiB) it was measured on, and the same bar as two-step reads'.
pub(crate) const SKIP_ROW_BYTES: u64 = 256;

pub(crate) struct ObjectFileReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    file_size: u64,
    /// Adds the bytes of every response (a scan's `bytes_read` metric).
    bytes_read: Option<Arc<AtomicU64>>,
    /// Ranges fetched ahead by [`Self::prefetch`], served instead of asking the store again.
    prefetched: HashMap<Range<u64>, Bytes>,
    /// The whole file, when reading its footer fetched all of it (files under
    /// `FOOTER_PREFETCH`): its pages are then served without another request.
    whole: Option<Bytes>,
}

impl ObjectFileReader {
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        path: Path,
        file_size: u64,
        bytes_read: Option<Arc<AtomicU64>>,
    ) -> Self {
        Self {
            store,
            path,
            file_size,
            bytes_read,
            prefetched: HashMap::new(),
            whole: None,
        }
    }

    /// `range` of the file if it is already held.
    fn held(&self, range: &Range<u64>) -> Option<Bytes> {
        if let Some(bytes) = self.prefetched.get(range) {
            return Some(bytes.clone());
        }
        let whole = self.whole.as_ref()?;
        let (start, end) = (
            usize::try_from(range.start).ok()?,
            usize::try_from(range.end).ok()?,
        );
        (start <= end && end <= whole.len()).then(|| whole.slice(start..end))
    }

    /// Fetches `ranges` in one request, for the Parquet reader to take from memory: it
    /// would otherwise ask once per row group, one after another.
    pub(crate) async fn prefetch(&mut self, ranges: Vec<Range<u64>>) -> Result<()> {
        let missing: Vec<Range<u64>> = ranges
            .into_iter()
            .filter(|r| self.held(r).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let parts = self.get_byte_ranges(missing.clone()).await?;
        self.prefetched.extend(missing.into_iter().zip(parts));
        Ok(())
    }

    fn count(&self, bytes: usize) {
        if let Some(counter) = &self.bytes_read {
            counter.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        if let Some(bytes) = self.held(&range) {
            return futures::future::ready(Ok(bytes)).boxed();
        }
        async move {
            let whole_file = range.start == 0 && range.end == self.file_size;
            // `get_ranges`, not `get_range`: one request either way, but on a local disk one
            // blocking call where `get_range` makes two (open, then read).
            let bytes = self
                .store
                .get_ranges(&self.path, std::slice::from_ref(&range))
                .await
                .map_err(external)?
                .pop()
                .ok_or_else(|| {
                    external(object_store::Error::Generic {
                        store: "natal",
                        source: "a ranged read returned nothing".into(),
                    })
                })?;
            self.count(bytes.len());
            if whole_file {
                self.whole = Some(bytes.clone());
            }
            Ok(bytes)
        }
        .boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        let held: Option<Vec<Bytes>> = ranges.iter().map(|range| self.held(range)).collect();
        if let Some(parts) = held {
            return futures::future::ready(Ok(parts)).boxed();
        }
        async move {
            // Pages next to each other (a column chunk read past a few deleted rows) in one
            // read: a local store makes one system call per range it is given.
            let (merged, within) = coalesced(&ranges);
            let parts = self
                .store
                .get_ranges(&self.path, &merged)
                .await
                .map_err(external)?;
            self.count(parts.iter().map(Bytes::len).sum());
            let cut = |(range, &at): (&Range<u64>, &usize)| {
                let (part, from) = (parts.get(at)?, merged.get(at)?.start);
                let start = usize::try_from(range.start - from).ok()?;
                let end = usize::try_from(range.end - from).ok()?;
                (end <= part.len()).then(|| part.slice(start..end))
            };
            (ranges.iter().zip(&within))
                .map(|r| cut(r).ok_or_else(|| ParquetError::EOF("a ranged read came short".into())))
                .collect()
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        async move {
            let mut reader = ParquetMetaDataReader::new()
                .with_metadata_options(options.map(|o| o.metadata_options().clone()))
                .with_prefetch_hint(Some(FOOTER_PREFETCH));
            if let Some(options) = options {
                reader = reader
                    .with_column_index_policy(options.column_index_policy())
                    .with_offset_index_policy(options.offset_index_policy());
            }
            let file_size = self.file_size;
            Ok(Arc::new(reader.load_and_finish(self, file_size).await?))
        }
        .boxed()
    }
}

/// The fewest ranges covering `ranges`, ascending (those that touch or overlap merged), and
/// for each of `ranges` the one it lies in.
fn coalesced(ranges: &[Range<u64>]) -> (Vec<Range<u64>>, Vec<usize>) {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| ranges[i].start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    let mut within = vec![0; ranges.len()];
    for i in order {
        let range = &ranges[i];
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range.clone()),
        }
        within[i] = merged.len() - 1;
    }
    (merged, within)
}

/// The byte ranges Parquet's reader asks for to decode the rows `selection` picks from the
/// leaf columns in `mask`: per row group with a selected row, each column's dictionary (if
/// any) and the pages holding selected rows. `None` without an offset index.
pub(crate) fn page_ranges(
    metadata: &ParquetMetaData,
    mask: &ProjectionMask,
    selection: &RowSelection,
) -> Option<Vec<Range<u64>>> {
    let offset_index = metadata.offset_index()?;
    let mut rest = selection.clone();
    let mut ranges = Vec::new();
    for (group_index, group) in metadata.row_groups().iter().enumerate() {
        let selected = rest.split_off(usize::try_from(group.num_rows()).ok()?);
        if !selected.selects_any() {
            continue;
        }
        for (column_index, column) in group.columns().iter().enumerate() {
            if !mask.leaf_included(column_index) {
                continue;
            }
            let pages = offset_index
                .get(group_index)?
                .get(column_index)?
                .page_locations();
            let (start, _) = column.byte_range();
            if let Some(first) = pages.first() {
                let first = u64::try_from(first.offset).ok()?;
                if first != start {
                    ranges.push(start..first);
                }
            }
            ranges.extend(selected.scan_ranges(pages));
        }
    }
    Some(ranges)
}

/// How Parquet follows a selection of rows from the leaf columns `mask` of a file. By
/// default it decodes every row of a stretch whose selected runs are short (under 32 rows
/// on average) and filters after: cheaper than skipping for values of a few bytes. Values of
/// hundreds of bytes cost far more to decode and copy than to skip (a skip reads only their
/// lengths), so a read of wide rows skips run by run: the `late` bench's second step, half
/// of 1M rows of 5 KiB, took 3.8 s with the default and 1.3 s skipping (stop 59).
pub(crate) fn selection_policy(
    metadata: &ParquetMetaData,
    mask: &ProjectionMask,
) -> RowSelectionPolicy {
    let (mut bytes, mut rows) = (0u64, 0u64);
    for group in metadata.row_groups() {
        rows += u64::try_from(group.num_rows()).unwrap_or(0);
        for (leaf, column) in group.columns().iter().enumerate() {
            if mask.leaf_included(leaf) {
                bytes += u64::try_from(column.uncompressed_size()).unwrap_or(0);
            }
        }
    }
    match rows > 0 && bytes >= rows.saturating_mul(SKIP_ROW_BYTES) {
        true => RowSelectionPolicy::Selectors,
        false => RowSelectionPolicy::default(),
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;

    /// The footer of a Parquet file of `rows` rows: a narrow integer and a string of
    /// `width` bytes.
    fn footer_of(rows: usize, width: usize) -> ParquetMetaData {
        use arrow::array::{Int64Array, RecordBatch, StringArray};
        let batch = RecordBatch::try_from_iter([
            (
                "n",
                Arc::new(Int64Array::from_iter_values(0..rows as i64)) as _,
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("{i:0width$}")),
                )) as _,
            ),
        ])
        .unwrap();
        let mut file = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut file, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        ParquetMetaDataReader::new()
            .parse_and_finish(&Bytes::from(file))
            .unwrap()
    }

    #[test]
    fn wide_rows_follow_a_selection_run_by_run() {
        let wide = footer_of(1000, 400);
        let schema = wide.file_metadata().schema_descr();
        let both = ProjectionMask::all();
        let narrow = ProjectionMask::leaves(schema, [0]);
        assert_eq!(
            selection_policy(&wide, &both),
            RowSelectionPolicy::Selectors
        );
        assert_eq!(
            selection_policy(&wide, &narrow),
            RowSelectionPolicy::default()
        );
        let short = footer_of(1000, 20);
        assert_eq!(
            selection_policy(&short, &both),
            RowSelectionPolicy::default()
        );
        assert_eq!(
            selection_policy(&footer_of(0, 400), &both),
            RowSelectionPolicy::default()
        );
    }

    #[test]
    fn ranges_that_touch_or_overlap_are_read_as_one() {
        let ranges = [30..40, 0..10, 10..20, 15..18, 50..60, 60..60];
        let (merged, within) = coalesced(&ranges);
        assert_eq!(merged, vec![0..20, 30..40, 50..60]);
        assert_eq!(within, vec![1, 0, 0, 0, 2, 2]);
        assert_eq!(coalesced(&[]), (vec![], vec![]));
    }

    #[tokio::test]
    async fn each_range_gets_its_own_bytes_from_a_merged_read() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("f");
        let content: Vec<u8> = (0..=255u8).collect();
        store
            .put(&path, PutPayload::from(content.clone()))
            .await
            .unwrap();
        let counted = Arc::new(AtomicU64::new(0));
        let mut reader = ObjectFileReader::new(store, path, 256, Some(counted.clone()));
        let ranges = vec![100..120, 0..10, 10..30, 20..25, 200..256];
        let parts = reader.get_byte_ranges(ranges.clone()).await.unwrap();
        for (range, part) in ranges.iter().zip(&parts) {
            let (start, end) = (range.start as usize, range.end as usize);
            assert_eq!(part.as_ref(), &content[start..end]);
        }
        // The union once: 0..30, 100..120, 200..256.
        assert_eq!(counted.load(Ordering::Relaxed), 30 + 20 + 56);
        // Past the end is the store's error, not a panic.
        let past = reader
            .get_byte_ranges(std::iter::once(250..300).collect())
            .await;
        assert!(past.is_err());
    }
}
