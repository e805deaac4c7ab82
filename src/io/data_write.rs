//! Writing data files: the layout each column gets (encoding, dictionary, compression, page
//! size, chosen from the data) and the encoding itself, a row group's columns side by side.
//! Statistics for the manifest come from the writer's own footer (`file_stats`).

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BinaryArray, LargeBinaryArray, RecordBatch,
};
use arrow::datatypes::{
    DataType, Float16Type, Float32Type, Float64Type, Int64Type, Schema as ArrowSchema, SchemaRef,
};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowColumnWriter};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use super::blob::reuse::{RepackSidecars, ReusedSidecars};
use super::blob::sidecars::BlobPlacer;
use super::file_stats::column_stats;
use super::store::unique_name;
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{descriptor_type, BlobColumn, DataFile, Schema, TablePath, VECTOR_COMPONENTS};

/// Rows per Parquet page: what a take decodes to reach one row (delta encodings cannot
/// jump) against what a scan pays per page (a header, a decompression, a decoder). Measured
/// (`tpch` and `sql` benches, BENCHMARKS.md): from 256 to 1024 rows the TPC-H queries ran
/// 1.30× → 0.90× DataFusion's Parquet while the SQL take of 1,000 ids went from 6.7 to
/// 10.3 ms (still 20-30× Parquet's); at 4096 the take fell under 20×.
pub const PAGE_ROWS: usize = 1024;
/// Bytes (as encoded, before compression) past which a page is closed before [`PAGE_ROWS`]
/// rows: a read of a few wide rows (a take, the rows a selective filter kept) fetches and
/// decodes the pages holding them, and Parquet's default of 1 MiB put hundreds of rows of
/// 4 KiB in each. Its writer adds values in sub-batches that fit under the limit and closes
/// a page once past it, so pages of wide values hold about 128 KiB. Rows of a few dozen
/// bytes (TPC-H's) fill [`PAGE_ROWS`] first and are not affected.
const PAGE_BYTES: usize = 64 * 1024;
/// Values at least this wide, on average, get no page bounds (Parquet's column index): two
/// bounds of up to 64 bytes for each page of a handful of values, several times the page's
/// entry in the offset index, and random payloads' bounds rule out no page. The file's own
/// bounds (per column chunk) stay.
const WIDE_VALUE_BYTES: usize = 128;
/// Rows per row group, at most; DataFusion's own default. A take pays for every row group it
/// touches (a reader built, column chunks located): on 1M-row fragments a take of 1,000
/// rows was ~20% faster with one row group than with eight of 128Ki rows.
const ROW_GROUP_ROWS: usize = 1024 * 1024;
/// Input bytes per row group, at most: a scan holds a row group's projected column chunks in
/// memory, so wide rows must not make them unbounded. Counted as the rows' size in memory
/// (encoded, they are smaller: Parquet-Java's default of 128 MiB is about this).
const ROW_GROUP_MEMORY_BYTES: usize = 256 * 1024 * 1024;
/// Bytes per page of a blob column's inline values, at most (a value larger than this gets a
/// page of its own): a read of a few rows' values (a take, the rows a filter kept) fetches
/// their pages, and a page of a thousand inline values would have it fetch them all.
const INLINE_PAGE_BYTES: usize = 8 * 1024;
/// Bytes per page of a vector column's components, at most: a search re-ranks its
/// candidates and returns its rows by take, a page a row, and pages of [`PAGE_BYTES`] held
/// 128 vectors of 128 components where the take wanted one.
const VECTOR_PAGE_BYTES: usize = 16 * 1024;
/// How a data file is written, column by column, judged from `sample` (its first rows):
/// - version 2 pages with delta encodings (integers bit-packed as deltas, strings as shared
///   prefixes), except columns whose values repeat ([`few_distinct`]), which get a
///   dictionary (TPC-H's flags, modes, brands, quantities: RLE of small indices);
/// - Snappy, except for strings and binaries without a dictionary (comments, payloads),
///   which get ZSTD(1): on TPC-H lineitem a comment costs 12.4 bytes with Snappy, 8.7 with
///   DataFusion's ZSTD(3), and the file as a whole is then no larger than DataFusion's;
/// - pages of [`PAGE_ROWS`] rows or [`PAGE_BYTES`]; a blob column's inline values in pages
///   of about [`INLINE_PAGE_BYTES`];
/// - no page bounds for columns of wide values ([`WIDE_VALUE_BYTES`]);
/// - a vector's components plain and uncompressed, in pages of [`VECTOR_PAGE_BYTES`]:
///   float bytes neither share prefixes nor compress (1M vectors of 128 floats, 512 MB,
///   made a 513.6 MB file with delta encoding and Snappy), and a plain page lets a read of
///   a few rows skip to them undecoded.
fn writer_properties(schema: &SchemaRef, sample: Option<&RecordBatch>) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(Compression::SNAPPY)
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_data_page_size_limit(PAGE_BYTES)
        // The writer checks the page limit once per write batch: without this, pages hold
        // at least the default batch of 1024 rows.
        .set_write_batch_size(PAGE_ROWS)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_truncate_length(None) // natal truncates, knowing what was cut
        .set_dictionary_enabled(false);
    for field in schema.fields() {
        if let DataType::Struct(children) = field.data_type() {
            if children.iter().any(|c| {
                c.name() == VECTOR_COMPONENTS
                    && matches!(c.data_type(), DataType::FixedSizeBinary(_))
            }) {
                let path = ColumnPath::new(vec![field.name().clone(), VECTOR_COMPONENTS.into()]);
                builder = builder
                    .set_column_encoding(path.clone(), Encoding::PLAIN)
                    .set_column_compression(path.clone(), Compression::UNCOMPRESSED)
                    .set_column_data_page_size_limit(path.clone(), VECTOR_PAGE_BYTES)
                    .set_column_statistics_enabled(path, EnabledStatistics::Chunk);
            }
            let inline = children.get(crate::format::blob_descriptor::INLINE);
            if let Some(inline) =
                inline.filter(|i| *field.data_type() == descriptor_type(i.data_type()))
            {
                let path = ColumnPath::new(vec![field.name().clone(), inline.name().clone()]);
                // No bounds: nothing prunes by them, and untruncated they would put two
                // values of up to the inline limit in the footer of each row group.
                builder = builder
                    .set_column_data_page_size_limit(path.clone(), INLINE_PAGE_BYTES)
                    .set_column_statistics_enabled(path, EnabledStatistics::None);
            }
        }
    }
    let Some(sample) = sample else {
        return builder.build();
    };
    for (field, column) in schema.fields().iter().zip(sample.columns()) {
        let path = ColumnPath::from(field.name().as_str());
        if few_distinct(column) {
            builder = builder.set_column_dictionary_enabled(path, true);
        } else if matches!(
            field.data_type(),
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
        ) {
            if wide_values(column) {
                builder =
                    builder.set_column_statistics_enabled(path.clone(), EnabledStatistics::Chunk);
            }
            builder = builder.set_column_compression(path, Compression::ZSTD(ZstdLevel::default()));
        }
    }
    builder.build()
}

