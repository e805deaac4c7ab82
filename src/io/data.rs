//! Data files: Parquet, one per fragment and column group, columns tagged with field ids.
//!
//! Written with a page index and small pages so a take reads a few pages, not a row group,
//! and a filtered scan can skip the pages whose min/max rule its filter out (`io::pages`).
//! Statistics for the manifest come from the writer's own footer (min, max, null count) plus a
//! NaN count for floats counted while the batches pass through.

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions,
};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Float16Type, Float32Type, Float64Type, SchemaRef};
use bytes::Bytes;
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection};
use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use parquet::file::properties::{WriterProperties, WriterVersion};
use roaring::RoaringBitmap;

use super::pages::{file_schema_as_table, selected_ranges, PagePruning};
use super::reader::{page_ranges, ObjectFileReader};
use super::store::unique_name;
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{
    truncate_max_binary, truncate_max_utf8, truncate_min_binary, truncate_min_utf8, ColumnStats,
    DataFile, Fragment, Schema, StatValue, TablePath, PARQUET_FIELD_ID_KEY,
};

/// Rows per Parquet page: small enough that a point read decodes little. A take decodes up to
/// a page per row to skip to it (delta encodings cannot jump), so this is most of its cost:
/// measured against 512, 256 makes a take of 1,000 rows 15–25% faster for 16% more bytes,
/// with natal's scans unchanged.
pub const PAGE_ROWS: usize = 256;
/// Rows per row group, at most; DataFusion's own default. A take pays for every row group it
/// touches (a reader built, column chunks located): on 1M-row fragments a take of 1,000
/// rows was ~20% faster with one row group than with eight of 128Ki rows.
const ROW_GROUP_ROWS: usize = 1024 * 1024;
/// Bytes per row group, at most: a scan holds a row group's projected column chunks in
/// memory, so wide rows must not make them unbounded (Parquet-Java's default is 128 MiB).
const ROW_GROUP_BYTES: usize = 64 * 1024 * 1024;
/// The most bytes a read of selected rows fetches ahead in one request.
const PREFETCH_LIMIT_BYTES: u64 = 16 * 1024 * 1024;
/// Rows per batch a read yields.
pub const READ_BATCH_ROWS: usize = 8 * 1024;

fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        // Version 2 pages with delta encodings (integers bit-packed as deltas, strings as
        // shared prefixes): a third of plain encoding's bytes on the benchmarks' table,
        // and a point read decodes less.
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(Compression::SNAPPY)
        .set_data_page_row_count_limit(PAGE_ROWS)
        // The writer checks the page limit once per write batch: without this, pages hold
        // at least the default batch of 1024 rows.
        .set_write_batch_size(PAGE_ROWS)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .set_statistics_truncate_length(None) // natal truncates, knowing what was cut
        .set_dictionary_enabled(false)
        .build()
}

impl TableStore {
    /// Writes `batches` (in the table's user schema) as one new data file.
    pub async fn write_data_file(
        &self,
        schema: &Schema,
        batches: &[RecordBatch],
    ) -> Result<DataFile> {
        let file_schema = schema.to_arrow_with_field_ids();
        let mut nan_counts = vec![0u64; schema.fields.len()];
        let mut bytes = Vec::new();
        let mut writer =
            ArrowWriter::try_new(&mut bytes, file_schema.clone(), Some(writer_properties()))?;
        let mut rows = 0u64;
        for batch in batches {
            let batch = RecordBatch::try_new(file_schema.clone(), batch.columns().to_vec())
                .map_err(|e| Error::invalid(format!("cannot write batch: {e}")))?;
            for (count, column) in nan_counts.iter_mut().zip(batch.columns()) {
                *count += count_nans(column);
            }
            rows += batch.num_rows() as u64;
            writer.write(&batch)?;
        }
        let metadata = writer.close()?;
        let column_stats = column_stats(schema, &file_schema, &metadata, &nan_counts)?;
        let path = TablePath::parse(&format!("data/{}.parquet", unique_name()))?;
        let file_size_bytes = bytes.len() as u64;
        self.put(&self.path(&path), Bytes::from(bytes)).await?;
        Ok(DataFile {
            path,
            field_ids: schema.field_ids(),
            row_count: rows,
            file_size_bytes,
            column_stats,
        })
    }

