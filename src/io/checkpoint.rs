//! Relocation checkpoints: the relocation view's entries as a plain Parquet file
//! (`id_start: u64, addr_start: u64, len: u32`, sorted by `id_start`), loaded in one GET.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, UInt32Array, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, UInt32Type, UInt64Type};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::panics::parquet_read_now;
use super::store::unique_name;
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{CheckpointRef, TablePath};
use crate::rowid::{FragmentId, RangeEntry, RowAddress, RowId};

fn checkpoint_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id_start", DataType::UInt64, false),
        Field::new("addr_start", DataType::UInt64, false),
        Field::new("len", DataType::UInt32, false),
    ]))
}

impl TableStore {
    /// Writes `entries` (sorted by id) as a checkpoint covering carried fragments up to
    /// `covers_fragments_through`.
    pub async fn write_checkpoint(
        &self,
        version: u64,
        entries: &[RangeEntry],
        covers_fragments_through: FragmentId,
    ) -> Result<CheckpointRef> {
        let batch = RecordBatch::try_new(
            checkpoint_schema(),
            vec![
                Arc::new(UInt64Array::from_iter_values(
                    entries.iter().map(|e| e.id_start.as_u64()),
                )),
                Arc::new(UInt64Array::from_iter_values(
                    entries.iter().map(|e| e.addr_start.as_u64()),
                )),
                Arc::new(UInt32Array::from_iter_values(entries.iter().map(|e| e.len))),
            ],
        )?;
        // Sorted ids and addresses delta-encode well; zstd takes most of the rest.
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_encoding(Encoding::DELTA_BINARY_PACKED)
            .set_dictionary_enabled(false)
            .build();
        let mut writer = ArrowWriter::try_new(Vec::new(), checkpoint_schema(), Some(properties))?;
        writer.write(&batch)?;
        let bytes = writer.into_inner()?;
        let path = TablePath::parse(&format!("_relocations/{version}-{}.parquet", unique_name()))?;
        let file_size_bytes = bytes.len() as u64;
        self.put(&self.path(&path), Bytes::from(bytes)).await?;
        Ok(CheckpointRef {
            path,
            covers_fragments_through,
            entry_count: entries.len() as u64,
            file_size_bytes,
        })
    }

    /// Loads a checkpoint's entries with one GET.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if the file is not a checkpoint, is truncated, or its entries are
    /// unsorted, overlapping or differ in number from the manifest's reference.
    pub async fn read_checkpoint(&self, checkpoint: &CheckpointRef) -> Result<Vec<RangeEntry>> {
        let bytes = self.get(&self.path(&checkpoint.path)).await?;
        let path = checkpoint.path.as_str();
        // A panic of the Parquet reader over a damaged file is that file's corruption.
        parquet_read_now(path, || decode_checkpoint(checkpoint, bytes))
    }
}

/// The entries of a checkpoint file, checked against the manifest's reference to it.
fn decode_checkpoint(checkpoint: &CheckpointRef, bytes: Bytes) -> Result<Vec<RangeEntry>> {
    let path = checkpoint.path.as_str();
    let corrupt = |reason: String| Error::corrupt(path, reason);
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| corrupt(e.to_string()))?
        .build()
        .map_err(|e| corrupt(e.to_string()))?;
    // The manifest's count sizes nothing until the file's rows back it.
    let mut entries = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| corrupt(e.to_string()))?;
        if batch.schema().fields() != checkpoint_schema().fields() {
            return Err(corrupt(
                "not a relocation checkpoint (unexpected columns)".into(),
            ));
        }
        let ids = batch.column(0).as_primitive::<UInt64Type>();
        let addrs = batch.column(1).as_primitive::<UInt64Type>();
        let lens = batch.column(2).as_primitive::<UInt32Type>();
        for i in 0..batch.num_rows() {
            entries.push(RangeEntry {
                id_start: RowId::from_u64(ids.value(i)),
                addr_start: RowAddress::from_u64(addrs.value(i)),
                len: lens.value(i),
            });
        }
    }
    if entries.len() as u64 != checkpoint.entry_count {
        return Err(corrupt(format!(
            "holds {} entries, the manifest says {}",
            entries.len(),
            checkpoint.entry_count
        )));
    }
    for pair in entries.windows(2) {
        let end = pair[0].id_start.as_u64().checked_add(pair[0].len as u64);
        if end.is_none_or(|end| end > pair[1].id_start.as_u64()) {
            return Err(corrupt("entries unsorted or overlapping".into()));
        }
    }
    if entries
        .iter()
        .any(|e| e.len == 0 || e.addr_start.offset().checked_add(e.len - 1).is_none())
    {
        return Err(corrupt("entry with an impossible length".into()));
    }
    Ok(entries)
}