/// Whether a string or binary column's values average at least [`WIDE_VALUE_BYTES`] over
/// its first [`CARDINALITY_SAMPLE_ROWS`].
fn wide_values(column: &ArrayRef) -> bool {
    let sample = column.slice(0, column.len().min(CARDINALITY_SAMPLE_ROWS));
    // Bytes per value (arrow's `length` of a string counts bytes), summed as i64 whatever
    // the offsets' width.
    let lengths = arrow::compute::kernels::length::length(&sample)
        .and_then(|l| arrow::compute::cast(&l, &DataType::Int64));
    let Ok(lengths) = lengths else {
        return false;
    };
    let bytes = arrow::compute::sum(lengths.as_primitive::<Int64Type>()).unwrap_or(0);
    let values = sample.len() - sample.null_count();
    values > 0 && bytes >= (values * WIDE_VALUE_BYTES) as i64
}

/// Rows looked at to judge a column's cardinality.
const CARDINALITY_SAMPLE_ROWS: usize = 4096;

/// Whether a column's values repeat enough for a dictionary to pay: at most one distinct
/// value in eight among its first [`CARDINALITY_SAMPLE_ROWS`] rows. A dictionary of a
/// column of mostly distinct values grows to its size limit and is then abandoned, and a
/// take would fetch it whole; such columns keep their delta encodings. Nested columns keep
/// theirs too.
fn few_distinct(column: &ArrayRef) -> bool {
    if column.data_type().is_nested() {
        return false;
    }
    let sample = column.slice(0, column.len().min(CARDINALITY_SAMPLE_ROWS));
    if sample.len() < 64 {
        return false;
    }
    let Ok(converter) =
        arrow::row::RowConverter::new(vec![arrow::row::SortField::new(sample.data_type().clone())])
    else {
        return false;
    };
    let Ok(rows) = converter.convert_columns(std::slice::from_ref(&sample)) else {
        return false;
    };
    let mut distinct = std::collections::HashSet::new();
    for row in rows.iter() {
        distinct.insert(row);
        if distinct.len() * 8 > sample.len() {
            return false;
        }
    }
    true
}

