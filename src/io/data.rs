//! Reading data files: Parquet, one per fragment and column group, columns tagged with field
//! ids (`data_write` writes them).
//!
//! Pages are small and carry a page index, so a take reads a few pages, not a row group, and
//! a filtered scan can skip the pages whose min/max rule its filter out (`io::pages`). A
//! fragment is read whole or as a range of its rows (a partition's share).

use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch, RecordBatchOptions,
};
use arrow::datatypes::{FieldRef, Schema, SchemaRef};
use futures::stream::{self, BoxStream};
use futures::{FutureExt, StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::PageIndexPolicy;
use roaring::RoaringBitmap;

use super::column_files::zip_files;
use super::conform::{conform, view_type, FileColumns};
use super::pages::{file_schema_as_table, selected_ranges, PagePruning};
use super::panics::{panicked, parquet_read};
use super::reader::{page_ranges, selection_policy, ObjectFileReader, SKIP_ROW_BYTES};
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{blob_descriptor, field_id_of, DataFile, FieldId, Fragment, RowPatch};

/// The most bytes a read of selected rows fetches ahead in one request.
const PREFETCH_LIMIT_BYTES: u64 = 16 * 1024 * 1024;
/// Rows per batch a read yields.
pub const READ_BATCH_ROWS: usize = 8 * 1024;

impl TableStore {
    /// Reads the rows of `fragment` at `offsets` (ascending; `None`: every row) that lie in
    /// `rows` (a partition's share of the fragment; `0..physical_rows` for all of it),
    /// projecting the table's `columns` in that order, into batches of the table's
    /// `output` schema, skipping the rows whose pages `pages` rules out. Yields each batch
    /// with the offsets of its rows.
    pub fn read_fragment(
        &self,
        fragment: &Fragment,
        columns: &FileColumns,
        output: SchemaRef,
        offsets: Option<RoaringBitmap>,
        rows: Range<u32>,
        pages: Option<PagePruning>,
    ) -> BoxStream<'static, Result<(RecordBatch, Vec<u32>)>> {
        let rows = rows.start.min(fragment.physical_rows)..rows.end.min(fragment.physical_rows);
        // Patches of the columns read that hold a row read: their cells' page bounds are the
        // old values'.
        let patches: Vec<RowPatch> = (fragment.patches.iter())
            .filter(|p| p.holds_any(columns.ids()) && p.offsets.range_cardinality(rows.clone()) > 0)
            .filter(|p| (offsets.as_ref()).is_none_or(|o| !o.is_disjoint(&p.offsets)))
            .cloned()
            .collect();
        let pages = pages.filter(|p| !patches.iter().any(|q| q.holds_any(&p.field_ids)));
        let merge = (!patches.is_empty()).then(|| (patches, columns.clone(), output.clone()));
        // A range of rows is a range, not a list: no per-scan offset vector. Most of a
        // range (a fragment with some deletions) is the range minus what is left out, a
        // block-list: walking a dense bitmap row by row was most of a bulk DELETE's time.
        let selected = match offsets {
            Some(bitmap) => {
                let chosen = bitmap.range_cardinality(rows.clone()) as usize;
                // Wide rows are read by selection however many are chosen: Parquet skips
                // their values for less than it decodes them.
                if mostly_all(chosen, rows.end - rows.start) && !wide_rows(fragment, columns) {
                    let mut left_out = RoaringBitmap::new();
                    left_out.insert_range(rows.clone());
                    left_out -= &bitmap;
                    Selected::RangeExcept {
                        range: rows.clone(),
                        left_out,
                    }
                } else {
                    Selected::Rows(bitmap.range(rows.clone()).collect())
                }
            }
            None => Selected::Range(rows.clone()),
        };
        if columns.is_empty() {
            // Nothing to decode: only row counts (and ids computed by the caller) are needed.
            let chunks: Vec<Vec<u32>> = selected
                .into_offsets()
                .chunks(READ_BATCH_ROWS)
                .map(<[u32]>::to_vec)
                .collect();
            return stream::iter(chunks.into_iter().map(move |chunk| {
                let options = RecordBatchOptions::new().with_row_count(Some(chunk.len()));
                let batch = RecordBatch::try_new_with_options(output.clone(), vec![], &options)?;
                Ok((batch, chunk))
            }))
            .boxed();
        }
        let this = self.clone();
        let fragment = fragment.clone();
        let columns = columns.clone();
        let stream = async move {
            let selected = match pages {
                Some(pages) => {
                    this.prune_pages(&fragment, &columns, &output, &pages, selected)
                        .await?
                }
                None => selected,
            };
            let total = fragment.physical_rows;
            let (selection, selected) = match selected {
                Selected::Rows(list) if list.is_empty() => {
                    return Ok(stream::empty().boxed());
                }
                Selected::Rows(list) => (Some(selection_for(&list, total)), Selected::Rows(list)),
                // Most rows of the range: it is decoded as a run and the rest dropped after;
                // a selection would have Parquet read page by page and stop at each gap.
                Selected::RangeExcept { range, left_out } => {
                    let batches = this
                        .read_columns(&fragment, &columns, output, range_selection(&range, total))
                        .await?;
                    return Ok(drop_left_out(batches, range.start, left_out));
                }
                Selected::Range(range) => (range_selection(&range, total), Selected::Range(range)),
            };
            let batches = this
                .read_columns(&fragment, &columns, output, selection)
                .await?;
            Ok::<_, Error>(attach_offsets(batches, selected))
        };
        let read = stream::once(stream).try_flatten().boxed();
        match merge {
            Some((patches, columns, output)) => {
                self.merging_patches(read, patches, columns, output)
            }
            None => read,
        }
    }

    /// `selected` without the rows whose pages cannot hold a row `pages` wants, judged by
    /// the page index of each file the fragment reads the filter's fields from.
    async fn prune_pages(
        &self,
        fragment: &Fragment,
        columns: &FileColumns,
        output: &SchemaRef,
        pages: &PagePruning,
        mut selected: Selected,
    ) -> Result<Selected> {
        let field_ids = columns.ids();
        for (file_index, ids) in files_holding(fragment, &pages.field_ids) {
            let file = &fragment.files[file_index];
            let judged: Vec<(u32, &arrow::datatypes::Field)> = ids
                .iter()
                // A blob column's pages hold descriptors: their bounds say nothing of values.
                .filter(|id| !columns.blob_ids().contains(id))
                .filter_map(|id| {
                    let position = field_ids.iter().position(|f| f == id)?;
                    let field = output.field(position);
                    // Page min/max skip NaN, and the page index does not say whether a
                    // page holds one: a float column is judged only in files without NaN.
                    let nan_free = || {
                        file.column_stats
                            .iter()
                            .any(|c| c.field_id == *id && c.nan_count == Some(0))
                    };
                    // Nor does a column stored as another type: its pages' bounds are
                    // of the bytes it is stored as.
                    let judged = crate::format::stored_as(field.data_type()).is_none()
                        && (!field.data_type().is_floating() || nan_free());
                    judged.then_some((*id, field))
                })
                .collect();
            if judged.is_empty() {
                continue;
            }
            let metadata = self.footer(file, &mut self.file_reader(file), true).await?;
            let schema = file_schema_as_table(metadata.schema(), &judged);
            let Some(selection) = (pages.select)(metadata.metadata(), &schema) else {
                continue;
            };
            if let Some(ranges) = selected_ranges(&selection, fragment.physical_rows) {
                let before = selected.len();
                selected = selected.within(&ranges);
                if let Some(counter) = &pages.rows_pruned {
                    let pruned = before - selected.len();
                    counter.fetch_add(pruned as u64, std::sync::atomic::Ordering::Relaxed);
                }
            }
            if selected.len() == 0 {
                break;
            }
        }
        Ok(selected)
    }

    /// Loads into the cache the footers a read of `field_ids` from `fragment` opens, for
    /// work that can start before it knows which rows it reads.
    pub(crate) async fn load_footers(
        &self,
        fragment: &Fragment,
        field_ids: &[FieldId],
    ) -> Result<()> {
        for (file_index, _) in files_holding(fragment, field_ids) {
            let file = &fragment.files[file_index];
            self.footer(file, &mut self.file_reader(file), false)
                .await?;
        }
        Ok(())
    }

    /// The decoded footer of `file` (cached per table handle), with the column index (page
    /// min/max) if `column_index`: it is loaded only for scans that prune pages, as for
    /// long string columns it is most of a footer's bytes and decode time.
    async fn footer(
        &self,
        file: &DataFile,
        reader: &mut ObjectFileReader,
        column_index: bool,
    ) -> Result<ArrowReaderMetadata> {
        let column_index_policy = if column_index {
            PageIndexPolicy::Optional
        } else {
            PageIndexPolicy::Skip
        };
        // The offset index lets a row selection skip pages.
        let options = ArrowReaderOptions::new()
            .with_offset_index_policy(PageIndexPolicy::Optional)
            .with_column_index_policy(column_index_policy);
        let usable =
            |m: &ArrowReaderMetadata| !column_index || m.metadata().column_index().is_some();
        let path = file.path.as_str();
        let footer = self.cached_footer(&file.path, reader, options, usable);
        let metadata =
            parquet_read(path, footer.map(|f| f.map_err(|e| read_error(path, e)))).await?;
        if metadata.metadata().file_metadata().num_rows() as u64 != file.row_count {
            return Err(Error::corrupt(
                file.path.as_str(),
                "row count differs from the manifest",
            ));
        }
        Ok(metadata)
    }

    fn file_reader(&self, file: &DataFile) -> ObjectFileReader {
        ObjectFileReader::new(
            self.object_store().clone(),
            self.path(&file.path),
            file.file_size_bytes,
            self.bytes_read.clone(),
        )
    }

    pub(super) async fn read_columns(
        &self,
        fragment: &Fragment,
        columns: &FileColumns,
        output: SchemaRef,
        selection: Option<RowSelection>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let field_ids = columns.ids();
        let per_file = files_holding(fragment, field_ids);
        if let [(file_index, ids)] = per_file.as_slice() {
            if ids.len() == field_ids.len() {
                let file = &fragment.files[*file_index];
                let stream = self.read_file(file, field_ids, columns, selection).await?;
                let columns = columns.clone();
                let path = file.path.to_string();
                // A column the file holds in another shape than the table's is damage.
                return Ok(stream
                    .map(move |batch| {
                        let batch = batch?;
                        let rows = batch.num_rows();
                        conform(&[batch], rows, &columns, &output)
                            .map_err(|e| unlike_table(&path, e))
                    })
                    .boxed());
            }
        }
        // Several column files, or columns no file holds (added since): each file streams
        // the rows, zipped batch by batch; a missing column reads as nulls.
        let mut files = Vec::with_capacity(per_file.len());
        for (file_index, ids) in &per_file {
            let file = &fragment.files[*file_index];
            let stream = self
                .read_file(file, ids, columns, selection.clone())
                .await?;
            files.push((file.path.to_string(), stream));
        }
        let columns = columns.clone();
        if files.is_empty() {
            // No file holds any of the columns: rows of nulls, as many as are selected.
            let rows = selection
                .as_ref()
                .map_or(fragment.physical_rows as usize, |s| s.row_count());
            let chunks: Vec<usize> = (0..rows)
                .step_by(READ_BATCH_ROWS)
                .map(|start| READ_BATCH_ROWS.min(rows - start))
                .collect();
            return Ok(stream::iter(chunks)
                .map(move |n| conform(&[], n, &columns, &output))
                .boxed());
        }
        let paths: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
        Ok(zip_files(files)
            .map(move |batches| {
                let batches = batches?;
                let rows = batches.first().map_or(0, RecordBatch::num_rows);
                conform(&batches, rows, &columns, &output)
                    .map_err(|e| unlike_table(&paths.join(", "), e))
            })
            .boxed())
    }

    /// The inline values of the blob column `field_id` at the rows `offsets` (ascending,
    /// distinct) of `file`, in that order: what a read of its lean descriptors
    /// ([`FileColumns::without_inline`]) left for the rows it kept. Only the pages holding
    /// those rows are fetched.
    pub async fn read_inline(
        &self,
        file: &DataFile,
        field_id: FieldId,
        offsets: &[u32],
    ) -> Result<ArrayRef> {
        let path = file.path.as_str();
        let total = u32::try_from(file.row_count)
            .map_err(|_| Error::corrupt(path, "more rows than a data file holds"))?;
        if offsets.last().is_some_and(|&last| last >= total) {
            return Err(Error::corrupt(path, "a row beyond the file's end"));
        }
        let selection = selection_for(offsets, total);
        let field_ids = [field_id];
        let open = self.open_file_stream(file, &field_ids, (&[], &[]), Some(selection));
        let batches: Vec<RecordBatch> = parquet_read(path, open).await?.try_collect().await?;
        let damaged = || Error::corrupt(path, "a blob column's inline values are missing");
        let values = batches
            .iter()
            .map(|b| {
                let descriptors = b.columns().first().and_then(|c| c.as_struct_opt());
                let inline = descriptors.and_then(|d| d.columns().get(blob_descriptor::INLINE));
                inline.cloned().ok_or_else(damaged)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let refs: Vec<&dyn arrow::array::Array> = values.iter().map(|v| v.as_ref()).collect();
        let values = match refs.is_empty() {
            true => return Err(damaged()),
            false => arrow::compute::concat(&refs)?,
        };
        if values.len() != offsets.len() {
            return Err(damaged());
        }
        Ok(values)
    }

    /// Streams the columns `field_ids` (of `columns`) of one file, in file column order, the
    /// blob columns `columns` does not defer resolved to their bytes. A panic of the Parquet reader over a
    /// damaged file (its footer, its page index, its pages) is that file's corruption, not
    /// the query's end.
    async fn read_file(
        &self,
        file: &DataFile,
        field_ids: &[FieldId],
        columns: &FileColumns,
        selection: Option<RowSelection>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let decoded = (columns.lean_ids(), columns.view_ids());
        let open = self.open_file_stream(file, field_ids, decoded, selection);
        let stream = parquet_read(file.path.as_str(), open).await?;
        let blob_ids: Vec<FieldId> = (columns.resolved_blob_ids())
            .iter()
            .copied()
            .filter(|id| field_ids.contains(id))
            .collect();
        if blob_ids.is_empty() {
            return Ok(stream);
        }
        let this = self.clone();
        let file = file.clone();
        Ok(
            stream
                .and_then(move |batch| {
                    let (this, file, blob_ids) = (this.clone(), file.clone(), blob_ids.clone());
                    async move {
                        super::blob::sidecars::resolve_batch(&this, &file, batch, &blob_ids).await
                    }
                })
                .boxed(),
        )
    }

    /// Streams the columns `field_ids` of one file, in file column order, as it holds them
    /// (blob columns as descriptors, those among `lean` without their inline bytes; string
    /// and binary columns among `views` decoded as views).
    async fn open_file_stream(
        &self,
        file: &DataFile,
        field_ids: &[FieldId],
        (lean, views): (&[FieldId], &[FieldId]),
        selection: Option<RowSelection>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let mut reader = self.file_reader(file);
        let metadata = self.footer(file, &mut reader, false).await?;
        let metadata =
            decoding_as_views(metadata, views).map_err(|e| read_error(file.path.as_str(), e))?;
        let mut roots = Vec::new();
        let mut lean_roots = Vec::new();
        for (index, field) in metadata.schema().fields().iter().enumerate() {
            match field_id_of(field) {
                Some(id) if lean.contains(&id) => lean_roots.push(index),
                Some(id) if field_ids.contains(&id) => roots.push(index),
                _ => {}
            }
        }
        let parquet_schema = metadata.parquet_schema();
        let mask = match lean_roots.is_empty() {
            true => ProjectionMask::roots(parquet_schema, roots),
            // Lean blob columns: every leaf of their descriptors but the inline bytes.
            false => ProjectionMask::leaves(
                parquet_schema,
                (0..parquet_schema.num_columns()).filter(|&leaf| {
                    let root = parquet_schema.get_column_root_idx(leaf);
                    roots.contains(&root)
                        || (lean_roots.contains(&root)
                            && !is_inline_leaf(parquet_schema.column(leaf).path().parts()))
                }),
            ),
        };
        if let Some(selection) = &selection {
            // Scattered rows (a take): every page they need in one request, not one request
            // per row group in turn; bounded, so a dense selection still streams.
            let ranges = page_ranges(metadata.metadata(), &mask, selection);
            if let Some(ranges) = ranges.filter(|r| {
                let bytes = r.iter().map(|r| r.end.saturating_sub(r.start));
                bytes.fold(0u64, u64::saturating_add) <= PREFETCH_LIMIT_BYTES
            }) {
                reader
                    .prefetch(ranges)
                    .await
                    .map_err(|e| read_error(file.path.as_str(), e))?;
            }
        }
        // Worked out before the mask moves into the builder.
        let selection = selection.map(|s| (s, selection_policy(metadata.metadata(), &mask)));
        let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
            .with_projection(mask)
            .with_batch_size(READ_BATCH_ROWS);
        if let Some((selection, policy)) = selection {
            builder = builder
                .with_row_selection_policy(policy)
                .with_row_selection(selection);
        }
        let path = file.path.to_string();
        let stream = builder.build().map_err(|e| read_error(&path, e))?;
        // A panic while decoding damaged pages ends the stream as `Corrupt`, not the query.
        let decoded = AssertUnwindSafe(stream).catch_unwind();
        Ok(decoded
            .map(move |batch| match batch {
                Ok(batch) => batch.map_err(|e| read_error(&path, e)),
                Err(panic) => Err(panicked(&path, panic)),
            })
            .boxed())
    }
}

/// `metadata` reading the string and binary columns `views` (by field id) as views: Parquet
/// then leaves each value in the page it decoded, where the table's type copies it out.
fn decoding_as_views(
    metadata: ArrowReaderMetadata,
    views: &[FieldId],
) -> std::result::Result<ArrowReaderMetadata, ParquetError> {
    let view_of = |f: &FieldRef| {
        let viewed = field_id_of(f).is_some_and(|id| views.contains(&id));
        (viewed.then(|| view_type(f.data_type())).flatten()).filter(|v| v != f.data_type())
    };
    let fields = metadata.schema().fields();
    if !fields.iter().any(|f| view_of(f).is_some()) {
        return Ok(metadata);
    }
    let fields: Vec<FieldRef> = (fields.iter())
        .map(|f| match view_of(f) {
            Some(view) => Arc::new(f.as_ref().clone().with_data_type(view)),
            None => f.clone(),
        })
        .collect();
    let schema = Schema::new_with_metadata(fields, metadata.schema().metadata().clone());
    let options = ArrowReaderOptions::new().with_schema(Arc::new(schema));
    ArrowReaderMetadata::try_new(metadata.metadata().clone(), options)
}

/// Whether the leaf at `path` is a blob descriptor's inline bytes (`<column>.inline`).
fn is_inline_leaf(path: &[String]) -> bool {
    let inline = crate::format::descriptor_fields(&arrow::datatypes::DataType::Binary);
    matches!(path, [_, leaf] if leaf == inline[crate::format::blob_descriptor::INLINE].name())
}

/// A data file whose columns cannot be made the table's (a type or nullability the schema
/// does not allow): the file is damaged. Errors of another kind pass as they are.
fn unlike_table(path: &str, error: Error) -> Error {
    match error {
        Error::Arrow(e) => Error::corrupt(path, format!("does not hold the table's columns: {e}")),
        other => other,
    }
}

/// A failed read of a data file: the store's own errors as they are (a timeout is not
/// damage), anything Parquet could not decode as `Corrupt`.
fn read_error(path: &str, error: ParquetError) -> Error {
    match error {
        ParquetError::External(inner) => match inner.downcast::<object_store::Error>() {
            Ok(store) => Error::ObjectStore(*store),
            Err(other) => Error::corrupt(path, other.to_string()),
        },
        other => Error::corrupt(path, other.to_string()),
    }
}

/// A RowSelection choosing the rows `range` of a file of `total` rows; `None` for all of them.
fn range_selection(range: &Range<u32>, total: u32) -> Option<RowSelection> {
    (range.start > 0 || range.end < total).then(|| {
        RowSelection::from_consecutive_ranges(
            std::iter::once(range.start as usize..range.end as usize),
            total as usize,
        )
    })
}

/// A RowSelection choosing exactly the sorted `offsets`.
fn selection_for(offsets: &[u32], total: u32) -> RowSelection {
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < offsets.len() {
        let start = offsets[i] as usize;
        let mut end = start + 1;
        while i + 1 < offsets.len() && offsets[i + 1] as usize == end {
            end += 1;
            i += 1;
        }
        ranges.push(start..end);
        i += 1;
    }
    RowSelection::from_consecutive_ranges(ranges.into_iter(), total as usize)
}

/// Which file each of `field_ids` is read from (the newest file holding it), grouped by file.
fn files_holding(fragment: &Fragment, field_ids: &[FieldId]) -> Vec<(usize, Vec<u32>)> {
    let mut per_file: Vec<(usize, Vec<u32>)> = Vec::new();
    for &id in field_ids {
        if let Some(f) = fragment.file_holding(id) {
            match per_file.iter_mut().find(|(i, _)| *i == f) {
                Some((_, ids)) => ids.push(id),
                None => per_file.push((f, vec![id])),
            }
        }
    }
    per_file
}

/// Whether `selected` of `total` rows is most of them: at least three quarters, the share
/// past which reading a whole fragment beats reading a selection of it (see
/// [`Selected::within`]).
fn mostly_all(selected: usize, total: u32) -> bool {
    selected as u64 * 4 >= u64::from(total) * 3
}

/// Whether the rows of `columns` in `fragment` hold, on average, as many bytes (before
/// compression, by the manifest's column sizes) as Parquet's reader skips more cheaply than
/// it decodes ([`selection_policy`]). An unknown size counts as narrow.
fn wide_rows(fragment: &Fragment, columns: &FileColumns) -> bool {
    let rows = u64::from(fragment.physical_rows.max(1));
    fragment.uncompressed_bytes(columns.ids()) >= rows.saturating_mul(SKIP_ROW_BYTES)
}

/// Batches of every row of a fragment from offset `first` on, in order, without the rows at
/// `left_out`, each paired with the offsets of the rows it keeps.
fn drop_left_out(
    batches: BoxStream<'static, Result<RecordBatch>>,
    first: u32,
    left_out: RoaringBitmap,
) -> BoxStream<'static, Result<(RecordBatch, Vec<u32>)>> {
    let mut start = first;
    batches
        .map(move |batch| {
            let batch = batch?;
            let end = u32::try_from(batch.num_rows())
                .ok()
                .and_then(|n| start.checked_add(n))
                .ok_or_else(|| Error::corrupt("data file", "returned more rows than it holds"))?;
            let gone: Vec<u32> = left_out.range(start..end).collect();
            let kept = range_except(start..end, &gone);
            let batch = if gone.is_empty() {
                batch
            } else {
                let mut keep = BooleanBufferBuilder::new(batch.num_rows());
                keep.append_n(batch.num_rows(), true);
                for &row in &gone {
                    keep.set_bit((row - start) as usize, false);
                }
                arrow::compute::filter_record_batch(
                    &batch,
                    &BooleanArray::new(keep.finish(), None),
                )?
            };
            start = end;
            Ok((batch, kept))
        })
        .try_filter(|(batch, _)| futures::future::ready(batch.num_rows() > 0))
        .boxed()
}

/// The offsets of `range` but those in `gone` (ascending, inside the range).
fn range_except(range: Range<u32>, gone: &[u32]) -> Vec<u32> {
    let mut kept = Vec::with_capacity((range.end - range.start) as usize - gone.len());
    let mut from = range.start;
    for &g in gone {
        kept.extend(from..g);
        from = g + 1;
    }
    kept.extend(from..range.end);
    kept
}

/// Pairs each batch with the offsets of its rows (the selection, consumed in order).
fn attach_offsets(
    batches: BoxStream<'static, Result<RecordBatch>>,
    selected: Selected,
) -> BoxStream<'static, Result<(RecordBatch, Vec<u32>)>> {
    let mut position = 0usize;
    batches
        .map(move |batch| {
            let batch = batch?;
            let end = position + batch.num_rows();
            let offsets = selected
                .slice(position, end)
                .ok_or_else(|| Error::corrupt("data file", "returned more rows than selected"))?;
            position = end;
            Ok((batch, offsets))
        })
        .boxed()
}