    /// Reads the rows of `fragment` at `offsets` (ascending; `None`: every row), projecting
    /// the table fields `field_ids` in that order, into batches of the table's `output`
    /// schema, skipping the rows whose pages `pages` rules out. Yields each batch with the
    /// offsets of its rows.
    pub fn read_fragment(
        &self,
        fragment: &Fragment,
        field_ids: &[u32],
        output: SchemaRef,
        offsets: Option<RoaringBitmap>,
        pages: Option<PagePruning>,
    ) -> BoxStream<'static, Result<(RecordBatch, Vec<u32>)>> {
        // Every row of the fragment is a range, not a list: no per-scan offset vector.
        let selected = match &offsets {
            Some(bitmap) => Selected::Rows(
                bitmap
                    .iter()
                    .filter(|&o| o < fragment.physical_rows)
                    .collect(),
            ),
            None => Selected::All(fragment.physical_rows),
        };
        if field_ids.is_empty() {
            // Nothing to decode: only row counts (and ids computed by the caller) are needed.
            let total = selected.len();
            let chunks: Vec<Vec<u32>> = (0..total)
                .step_by(READ_BATCH_ROWS)
                .filter_map(|start| selected.slice(start, (start + READ_BATCH_ROWS).min(total)))
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
        let field_ids = field_ids.to_vec();
        let stream = async move {
            let selected = match pages {
                Some(pages) => {
                    this.prune_pages(&fragment, &field_ids, &output, &pages, selected)
                        .await?
                }
                None => selected,
            };
            let selection = match &selected {
                Selected::Rows(rows) if rows.is_empty() => {
                    return Ok(stream::empty().boxed());
                }
                Selected::Rows(rows) if !mostly_all(rows.len(), fragment.physical_rows) => {
                    Some(selection_for(rows, fragment.physical_rows))
                }
                // Most rows (a fragment with a few deletions): every row is decoded as a
                // run and the others dropped after; a selection would have Parquet read
                // page by page and stop at each gap.
                Selected::Rows(_) | Selected::All(_) => None,
            };
            let batches = this
                .read_columns(&fragment, &field_ids, output, selection.clone())
                .await?;
            Ok::<_, Error>(match (selection, selected) {
                (None, Selected::Rows(rows)) => keep_selected(batches, rows),
                (_, selected) => attach_offsets(batches, selected),
            })
        };
        stream::once(stream).try_flatten().boxed()
    }

    /// `selected` without the rows whose pages cannot hold a row `pages` wants, judged by
    /// the page index of each file the fragment reads the filter's fields from.
    async fn prune_pages(
        &self,
        fragment: &Fragment,
        field_ids: &[u32],
        output: &SchemaRef,
        pages: &PagePruning,
        mut selected: Selected,
    ) -> Result<Selected> {
        for (file_index, ids) in files_holding(fragment, &pages.field_ids) {
            let file = &fragment.files[file_index];
            let columns: Vec<(u32, &arrow::datatypes::Field)> = ids
                .iter()
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
                    (!field.data_type().is_floating() || nan_free()).then_some((*id, field))
                })
                .collect();
            if columns.is_empty() {
                continue;
            }
            let metadata = self.footer(file, &mut self.file_reader(file), true).await?;
            let schema = file_schema_as_table(metadata.schema(), &columns);
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