/// Refuses a schema holding a column natal cannot store, naming the column and its type:
/// each column is written (one null row) by natal's writer and read back, so a type Parquet
/// cannot hold (an interval of months, days and nanoseconds, a union) fails at CREATE rather
/// than at every insert.
pub(crate) async fn check_storable(schema: &ArrowSchema) -> Result<()> {
    for field in schema.fields() {
        // A type Parquet cannot hold is stored as another, which is what must encode.
        let stored = crate::format::stored_as(field.data_type());
        let stored = stored.as_ref().unwrap_or(field.data_type());
        let probe = Arc::new(ArrowSchema::new(vec![field
            .as_ref()
            .clone()
            .with_data_type(stored.clone())
            .with_nullable(true)]));
        // Arrow's Parquet writer panics on some types it does not implement (a union):
        // that is this column's type refused, not the statement's end.
        let stored = async {
            let column = new_null_array(stored, 1);
            let batch = RecordBatch::try_new(probe.clone(), vec![column])?;
            let (bytes, _) = encode(probe.clone(), vec![batch]).await?;
            let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes))?.build()?;
            for batch in reader {
                batch?;
            }
            Ok::<_, Error>(())
        };
        let stored = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(stored))
            .await
            .unwrap_or_else(|panic| {
                Err(Error::invalid(super::panics::panic_message(panic.as_ref())))
            });
        stored.map_err(|e| {
            Error::invalid(format!(
                "column {} has type {}, which natal cannot store: {e}",
                field.name(),
                field.data_type()
            ))
        })?;
    }
    Ok(())
}

impl TableStore {
    /// Writes `batches` (in the table's user schema) as one new data file; on an error,
    /// nothing it wrote is left.
    pub async fn write_data_file(
        &self,
        schema: &Schema,
        batches: &[RecordBatch],
    ) -> Result<DataFile> {
        let mut file = DataFileWriter::new(self, schema)?;
        for batch in batches {
            if let Err(e) = file.push(batch).await {
                file.abandon().await;
                return Err(e);
            }
        }
        file.finish().await
    }
}

