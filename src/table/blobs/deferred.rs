//! Blob columns a filtered or limited scan fetches only for the rows it keeps: the read
//! carries their descriptors without inline bytes (a few bytes a row, Parquet decoding only
//! the descriptor's small leaves) and each row's address through the filter, and the rows that
//! pass have their bytes fetched: from the sidecars, and, for values kept inline, from the
//! data file's pages that hold those rows. A filter selecting 1% of rows so fetches about 1%
//! of the payload. A blob column the filter itself reads is fetched with the rest, before it.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, StructArray, UInt32Array,
};
use arrow::datatypes::{DataType, Field as ArrowField, Schema as ArrowSchema, SchemaRef};
use arrow::datatypes::{UInt64Type, UInt8Type};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::format::Schema;
use crate::format::{blob_descriptor, descriptor_fields, BlobKind, DataFile, FieldId, Fragment};
use crate::io::{FileColumns, TableStore};
use crate::rowid::RowAddress;
use crate::table::scan_request::ROW_ADDR;

/// The blob columns of a scan's output read as descriptors, and the output they resolve to.
#[derive(Debug)]
pub(in crate::table) struct DeferredBlobs {
    /// Each deferred column: its place in the output, field id, and the type it reads as.
    columns: Vec<(usize, FieldId, DataType)>,
    /// What the read hands over: the output with descriptors in place of bytes, and
    /// `_rowaddr` last if the output does not carry it.
    input: SchemaRef,
    /// Where `_rowaddr` is in `input`.
    addr_at: usize,
    /// The scan's output, bytes in place of descriptors.
    output: SchemaRef,
}

impl DeferredBlobs {
    /// The blob columns of `output` (the scan's, whose user columns come first, then
    /// `_rowid` and `_rowaddr` if asked for) that the filter's columns `probe` do not name,
    /// for a read of `table`; `None` when there are none.
    pub(in crate::table) fn plan(
        table: &Schema,
        output: &SchemaRef,
        probe: &SchemaRef,
    ) -> Option<Self> {
        let columns: Vec<(usize, FieldId, DataType)> = output
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| probe.field_with_name(f.name()).is_err())
            // Read as bytes: a column read as descriptors (or sizes) has none to defer.
            .filter(|(_, f)| matches!(f.data_type(), DataType::Binary | DataType::LargeBinary))
            .filter_map(|(at, f)| {
                let column = table.field_by_name(f.name())?;
                column.blob?;
                Some((at, column.id, f.data_type().clone()))
            })
            .collect();
        if columns.is_empty() {
            return None;
        }
        let mut fields: Vec<ArrowField> = output
            .fields()
            .iter()
            .map(|f| {
                let deferred = table
                    .field_by_name(f.name())
                    .filter(|column| columns.iter().any(|(_, id, _)| *id == column.id));
                match deferred {
                    Some(column) => f.as_ref().clone().with_data_type(column.lean_file_type()),
                    None => f.as_ref().clone(),
                }
            })
            .collect();
        let addr_at = match output.index_of(ROW_ADDR) {
            Ok(at) => at,
            Err(_) => {
                fields.push(ArrowField::new(ROW_ADDR, DataType::UInt64, false));
                fields.len() - 1
            }
        };
        let input = ArrowSchema::new(fields).with_metadata(output.metadata().clone());
        Some(Self {
            columns,
            input: Arc::new(input),
            addr_at,
            output: output.clone(),
        })
    }

    /// What the read must hand over (see [`Self::input`]'s field): its rows' addresses
    /// always, the deferred columns as lean descriptors.
    pub(in crate::table) fn input(&self) -> &SchemaRef {
        &self.input
    }

    /// `read` (of a read's own columns: the output's and a filter's, `_rowaddr` among them)
    /// with the deferred columns typed as lean descriptors.
    pub(in crate::table) fn as_descriptors(&self, read: &SchemaRef) -> SchemaRef {
        let fields: Vec<ArrowField> = read
            .fields()
            .iter()
            .map(|f| match self.input.field_with_name(f.name()) {
                Ok(deferred) if self.is_deferred(f.name()) => deferred.clone(),
                _ => f.as_ref().clone(),
            })
            .collect();
        Arc::new(ArrowSchema::new(fields).with_metadata(read.metadata().clone()))
    }

    fn is_deferred(&self, name: &str) -> bool {
        let named =
            |(at, _, _): &&(usize, FieldId, DataType)| self.output.field(*at).name() == name;
        self.columns.iter().any(|c| named(&c))
    }

    /// `columns` reading the deferred ones as lean descriptors.
    pub(in crate::table) fn defer(&self, columns: FileColumns) -> FileColumns {
        let ids: Vec<FieldId> = self.columns.iter().map(|(_, id, _)| *id).collect();
        columns.deferring(ids.clone()).without_inline(ids)
    }

    /// `rows` (of `fragment`, filtered, as [`Self::input`]) with the bytes of their deferred
    /// columns fetched, as the scan's output.
    pub(in crate::table) fn resolve(
        self: Arc<Self>,
        store: &TableStore,
        fragment: &Fragment,
        rows: BoxStream<'static, Result<RecordBatch>>,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        // A blob column's sidecars are those of the file that holds it; a fragment that
        // predates the column has no file for it, and its descriptors are all null.
        let files: Vec<Option<DataFile>> = self
            .columns
            .iter()
            .map(|(_, id, _)| {
                fragment
                    .file_holding(*id)
                    .map(|f| fragment.files[f].clone())
            })
            .collect();
        let store = store.clone();
        rows.and_then(move |batch| {
            let (this, store, files) = (self.clone(), store.clone(), files.clone());
            async move { this.resolve_batch(&store, &files, batch).await }
        })
        .boxed()
    }

    async fn resolve_batch(
        &self,
        store: &TableStore,
        files: &[Option<DataFile>],
        batch: RecordBatch,
    ) -> Result<RecordBatch> {
        let offsets: Vec<u32> = batch
            .column(self.addr_at)
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| Error::invalid("a deferred read came without its rows' addresses"))?
            .values()
            .iter()
            .map(|&addr| RowAddress::from_u64(addr).offset())
            .collect();
        let mut columns = batch.columns().to_vec();
        for ((at, id, out), file) in self.columns.iter().zip(files) {
            let Some(file) = file else {
                columns[*at] = arrow::array::new_null_array(out, batch.num_rows());
                continue;
            };
            let lean = &columns[*at];
            let whole = with_inline(store, file, *id, lean, &offsets, out).await?;
            columns[*at] = store.resolve_blobs(file, &whole, out).await?;
        }
        columns.truncate(self.output.fields().len());
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            self.output.clone(),
            columns,
            &options,
        )?)
    }
}