    /// The decoded footer of `file` (cached per table handle), with the column index (page
    /// min/max) if `column_index`: it is loaded only for scans that prune pages, as for
    /// long string columns it is most of a footer's bytes and decode time.
    async fn footer(
        &self,
        file: &DataFile,
        reader: &mut ObjectFileReader,
        column_index: bool,
    ) -> Result<ArrowReaderMetadata> {
        if let Some(metadata) = self.footers.get(file.path.as_str()) {
            if !column_index || metadata.metadata().column_index().is_some() {
                return Ok(metadata);
            }
        }
        let column_index_policy = if column_index {
            PageIndexPolicy::Optional
        } else {
            PageIndexPolicy::Skip
        };
        // The offset index lets a row selection skip pages.
        let options = ArrowReaderOptions::new()
            .with_offset_index_policy(PageIndexPolicy::Optional)
            .with_column_index_policy(column_index_policy);
        let metadata = ArrowReaderMetadata::load_async(reader, options)
            .await
            .map_err(|e| read_error(file.path.as_str(), e))?;
        if metadata.metadata().file_metadata().num_rows() as u64 != file.row_count {
            return Err(Error::corrupt(
                file.path.as_str(),
                "row count differs from the manifest",
            ));
        }
        self.footers.insert(file.path.as_str(), metadata.clone());
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

    async fn read_columns(
        &self,
        fragment: &Fragment,
        field_ids: &[u32],
        output: SchemaRef,
        selection: Option<RowSelection>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let per_file = files_holding(fragment, field_ids);
        if let [(file_index, ids)] = per_file.as_slice() {
            if ids.len() == field_ids.len() {
                let file = &fragment.files[*file_index];
                let stream = self.read_file(file, field_ids, selection).await?;
                let field_ids = field_ids.to_vec();
                return Ok(stream
                    .map(move |batch| conform(batch?, &field_ids, &output))
                    .boxed());
            }
        }
        // Several column groups (or missing columns): read each whole, then zip.
        let mut columns: Vec<Option<ArrayRef>> = vec![None; field_ids.len()];
        let mut rows = None;
        for (file_index, ids) in per_file {
            let file = &fragment.files[file_index];
            let batches: Vec<RecordBatch> = self
                .read_file(file, &ids, selection.clone())
                .await?
                .try_collect()
                .await?;
            let Some(first) = batches.first() else {
                continue;
            };
            let batch = concat_batches(&first.schema(), &batches)?;
            rows = Some(batch.num_rows());
            for id in ids {
                if let Some(slot) = field_ids.iter().position(|f| *f == id) {
                    columns[slot] = column_by_field_id(&batch, id);
                }
            }
        }
        let rows = rows.unwrap_or_else(|| {
            selection
                .as_ref()
                .map_or(fragment.physical_rows as usize, |s| s.row_count())
        });
        let arrays = columns
            .into_iter()
            .zip(output.fields())
            .map(|(c, f)| conform_column(c, f.data_type(), rows))
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new_with_options(
            output.clone(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        Ok(stream::iter(vec![Ok(batch)]).boxed())
    }

    /// Streams the columns `field_ids` of one file, in file column order.
    async fn read_file(
        &self,
        file: &DataFile,
        field_ids: &[u32],
        selection: Option<RowSelection>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let mut reader = self.file_reader(file);
        let metadata = self.footer(file, &mut reader, false).await?;
        let mut roots = Vec::new();
        for (index, field) in metadata.schema().fields().iter().enumerate() {
            let id = field
                .metadata()
                .get(PARQUET_FIELD_ID_KEY)
                .and_then(|v| v.parse::<u32>().ok());
            if id.is_some_and(|id| field_ids.contains(&id)) {
                roots.push(index);
            }
        }
        let mask = ProjectionMask::roots(metadata.parquet_schema(), roots);
        if let Some(selection) = &selection {
            // Scattered rows (a take): every page they need in one request, not one request
            // per row group in turn; bounded, so a dense selection still streams.
            let ranges = page_ranges(metadata.metadata(), &mask, selection);
            if let Some(ranges) = ranges
                .filter(|r| r.iter().map(|r| r.end - r.start).sum::<u64>() <= PREFETCH_LIMIT_BYTES)
            {
                reader
                    .prefetch(ranges)
                    .await
                    .map_err(|e| read_error(file.path.as_str(), e))?;
            }
        }
        let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
            .with_projection(mask)
            .with_batch_size(READ_BATCH_ROWS);
        if let Some(selection) = selection {
            builder = builder.with_row_selection(selection);
        }
        let path = file.path.to_string();
        let stream = builder.build().map_err(|e| read_error(&path, e))?;
        Ok(stream.map_err(move |e| read_error(&path, e)).boxed())
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
fn files_holding(fragment: &Fragment, field_ids: &[u32]) -> Vec<(usize, Vec<u32>)> {
    let mut per_file: Vec<(usize, Vec<u32>)> = Vec::new();
    for &id in field_ids {
        if let Some(f) = fragment
            .files
            .iter()
            .rposition(|f| f.field_ids.contains(&id))
        {
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

/// Batches of every row of a fragment, in order, cut down to the rows `rows` (ascending)
/// selects and paired with their offsets.
fn keep_selected(
    batches: BoxStream<'static, Result<RecordBatch>>,
    rows: Vec<u32>,
) -> BoxStream<'static, Result<(RecordBatch, Vec<u32>)>> {
    let mut start = 0u32;
    let mut next = 0usize;
    batches
        .map(move |batch| {
            let batch = batch?;
            let end = u32::try_from(batch.num_rows())
                .ok()
                .and_then(|n| start.checked_add(n))
                .ok_or_else(|| Error::corrupt("data file", "returned more rows than it holds"))?;
            let first = next;
            while next < rows.len() && rows[next] < end {
                next += 1;
            }
            let kept = rows[first..next].to_vec();
            let batch = if kept.len() == batch.num_rows() {
                batch
            } else {
                let mut mask = vec![false; batch.num_rows()];
                for &row in &kept {
                    mask[(row - start) as usize] = true;
                }
                arrow::compute::filter_record_batch(&batch, &BooleanArray::from(mask))?
            };
            start = end;
            Ok((batch, kept))
        })
        .try_filter(|(batch, _)| futures::future::ready(batch.num_rows() > 0))
        .boxed()
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
    /// Offsets `0..n`.
    All(u32),
    Rows(Vec<u32>),
}

impl Selected {
    fn len(&self) -> usize {
        match self {
            Selected::All(n) => *n as usize,
            Selected::Rows(rows) => rows.len(),
        }
    }

    /// The selected rows that lie in `ranges` (ascending, disjoint). A whole fragment stays
    /// whole unless at least a quarter of it is left out: Parquet reads a row selection page
    /// by page rather than by column chunk, and on a scan that skips a few pages that costs
    /// more than it saves (measured: `val > X` over random values, 1.25× the full read).
    fn within(self, ranges: &[std::ops::Range<u32>]) -> Selected {
        let kept = || {
            ranges
                .iter()
                .map(|r| u64::from(r.end - r.start))
                .sum::<u64>()
        };
        match self {
            Selected::All(n) if mostly_all(kept() as usize, n) => Selected::All(n),
            Selected::All(_) => Selected::Rows(ranges.iter().flat_map(|r| r.clone()).collect()),
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

    /// The offsets of selected rows `start..end`, if there are that many.
    fn slice(&self, start: usize, end: usize) -> Option<Vec<u32>> {
        if start > end || end > self.len() {
            return None;
        }
        Some(match self {
            Selected::All(_) => (start as u32..end as u32).collect(),
            Selected::Rows(rows) => rows[start..end].to_vec(),
        })
    }
}

/// Renames file columns to the table's current names, orders them as requested, and casts
/// losslessly widened types.
fn conform(batch: RecordBatch, field_ids: &[u32], output: &SchemaRef) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let columns = field_ids
        .iter()
        .zip(output.fields())
        .map(|(&id, field)| conform_column(column_by_field_id(&batch, id), field.data_type(), rows))
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        output.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

fn column_by_field_id(batch: &RecordBatch, id: u32) -> Option<ArrayRef> {
    let position = batch.schema().fields().iter().position(|f| {
        f.metadata()
            .get(PARQUET_FIELD_ID_KEY)
            .and_then(|v| v.parse::<u32>().ok())
            == Some(id)
    })?;
    Some(batch.column(position).clone())
}

/// A column in the table's type: cast if the file stored a narrower type, nulls if the file
/// predates the column.
fn conform_column(column: Option<ArrayRef>, data_type: &DataType, rows: usize) -> Result<ArrayRef> {
    match column {
        Some(c) if c.data_type() == data_type => Ok(c),
        Some(c) => Ok(cast(&c, data_type)?),
        None => Ok(new_null_array(data_type, rows)),
    }
}

fn count_nans(column: &ArrayRef) -> u64 {
    let count = |values: &mut dyn Iterator<Item = bool>| values.filter(|nan| *nan).count() as u64;
    match column.data_type() {
        DataType::Float16 => count(
            &mut column
                .as_primitive::<Float16Type>()
                .iter()
                .flatten()
                .map(|v| v.is_nan()),
        ),
        DataType::Float32 => count(
            &mut column
                .as_primitive::<Float32Type>()
                .iter()
                .flatten()
                .map(|v| v.is_nan()),
        ),
        DataType::Float64 => count(
            &mut column
                .as_primitive::<Float64Type>()
                .iter()
                .flatten()
                .map(|v| v.is_nan()),
        ),
        _ => 0,
    }
}

/// Statistics of every column, folded over the row groups of the footer.
fn column_stats(
    schema: &Schema,
    file_schema: &SchemaRef,
    metadata: &ParquetMetaData,
    nan_counts: &[u64],
) -> Result<Vec<ColumnStats>> {
    let parquet_schema = metadata.file_metadata().schema_descr();
    let mut out = Vec::with_capacity(schema.fields.len());
    for (field, &nans) in schema.fields.iter().zip(nan_counts) {
        let converter = StatisticsConverter::try_new(&field.name, file_schema, parquet_schema)?;
        let groups = metadata.row_groups();
        let null_count = converter
            .row_group_null_counts(groups.iter())?
            .iter()
            .try_fold(0u64, |acc, n| n.map(|n| acc + n));
        let is_float = matches!(
            field.data_type,
            DataType::Float16 | DataType::Float32 | DataType::Float64
        );
        let mut stats = ColumnStats {
            field_id: field.id,
            null_count,
            nan_count: is_float.then_some(nans),
            ..Default::default()
        };
        let mins = stat_values(&converter.row_group_mins(groups.iter())?);
        let maxes = stat_values(&converter.row_group_maxes(groups.iter())?);
        if let (Some(mins), Some(maxes)) = (mins, maxes) {
            // A row group with no min (all null) does not constrain the bounds.
            let min = mins
                .into_iter()
                .flatten()
                .reduce(|a, b| if lt(&b, &a) { b } else { a });
            let max = maxes
                .into_iter()
                .flatten()
                .reduce(|a, b| if lt(&a, &b) { b } else { a });
            let (min, min_truncated) = truncate_stat_min(min);
            let (max, max_truncated) = truncate_stat_max(max);
            stats.bounds_only = min_truncated || max_truncated;
            stats.min = min;
            stats.max = max;
        }
        out.push(stats);
    }
    Ok(out)
}

fn lt(a: &StatValue, b: &StatValue) -> bool {
    match (a, b) {
        (StatValue::Boolean(a), StatValue::Boolean(b)) => a < b,
        (StatValue::Int(a), StatValue::Int(b)) => a < b,
        (StatValue::UInt(a), StatValue::UInt(b)) => a < b,
        (StatValue::Float(a), StatValue::Float(b)) => a < b,
        (StatValue::Utf8(a), StatValue::Utf8(b)) => a < b,
        (StatValue::Binary(a), StatValue::Binary(b)) => a < b,
        _ => false,
    }
}

fn truncate_stat_min(value: Option<StatValue>) -> (Option<StatValue>, bool) {
    match value {
        Some(StatValue::Utf8(s)) => {
            let (s, t) = truncate_min_utf8(&s);
            (Some(StatValue::Utf8(s)), t)
        }
        Some(StatValue::Binary(b)) => {
            let (b, t) = truncate_min_binary(&b);
            (Some(StatValue::Binary(b)), t)
        }
        other => (other, false),
    }
}

fn truncate_stat_max(value: Option<StatValue>) -> (Option<StatValue>, bool) {
    match value {
        Some(StatValue::Utf8(s)) => match truncate_max_utf8(&s) {
            Some((s, t)) => (Some(StatValue::Utf8(s)), t),
            None => (None, true),
        },
        Some(StatValue::Binary(b)) => match truncate_max_binary(&b) {
            Some((b, t)) => (Some(StatValue::Binary(b)), t),
            None => (None, true),
        },
        other => (other, false),
    }
}

/// Per-row-group values in natal's stat families; `None` for types without statistics.
fn stat_values(array: &ArrayRef) -> Option<Vec<Option<StatValue>>> {
    let family = match array.data_type() {
        DataType::Boolean => DataType::Boolean,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
        DataType::Date32 | DataType::Date64 | DataType::Time32(_) | DataType::Time64(_) => {
            DataType::Int64
        }
        DataType::Timestamp(_, _) | DataType::Duration(_) => DataType::Int64,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            DataType::UInt64
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => DataType::Float64,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        _ => return None,
    };
    let array = cast(array, &family).ok()?;
    let values = (0..array.len()).map(|i| {
        if array.is_null(i) {
            return None;
        }
        Some(match &family {
            DataType::Boolean => StatValue::Boolean(array.as_boolean().value(i)),
            DataType::Int64 => {
                StatValue::Int(array.as_primitive::<arrow::datatypes::Int64Type>().value(i))
            }
            DataType::UInt64 => StatValue::UInt(
                array
                    .as_primitive::<arrow::datatypes::UInt64Type>()
                    .value(i),
            ),
            DataType::Float64 => StatValue::Float(array.as_primitive::<Float64Type>().value(i)),
            DataType::Utf8 => StatValue::Utf8(array.as_string::<i32>().value(i).to_string()),
            _ => StatValue::Binary(array.as_binary::<i32>().value(i).to_vec()),
        })
    });
    Some(values.collect())
}