/// One data file being written, its rows pushed batch by batch. Each batch is staged as it
/// comes: columns of a type Parquet cannot hold turned into the type they are stored as
/// (`format::stored_as`), blob columns into descriptors, their bytes placed at once (a
/// dedicated sidecar written, a value appended to its column's pack, a full pack written).
/// So a write of many large values holds about one pack per blob column and the batch at
/// hand, not the payload; the data file is encoded when it is finished.
pub(crate) struct DataFileWriter<'a> {
    store: &'a TableStore,
    schema: &'a Schema,
    path: TablePath,
    file_schema: SchemaRef,
    user_schema: SchemaRef,
    staged_schema: SchemaRef,
    /// Columns stored as another type.
    stored_apart: Vec<usize>,
    blobs: Vec<(usize, BlobColumn)>,
    placer: BlobPlacer<'a>,
    /// Sidecars of other files its rows' values stay in (rows pushed described).
    reused: ReusedSidecars,
    nan_counts: Vec<u64>,
    staged: Vec<RecordBatch>,
    rows: u64,
}

impl<'a> DataFileWriter<'a> {
    /// A new data file of the table's `schema`, its name chosen now: blob sidecars live
    /// under the data file's stem.
    pub(crate) fn new(store: &'a TableStore, schema: &'a Schema) -> Result<Self> {
        // The file's schema tags every field with its id; the batches keep the user's
        // types (nested fields untagged), which the encoder takes as the same.
        let file_schema = schema.to_arrow_with_field_ids();
        let user_schema = schema.to_arrow();
        let path = TablePath::parse(&format!("data/{}.parquet", unique_name()))?;
        let stored_apart: Vec<usize> = (schema.fields.iter().enumerate())
            .filter(|(_, f)| crate::format::stored_as(&f.data_type).is_some())
            .map(|(i, _)| i)
            .collect();
        let blobs: Vec<(usize, BlobColumn)> = schema
            .fields
            .iter()
            .enumerate()
            .filter_map(|(index, field)| field.blob.map(|blob| (index, blob)))
            .collect();
        let restaged = stored_apart
            .iter()
            .copied()
            .chain(blobs.iter().map(|(i, _)| *i));
        let staged_schema = staged_schema(&user_schema, &file_schema, restaged);
        Ok(Self {
            store,
            schema,
            placer: BlobPlacer::new(store, path.clone()),
            reused: ReusedSidecars::default(),
            path,
            file_schema,
            user_schema,
            staged_schema,
            stored_apart,
            blobs,
            nan_counts: vec![0u64; schema.fields.len()],
            staged: Vec::new(),
            rows: 0,
        })
    }