/// The rows a fragment read selects, in offset order.
enum Selected {
    /// Offsets `start..end`.
    Range(Range<u32>),
    /// Offsets `start..end` but those in `left_out` (most of the range).
    RangeExcept {
        range: Range<u32>,
        left_out: RoaringBitmap,
    },
    Rows(Vec<u32>),
}

impl Selected {
    fn len(&self) -> usize {
        match self {
            Selected::Range(r) => (r.end - r.start) as usize,
            Selected::RangeExcept { range: r, left_out } => {
                (r.end - r.start) as usize - left_out.len() as usize
            }
            Selected::Rows(rows) => rows.len(),
        }
    }

    /// The selected rows that lie in `ranges` (ascending, disjoint). A range stays whole
    /// unless at least a quarter of it is left out: Parquet reads a row selection page by
    /// page rather than by column chunk, and on a scan that skips a few pages that costs
    /// more than it saves (measured: `val > X` over random values, 1.25× the full read).
    fn within(self, ranges: &[Range<u32>]) -> Selected {
        match self {
            Selected::Range(whole) => {
                let clipped: Vec<Range<u32>> = ranges
                    .iter()
                    .map(|r| r.start.max(whole.start)..r.end.min(whole.end))
                    .filter(|r| r.start < r.end)
                    .collect();
                let kept: u64 = clipped.iter().map(|r| u64::from(r.end - r.start)).sum();
                if mostly_all(kept as usize, whole.end - whole.start) {
                    Selected::Range(whole)
                } else {
                    Selected::Rows(clipped.into_iter().flatten().collect())
                }
            }
            Selected::RangeExcept {
                range: whole,
                left_out,
            } => {
                let mut kept = RoaringBitmap::new();
                for r in ranges {
                    kept.insert_range(r.start.max(whole.start)..r.end.min(whole.end));
                }
                kept -= &left_out;
                if mostly_all(kept.len() as usize, whole.end - whole.start) {
                    let mut left_out = RoaringBitmap::new();
                    left_out.insert_range(whole.clone());
                    left_out -= &kept;
                    Selected::RangeExcept {
                        range: whole,
                        left_out,
                    }
                } else {
                    Selected::Rows(kept.iter().collect())
                }
            }
            Selected::Rows(mut rows) => {
                let mut next = ranges.iter().peekable();
                rows.retain(|&row| {
                    while next.peek().is_some_and(|r| r.end <= row) {
                        next.next();
                    }
                    next.peek().is_some_and(|r| r.contains(&row))
                });
                Selected::Rows(rows)
            }
        }
    }

    /// Every selected offset, in order.
    fn into_offsets(self) -> Vec<u32> {
        match self {
            Selected::Range(r) => r.collect(),
            Selected::RangeExcept { range: r, left_out } => {
                range_except(r, &left_out.iter().collect::<Vec<_>>())
            }
            Selected::Rows(rows) => rows,
        }
    }

    /// The offsets of selected rows `start..end`, if there are that many.
    fn slice(&self, start: usize, end: usize) -> Option<Vec<u32>> {
        if start > end || end > self.len() {
            return None;
        }
        Some(match self {
            Selected::Range(r) => (r.start + start as u32..r.start + end as u32).collect(),
            Selected::RangeExcept { range: r, left_out } => {
                let gone: Vec<u32> = left_out.iter().collect();
                range_except(r.clone(), &gone)[start..end].to_vec()
            }
            Selected::Rows(rows) => rows[start..end].to_vec(),
        })
    }
}