/// `lean` (descriptors of the column `field_id` of `file` without inline bytes, at the rows
/// `offsets`) as whole descriptors: the inline values among them read from `file`.
async fn with_inline(
    store: &TableStore,
    file: &DataFile,
    field_id: FieldId,
    lean: &ArrayRef,
    offsets: &[u32],
    data_type: &DataType,
) -> Result<ArrayRef> {
    let corrupt = || {
        Error::corrupt(
            file.path.as_str(),
            "a blob column's descriptors are damaged",
        )
    };
    let lean = lean.as_struct_opt().ok_or_else(corrupt)?;
    let kinds = (lean.columns().get(blob_descriptor::KIND))
        .and_then(|k| k.as_primitive_opt::<UInt8Type>())
        .ok_or_else(corrupt)?;
    let inline_code = BlobKind::Inline.code();
    let is_inline = |row: usize| lean.is_valid(row) && kinds.value(row) == inline_code;
    let mut wanted: Vec<u32> = (0..lean.len())
        .filter(|&row| is_inline(row))
        .map(|row| offsets[row])
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let inline = match wanted.is_empty() {
        true => arrow::array::new_null_array(data_type, lean.len()),
        false => {
            // The file's values come in offset order: each inline row finds its own.
            let fetched = store.read_inline(file, field_id, &wanted).await?;
            let indices: UInt32Array = (0..lean.len())
                .map(|row| {
                    let found = is_inline(row).then(|| wanted.binary_search(&offsets[row]));
                    found.and_then(|at| at.ok()).map(|at| at as u32)
                })
                .collect();
            arrow::compute::take(&fetched, &indices, None)?
        }
    };
    let mut children = lean.columns().to_vec();
    children.push(inline);
    Ok(Arc::new(StructArray::try_new(
        descriptor_fields(data_type),
        children,
        lean.nulls().cloned(),
    )?))
}