    /// Stages `batch` (in the table's user schema): checked, its blob values placed.
    pub(crate) async fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        let columns = batch
            .columns()
            .iter()
            .zip(self.user_schema.fields())
            .map(|(column, field)| super::conform::relabelled(column, field.data_type()))
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new(self.user_schema.clone(), columns)
            .map_err(|e| Error::invalid(format!("cannot write batch: {e}")))?;
        for (field, column) in self.schema.fields.iter().zip(batch.columns()) {
            if field.blob.is_none() && super::blob::reference::holds_reference(column) {
                return Err(Error::invalid(format!(
                    "column {} is not a blob column: an external blob reference \
                     (natal_external_blob) can only be stored in one (declare it BLOB)",
                    field.name
                )));
            }
        }
        let mut columns = batch.columns().to_vec();
        self.restage_stored(&mut columns)?;
        for (index, blob) in &self.blobs {
            columns[*index] = (self.placer)
                .place(*index, blob, &columns[*index], &mut self.reused)
                .await?;
        }
        self.stage(batch.num_rows(), columns)
    }

    /// Counts `columns`' NaNs (for the file's statistics) and turns the columns stored as
    /// another type into it: what every batch staged goes through.
    fn restage_stored(&mut self, columns: &mut [ArrayRef]) -> Result<()> {
        for (count, column) in self.nan_counts.iter_mut().zip(columns.iter()) {
            *count += count_nans(column);
        }
        for &i in &self.stored_apart {
            columns[i] = super::stored_type::to_stored(&columns[i])?;
        }
        Ok(())
    }

    /// Keeps `columns` (`rows` rows, as the file holds them) for the file.
    fn stage(&mut self, rows: usize, columns: Vec<ArrayRef>) -> Result<()> {
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
        let staged =
            RecordBatch::try_new_with_options(self.staged_schema.clone(), columns, &options)?;
        self.rows += rows as u64;
        self.staged.push(staged);
        Ok(())
    }

    /// Stages `batch`: the table's columns, but its blob columns as the descriptors (inline
    /// bytes and all) of the data files `sources` (one per blob column, in column order;
    /// `None` where the rows' fragment predates the column) hold them. Their sidecar values
    /// are not copied: the file's reuse index maps them to the sidecars they are in.
    pub(crate) async fn push_described(
        &mut self,
        batch: &RecordBatch,
        sources: &[Option<DataFile>],
        repack: &RepackSidecars,
    ) -> Result<()> {
        if sources.len() != self.blobs.len() {
            return Err(Error::internal(
                "described rows without a source per blob column",
            ));
        }
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (at, (column, field)) in batch
            .columns()
            .iter()
            .zip(self.user_schema.fields())
            .enumerate()
        {
            let blob = self.blobs.iter().position(|(index, _)| *index == at);
            columns.push(match blob {
                Some(_) => column.clone(),
                None => super::conform::relabelled(column, field.data_type())?,
            });
        }
        self.restage_stored(&mut columns)?;
        let blob_columns: Vec<usize> = self.blobs.iter().map(|(index, _)| *index).collect();
        for (index, source) in blob_columns.into_iter().zip(sources) {
            let Some(source) = source else {
                let file_type = self.staged_schema.field(index).data_type();
                columns[index] = new_null_array(file_type, batch.num_rows());
                continue;
            };
            let placer = &mut self.placer;
            let (remapped, copied) =
                (self.reused).remap(&columns[index], source, repack, || placer.take_id())?;
            columns[index] = match copied.is_empty() {
                true => remapped,
                false => self.copy_values(index, &remapped, source, copied).await?,
            };
        }
        self.stage(batch.num_rows(), columns)
    }

    /// `descriptors` (of the blob column at `index`) with the values `copied` (in sidecars
    /// being repacked, named by `source`) fetched and placed in this file's own sidecars.
    async fn copy_values(
        &mut self,
        index: usize,
        descriptors: &ArrayRef,
        source: &DataFile,
        copied: Vec<super::blob::reuse::Copied>,
    ) -> Result<ArrayRef> {
        let Some((_, blob)) = self.blobs.iter().find(|(at, _)| *at == index).cloned() else {
            return Err(Error::internal("a repacked column is not a blob column"));
        };
        let wanted = copied
            .iter()
            .map(|(_, sidecar, range)| (sidecar.clone(), range.clone()));
        let bytes =
            super::blob::sidecars::fetch_ranges(self.store, &source.path, wanted.collect()).await?;
        let values: ArrayRef = match self.user_schema.field(index).data_type() {
            DataType::LargeBinary => Arc::new(LargeBinaryArray::from_iter_values(bytes.iter())),
            _ => Arc::new(BinaryArray::from_iter_values(bytes.iter())),
        };
        let placed = (self.placer)
            .place(index, &blob, &values, &mut self.reused)
            .await?;
        // Each row from the remapped descriptors, or, if copied, from the placed ones.
        let mut from: Vec<(usize, usize)> = (0..descriptors.len()).map(|row| (0, row)).collect();
        for (at, (row, _, _)) in copied.iter().enumerate() {
            from[*row] = (1, at);
        }
        Ok(arrow::compute::interleave(
            &[descriptors.as_ref(), placed.as_ref()],
            &from,
        )?)
    }

    /// Rows pushed so far.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the last packs, then the data file; on an error, deletes what it wrote.
    pub(crate) async fn finish(mut self) -> Result<DataFile> {
        match self.write().await {
            Ok(file) => Ok(file),
            Err(e) => {
                self.abandon().await;
                Err(e)
            }
        }
    }

    async fn write(&mut self) -> Result<DataFile> {
        // Sidecars first: a data file never names one that is not there.
        self.placer.finish().await?;
        let staged = std::mem::take(&mut self.staged);
        let (bytes, metadata) = encode(self.file_schema.clone(), staged).await?;
        let column_stats =
            column_stats(self.schema, &self.file_schema, &metadata, &self.nan_counts)?;
        let file_size_bytes = bytes.len() as u64;
        self.store
            .put(&self.store.path(&self.path), Bytes::from(bytes))
            .await?;
        Ok(DataFile {
            path: self.path.clone(),
            field_ids: self.schema.field_ids(),
            row_count: self.rows,
            file_size_bytes,
            column_stats,
            blob_reuse_index: self.reused.index()?,
        })
    }

    /// Deletes the sidecars written for this file (best effort: one left behind is an
    /// orphan that cleanup removes), for a write that will not finish it.
    pub(crate) async fn abandon(self) {
        if !self.placer.placed_any() {
            return;
        }
        self.store.delete_unpublished(self.schema, &self.path).await;
    }
}

impl TableStore {
    /// Deletes the data file at `path` (of `schema`), written by a write that will not
    /// commit it, with its blob sidecars if `schema` has blob columns. Best effort: a file
    /// left behind (the store failed again) is an orphan that cleanup removes.
    pub(crate) async fn delete_unpublished(&self, schema: &Schema, path: &TablePath) {
        use futures::TryStreamExt;
        use object_store::ObjectStoreExt;
        if schema.has_blob_columns() {
            // Its blob sidecars first (written before it), under the file's stem.
            let stem = self.path(&TablePath::sidecar_dir(path));
            let sidecars: Vec<_> = (self.object_store().list(Some(&stem)))
                .try_collect()
                .await
                .unwrap_or_default();
            for sidecar in sidecars {
                let _ = self.object_store().delete(&sidecar.location).await;
            }
        }
        let _ = self.object_store().delete(&self.path(path)).await;
    }
}

/// The schema batches are encoded in: the user's, with the `restaged` columns (blob
/// descriptors, types stored apart) typed as the file holds them.
fn staged_schema(
    user_schema: &SchemaRef,
    file_schema: &SchemaRef,
    restaged: impl Iterator<Item = usize>,
) -> SchemaRef {
    let mut fields: Vec<_> = user_schema.fields().iter().cloned().collect();
    let mut changed = false;
    for index in restaged {
        fields[index] = file_schema.fields()[index].clone();
        changed = true;
    }
    match changed {
        true => Arc::new(ArrowSchema::new(fields)),
        false => user_schema.clone(),
    }
}

/// Encodes `batches` as one Parquet file: row groups of at most [`ROW_GROUP_ROWS`] rows and
/// [`ROW_GROUP_MEMORY_BYTES`] of input, each row group's columns encoded side by side on the
/// blocking pool (as DataFusion's writer does), one task per core with the columns shared
/// out by size. Returns the file's bytes and its footer.
async fn encode(
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<(Vec<u8>, ParquetMetaData)> {
    let mut bytes = Vec::new();
    let properties = writer_properties(&schema, batches.first());
    let writer = ArrowWriter::try_new(&mut bytes, schema.clone(), Some(properties))?;
    let (mut file, factory) = writer.into_serialized_writer()?;
    let tasks = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (index, group) in row_groups(batches).into_iter().enumerate() {
        let mut writers = factory.create_column_writers(index)?.into_iter();
        // Each field's leaf writers (several for nested types), with its column's slices.
        let mut columns: Vec<ColumnJob> = Vec::with_capacity(schema.fields().len());
        for (i, field) in schema.fields().iter().enumerate() {
            let arrays: Vec<ArrayRef> = group.iter().map(|b| b.column(i).clone()).collect();
            let leaves = match arrays.first() {
                Some(array) => compute_leaves(field, &array.slice(0, 0))?.len(),
                None => 0,
            };
            let bytes = arrays
                .iter()
                .map(|a| a.to_data().get_slice_memory_size().unwrap_or(0))
                .sum();
            columns.push(ColumnJob {
                order: i,
                field: field.clone(),
                arrays,
                writers: writers.by_ref().take(leaves).collect(),
                bytes,
            });
        }
        let mut encoded: Vec<(usize, Vec<ArrowColumnChunk>)> = Vec::new();
        let handles: Vec<_> = share_out(columns, tasks)
            .into_iter()
            .map(|jobs| tokio::task::spawn_blocking(move || encode_columns(jobs)))
            .collect();
        for handle in handles {
            let done = handle.await.map_err(|e| Error::External(Box::new(e)))??;
            encoded.extend(done);
        }
        encoded.sort_by_key(|(order, _)| *order);
        let mut row_group = file.next_row_group()?;
        for chunk in encoded.into_iter().flat_map(|(_, chunks)| chunks) {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
    }
    let metadata = file.finish()?;
    drop(file);
    Ok((bytes, metadata))
}

/// One column of a row group to encode: its leaf writers and its input slices.
struct ColumnJob {
    order: usize,
    field: arrow::datatypes::FieldRef,
    arrays: Vec<ArrayRef>,
    writers: Vec<ArrowColumnWriter>,
    bytes: usize,
}

fn encode_columns(jobs: Vec<ColumnJob>) -> Result<Vec<(usize, Vec<ArrowColumnChunk>)>> {
    jobs.into_iter()
        .map(|mut job| {
            for array in &job.arrays {
                for (writer, leaf) in job
                    .writers
                    .iter_mut()
                    .zip(compute_leaves(&job.field, array)?)
                {
                    writer.write(&leaf)?;
                }
            }
            let chunks = job
                .writers
                .into_iter()
                .map(ArrowColumnWriter::close)
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok((job.order, chunks))
        })
        .collect()
}

/// `jobs` in `tasks` groups of about equal input bytes (largest first, each to the lightest
/// group so far).
fn share_out(mut jobs: Vec<ColumnJob>, tasks: usize) -> Vec<Vec<ColumnJob>> {
    jobs.sort_by_key(|j| std::cmp::Reverse(j.bytes));
    let mut groups: Vec<(usize, Vec<ColumnJob>)> =
        (0..tasks.max(1)).map(|_| (0, Vec::new())).collect();
    for job in jobs {
        if let Some(lightest) = groups.iter_mut().min_by_key(|(bytes, _)| *bytes) {
            lightest.0 += job.bytes;
            lightest.1.push(job);
        }
    }
    groups
        .into_iter()
        .map(|(_, jobs)| jobs)
        .filter(|jobs| !jobs.is_empty())
        .collect()
}

/// `batches` cut into row groups of at most [`ROW_GROUP_ROWS`] rows and
/// [`ROW_GROUP_MEMORY_BYTES`] of input (none for no rows).
fn row_groups(batches: Vec<RecordBatch>) -> Vec<Vec<RecordBatch>> {
    let mut groups = Vec::new();
    let mut current: Vec<RecordBatch> = Vec::new();
    let (mut rows, mut bytes) = (0usize, 0usize);
    for batch in batches {
        let mut rest = batch;
        while rest.num_rows() > 0 {
            let row_bytes = slice_bytes(&rest) / rest.num_rows().max(1);
            let room_rows = ROW_GROUP_ROWS - rows;
            let room_bytes =
                (ROW_GROUP_MEMORY_BYTES.saturating_sub(bytes) / row_bytes.max(1)).max(1);
            let take = rest.num_rows().min(room_rows).min(room_bytes);
            let head = rest.slice(0, take);
            bytes += slice_bytes(&head);
            rows += take;
            current.push(head);
            rest = rest.slice(take, rest.num_rows() - take);
            if rows >= ROW_GROUP_ROWS || bytes >= ROW_GROUP_MEMORY_BYTES {
                groups.push(std::mem::take(&mut current));
                (rows, bytes) = (0, 0);
            }
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

/// The bytes of memory the rows of `batch` occupy (its slice of shared buffers only).
fn slice_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
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
