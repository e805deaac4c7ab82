//! Blob columns' bytes (seed 003). Writing a data file places each value of a blob column by
//! its size — inline in its descriptor, appended to the column's current packed sidecar, or
//! in a dedicated sidecar of its own — and the sidecars are written before the data file, so
//! no committed file names a sidecar that is not there. Reading the column resolves the
//! descriptors back to bytes: one request per sidecar for all the ranges a batch needs (the
//! store coalesces neighbours), nothing for a read that does not select the column.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, GenericBinaryArray, GenericBinaryBuilder, OffsetSizeTrait,
    RecordBatch, RecordBatchOptions, StringArray, StringBuilder, StructArray, UInt32Array,
    UInt64Array, UInt8Array,
};
use arrow::datatypes::{
    DataType, Field as ArrowField, FieldRef, Schema as ArrowSchema, UInt32Type, UInt64Type,
    UInt8Type,
};
use bytes::Bytes;
use object_store::ObjectStoreExt;

use super::external::{external_reference, read_external};
use super::reference::{stored_reference, BlobReferences, StoredValue};
use super::reuse::ReusedSidecars;
use crate::error::{Error, Result};
use crate::format::{
    blob_descriptor, descriptor_fields, field_id_of, sidecar_path, BlobColumn, BlobKind, DataFile,
    FieldId, TablePath,
};
use crate::io::fetch_grouped::fetch_grouped;
use crate::io::TableStore;

/// The most bytes a packed sidecar reserves when it opens (a larger pack grows past it).
const MAX_PACK_RESERVED: u64 = 256 * 1024 * 1024;

/// An Arrow buffer's bytes as [`Bytes`], shared, not copied.
struct ArrowBytes(arrow::buffer::Buffer);

impl AsRef<[u8]> for ArrowBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

/// Places the blob values of one data file being written. Sidecar ids are the file's own,
/// counted from 0 across its columns.
pub(in crate::io) struct BlobPlacer<'a> {
    store: &'a TableStore,
    data_file: TablePath,
    next_id: u32,
    /// Per column of the file: the packed sidecar taking values, if one is open.
    packs: HashMap<usize, Pack>,
    /// Payload bytes written to sidecars.
    pub sidecar_bytes: u64,
    /// The table's uuid, asked of the store once, at the first stored reference.
    table_uuid: Option<String>,
}

/// A packed sidecar being filled.
struct Pack {
    id: u32,
    bytes: Vec<u8>,
}

impl<'a> BlobPlacer<'a> {
    pub(in crate::io) fn new(store: &'a TableStore, data_file: TablePath) -> Self {
        Self {
            store,
            data_file,
            next_id: 0,
            packs: HashMap::new(),
            sidecar_bytes: 0,
            table_uuid: None,
        }
    }

    /// The descriptors of `values` (Binary or LargeBinary), the column `column` of the file,
    /// placed as `blob` says; dedicated sidecars and full packs are written as they are made.
    /// A stored value's reference (`blob_reference`) is not placed: its descriptor names
    /// the sidecar it is in, by a local id `reused` maps to it.
    pub(in crate::io) async fn place(
        &mut self,
        column: usize,
        blob: &BlobColumn,
        values: &ArrayRef,
        reused: &mut ReusedSidecars,
    ) -> Result<ArrayRef> {
        match values.data_type() {
            DataType::Binary => {
                self.place_values(column, blob, values.as_binary::<i32>(), reused)
                    .await
            }
            DataType::LargeBinary => {
                self.place_values(column, blob, values.as_binary::<i64>(), reused)
                    .await
            }
            other => Err(Error::invalid(format!(
                "a blob column holds Binary or LargeBinary values, not {other}"
            ))),
        }
    }

    async fn place_values<O: OffsetSizeTrait>(
        &mut self,
        column: usize,
        blob: &BlobColumn,
        values: &GenericBinaryArray<O>,
        reused: &mut ReusedSidecars,
    ) -> Result<ArrayRef> {
        let rows = values.len();
        let mut kinds = Vec::with_capacity(rows);
        let mut positions = Vec::with_capacity(rows);
        let mut sizes = Vec::with_capacity(rows);
        let mut ids = Vec::with_capacity(rows);
        let mut uris = StringBuilder::new();
        let mut inline = GenericBinaryBuilder::<O>::new();
        for row in 0..rows {
            if values.is_null(row) {
                kinds.push(BlobKind::Inline.code());
                positions.push(0);
                sizes.push(0);
                ids.push(0);
                uris.append_value("");
                inline.append_null();
                continue;
            }
            let value = values.value(row);
            if let Some(stored) = stored_reference(value) {
                let id = self.reuse(&stored, reused)?;
                kinds.push(stored.kind.code());
                positions.push(stored.position);
                sizes.push(stored.size);
                ids.push(id);
                uris.append_value("");
                inline.append_null();
                continue;
            }
            if let Some((uri, position, size)) = external_reference(value) {
                kinds.push(BlobKind::External.code());
                positions.push(position);
                sizes.push(size);
                ids.push(0);
                uris.append_value(uri);
                inline.append_null();
                continue;
            }
            uris.append_value("");
            let size = value.len() as u64;
            let kind = blob.kind_for(size);
            let (position, id) = match kind {
                BlobKind::Inline => {
                    inline.append_value(value);
                    (0, 0)
                }
                BlobKind::Packed => {
                    inline.append_null();
                    self.append_packed(column, blob, value).await?
                }
                _ => {
                    inline.append_null();
                    let id = self.take_id()?;
                    // The batch's own bytes, not a copy: a write holds one value once.
                    let start = values.value_offsets()[row].as_usize();
                    let bytes = values.values().slice_with_length(start, value.len());
                    self.write_sidecar(id, Bytes::from_owner(ArrowBytes(bytes)))
                        .await?;
                    (0, id)
                }
            };
            kinds.push(kind.code());
            positions.push(position);
            sizes.push(size);
            ids.push(id);
        }
        let fields = descriptor_fields(values.data_type());
        let children: Vec<ArrayRef> = vec![
            Arc::new(UInt8Array::from(kinds)),
            Arc::new(UInt64Array::from(positions)),
            Arc::new(UInt64Array::from(sizes)),
            Arc::new(UInt32Array::from(ids)),
            Arc::new(uris.finish()),
            Arc::new(inline.finish()),
        ];
        let nulls = values.nulls().cloned();
        Ok(Arc::new(StructArray::try_new(fields, children, nulls)?))
    }

    /// The local id the file gives the sidecar `stored` is in, which must be this table's.
    fn reuse(&mut self, stored: &StoredValue, reused: &mut ReusedSidecars) -> Result<u32> {
        if self.table_uuid.is_none() {
            self.table_uuid = self.store.table_uuid();
        }
        if self.table_uuid.as_deref() != Some(stored.table) {
            return Err(Error::invalid(format!(
                "a blob value read as a reference to a sidecar of table {} cannot be written \
                 to {}: read values for another table as bytes (BlobReferences::External or \
                 None)",
                stored.table,
                self.store.display()
            )));
        }
        let place = (stored.directory()?, stored.physical);
        reused.local_id(place, || self.take_id())
    }

    /// Appends `value` to the column's packed sidecar, first writing the open one out if
    /// the value would take it past `pack_file_size`. Returns where the value lies.
    async fn append_packed(
        &mut self,
        column: usize,
        blob: &BlobColumn,
        value: &[u8],
    ) -> Result<(u64, u32)> {
        let full = self.packs.get(&column).is_some_and(|pack| {
            !pack.bytes.is_empty()
                && pack.bytes.len() as u64 + value.len() as u64 > blob.pack_file_size
        });
        if full {
            if let Some(pack) = self.packs.remove(&column) {
                self.write_sidecar(pack.id, Bytes::from(pack.bytes)).await?;
            }
        }
        if !self.packs.contains_key(&column) {
            let id = self.take_id()?;
            // Room for a full pack at once: grown by doubling, it would hold its old and
            // new buffers at each step, and end up to twice its size.
            let room = blob
                .pack_file_size
                .min(MAX_PACK_RESERVED)
                .max(value.len() as u64);
            self.packs.insert(
                column,
                Pack {
                    id,
                    bytes: Vec::with_capacity(room as usize),
                },
            );
        }
        let pack = self
            .packs
            .get_mut(&column)
            .ok_or_else(|| Error::invalid("packed sidecar vanished while writing"))?;
        let position = pack.bytes.len() as u64;
        pack.bytes.extend_from_slice(value);
        Ok((position, pack.id))
    }

    /// Writes every packed sidecar still open. Call before writing the data file.
    pub(in crate::io) async fn finish(&mut self) -> Result<()> {
        for (_, pack) in std::mem::take(&mut self.packs) {
            self.write_sidecar(pack.id, Bytes::from(pack.bytes)).await?;
        }
        Ok(())
    }

    /// Whether any sidecar may have been written (an id was taken).
    pub(in crate::io) fn placed_any(&self) -> bool {
        self.next_id > 0
    }

    pub(in crate::io) fn take_id(&mut self) -> Result<u32> {
        let id = self.next_id;
        self.next_id = id
            .checked_add(1)
            .ok_or_else(|| Error::invalid("a data file cannot hold more than 2^32 sidecars"))?;
        Ok(id)
    }

    async fn write_sidecar(&mut self, id: u32, bytes: Bytes) -> Result<()> {
        self.sidecar_bytes += bytes.len() as u64;
        let path = sidecar_path(&self.data_file, id);
        self.store.put(&self.store.path(&path), bytes).await
    }
}

/// Where one descriptor's bytes are, read from a data file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BlobLocation {
    /// Null value.
    Null,
    /// Bytes in the descriptor itself (row index into the inline child).
    Inline,
    /// `range` of the sidecar `sidecar`.
    Sidecar {
        sidecar: TablePath,
        range: Range<u64>,
    },
    /// `range` of the object at `uri` (`None`: all of it).
    External {
        uri: String,
        range: Option<Range<u64>>,
    },
}

/// A blob column's descriptors as a data file holds them.
pub(crate) struct Descriptors<'a> {
    array: &'a StructArray,
    kinds: &'a UInt8Array,
    positions: &'a UInt64Array,
    sizes: &'a UInt64Array,
    ids: &'a UInt32Array,
    uris: &'a StringArray,
    file: &'a DataFile,
}

impl<'a> Descriptors<'a> {
    /// The descriptors of `array`, read from `file`; another shape is the file's damage.
    pub(crate) fn of(array: &'a ArrayRef, file: &'a DataFile) -> Result<Self> {
        let data_file = &file.path;
        let corrupt = || {
            Error::corrupt(
                data_file.as_str(),
                format!(
                    "a blob column holds {}, not blob descriptors",
                    array.data_type()
                ),
            )
        };
        let array = array.as_struct_opt().ok_or_else(corrupt)?;
        // Whole, or lean (read without the inline bytes, the last field).
        let fields = descriptor_fields(&DataType::Binary).len();
        if array.num_columns() != fields && array.num_columns() != blob_descriptor::INLINE {
            return Err(corrupt());
        }
        let column = |index: usize| array.column(index);
        Ok(Self {
            array,
            kinds: column(blob_descriptor::KIND)
                .as_primitive_opt::<UInt8Type>()
                .ok_or_else(corrupt)?,
            positions: column(blob_descriptor::POSITION)
                .as_primitive_opt::<UInt64Type>()
                .ok_or_else(corrupt)?,
            sizes: column(blob_descriptor::SIZE)
                .as_primitive_opt::<UInt64Type>()
                .ok_or_else(corrupt)?,
            ids: column(blob_descriptor::BLOB_ID)
                .as_primitive_opt::<UInt32Type>()
                .ok_or_else(corrupt)?,
            uris: column(blob_descriptor::BLOB_URI)
                .as_string_opt::<i32>()
                .ok_or_else(corrupt)?,
            file,
        })
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.array.len()
    }

    /// The size its descriptor gives the value at `row` (0 for a whole external object).
    pub(crate) fn size(&self, row: usize) -> u64 {
        self.sizes.value(row)
    }

    /// The kind of the descriptor at `row` (`None`: a null value).
    pub(crate) fn kind(&self, row: usize) -> Result<Option<BlobKind>> {
        if self.array.is_null(row) {
            return Ok(None);
        }
        BlobKind::from_code(self.kinds.value(row), self.file.path.as_str()).map(Some)
    }

    /// Where the bytes of the value at `row` are.
    pub(crate) fn location(&self, row: usize) -> Result<BlobLocation> {
        let Some(kind) = self.kind(row)? else {
            return Ok(BlobLocation::Null);
        };
        let size = self.sizes.value(row);
        let position = self.positions.value(row);
        let end = position.checked_add(size).ok_or_else(|| {
            Error::corrupt(
                self.file.path.as_str(),
                format!("a blob descriptor's range {position}+{size} overflows"),
            )
        })?;
        Ok(match kind {
            BlobKind::Inline => BlobLocation::Inline,
            BlobKind::Packed => BlobLocation::Sidecar {
                sidecar: self.file.sidecar(self.ids.value(row)),
                range: position..end,
            },
            BlobKind::Dedicated => BlobLocation::Sidecar {
                sidecar: self.file.sidecar(self.ids.value(row)),
                range: 0..size,
            },
            // Size 0: the whole object, however large it is when read.
            BlobKind::External => BlobLocation::External {
                uri: self.uris.value(row).to_string(),
                range: (size > 0).then_some(position..end),
            },
        })
    }
}

impl Descriptors<'_> {
    /// The reference ([`BlobReferences::Stored`]) to the value at `row`, in a sidecar of the
    /// table `table` (its uuid): the physical sidecar, never the file that reused it.
    fn stored_reference(&self, row: usize, table: &str) -> Result<Vec<u8>> {
        let (directory, physical) = self.file.sidecar_location(self.ids.value(row));
        let kind = self.kind(row)?.unwrap_or(BlobKind::Inline);
        StoredValue {
            table,
            directory: directory.as_str(),
            physical,
            kind,
            position: self.positions.value(row),
            size: self.sizes.value(row),
        }
        .reference()
    }
}

impl TableStore {
    /// `descriptors` (a blob column as the data file `data_file` holds it) as the bytes of
    /// its values, of type `out` (Binary or LargeBinary): for a read that deferred them
    /// ([`crate::io::FileColumns::deferring`]) until it knew which rows it keeps.
    pub async fn resolve_blobs(
        &self,
        data_file: &DataFile,
        descriptors: &ArrayRef,
        out: &DataType,
    ) -> Result<ArrayRef> {
        resolve(self, data_file, descriptors, out).await
    }
}

/// `descriptors` (a blob column as the data file `data_file` holds it) as the bytes of its
/// values, of type `out` (Binary or LargeBinary).
pub(in crate::io) async fn resolve(
    store: &TableStore,
    data_file: &DataFile,
    descriptors: &ArrayRef,
    out: &DataType,
) -> Result<ArrayRef> {
    match out {
        DataType::Binary => resolve_as::<i32>(store, data_file, descriptors).await,
        DataType::LargeBinary => resolve_as::<i64>(store, data_file, descriptors).await,
        other => Err(Error::invalid(format!(
            "a blob column reads as Binary or LargeBinary, not {other}"
        ))),
    }
}

async fn resolve_as<O: OffsetSizeTrait>(
    store: &TableStore,
    data_file: &DataFile,
    array: &ArrayRef,
) -> Result<ArrayRef> {
    let descriptors = Descriptors::of(array, data_file)?;
    let data_file = &data_file.path;
    let struct_array = array.as_struct();
    let inline = struct_array.column(blob_descriptor::INLINE);
    // Per row: where its bytes come from, by index among the sidecar or external ranges.
    let mut slots: Vec<Slot> = Vec::with_capacity(descriptors.len());
    let mut in_sidecars = Vec::new();
    let mut external = Vec::new();
    let table = match store.blob_references {
        BlobReferences::Stored => Some(store.table_uuid().ok_or_else(|| {
            Error::internal("blob references asked of a table handle that read no manifest")
        })?),
        _ => None,
    };
    for row in 0..descriptors.len() {
        slots.push(match (descriptors.location(row)?, table.as_deref()) {
            (BlobLocation::Null, _) => Slot::Null,
            (BlobLocation::Inline, _) => Slot::Inline,
            (BlobLocation::Sidecar { .. }, Some(table)) => {
                Slot::Reference(descriptors.stored_reference(row, table)?)
            }
            (BlobLocation::Sidecar { sidecar, range }, None) => {
                in_sidecars.push((sidecar, range));
                Slot::Sidecar(in_sidecars.len() - 1)
            }
            (BlobLocation::External { uri, range }, _) => {
                external.push((uri, range));
                Slot::External(external.len() - 1)
            }
        });
    }
    let from_sidecars = fetch_ranges(store, data_file, in_sidecars).await?;
    let from_elsewhere = match store.blob_references.external() {
        true => external
            .into_iter()
            .map(|(uri, range)| super::external::external_blob(&uri, range).map(Bytes::from))
            .collect::<Result<_>>()?,
        false => read_external(store.external.as_ref(), external).await?,
    };
    // Sized once: grown by doubling, the values of a batch of large payloads would be
    // copied again at every step.
    let made: usize = (slots.iter())
        .map(|slot| match slot {
            Slot::Reference(reference) => reference.len(),
            _ => 0,
        })
        .sum();
    let fetched: usize = (from_sidecars.iter().chain(&from_elsewhere))
        .map(Bytes::len)
        .sum::<usize>()
        + made;
    let inline_bytes = inline.to_data().buffers().get(1).map_or(0, |b| b.len());
    let mut builder = GenericBinaryBuilder::<O>::with_capacity(slots.len(), fetched + inline_bytes);
    for (row, slot) in slots.into_iter().enumerate() {
        match slot {
            Slot::Null => builder.append_null(),
            Slot::Inline => builder.append_value(inline_value(inline, row, data_file)?),
            Slot::Sidecar(at) => builder.append_value(&from_sidecars[at]),
            Slot::External(at) => builder.append_value(&from_elsewhere[at]),
            Slot::Reference(reference) => builder.append_value(reference),
        }
    }
    Ok(Arc::new(builder.finish()))
}

/// Where a resolved value's bytes come from.
enum Slot {
    Null,
    Inline,
    Sidecar(usize),
    External(usize),
    /// A stored value's reference ([`BlobReferences::Stored`]).
    Reference(Vec<u8>),
}

/// The bytes of each `(sidecar, range)` of `wanted` (sidecars of `data_file`), in order:
/// every range of one sidecar in one coalesced request, a few sidecars at a time.
pub(in crate::io) async fn fetch_ranges(
    store: &TableStore,
    data_file: &TablePath,
    wanted: Vec<(TablePath, Range<u64>)>,
) -> Result<Vec<Bytes>> {
    fetch_grouped(wanted, |sidecar, ranges| async move {
        read_sidecar_ranges(store, data_file, &sidecar, &ranges).await
    })
    .await
}

pub(in crate::io) fn inline_value<'a>(
    inline: &'a ArrayRef,
    row: usize,
    data_file: &TablePath,
) -> Result<&'a [u8]> {
    let missing = || {
        Error::corrupt(
            data_file.as_str(),
            "an inline blob descriptor holds no bytes",
        )
    };
    let value = match inline.data_type() {
        DataType::Binary => {
            let values = inline.as_binary::<i32>();
            (!values.is_null(row)).then(|| values.value(row))
        }
        DataType::LargeBinary => {
            let values = inline.as_binary::<i64>();
            (!values.is_null(row)).then(|| values.value(row))
        }
        _ => None,
    };
    value.ok_or_else(missing)
}

/// The bytes of `ranges` of the sidecar `sidecar` of `data_file`, each exactly as long as
/// its range: a sidecar missing, or shorter than a range needs, is `Corrupt` naming it.
pub(crate) async fn read_sidecar_ranges(
    store: &TableStore,
    data_file: &TablePath,
    sidecar: &TablePath,
    ranges: &[Range<u64>],
) -> Result<Vec<Bytes>> {
    let location = store.path(sidecar);
    let missing = |e: object_store::Error| match e {
        object_store::Error::NotFound { .. } => Error::corrupt(
            sidecar.as_str(),
            format!("the blob sidecar of {} is missing", data_file.as_str()),
        ),
        other => Error::ObjectStore(other),
    };
    let parts = match store.object_store().get_ranges(&location, ranges).await {
        Ok(parts) => parts,
        Err(e @ object_store::Error::NotFound { .. }) => return Err(missing(e)),
        Err(e) => {
            // A range past the end is reported differently by each store; the sidecar's
            // size says whether it is short.
            let meta = store
                .object_store()
                .head(&location)
                .await
                .map_err(missing)?;
            let needed = ranges.iter().map(|r| r.end).max().unwrap_or(0);
            if meta.size < needed {
                return Err(truncated(sidecar, meta.size, needed));
            }
            return Err(Error::ObjectStore(e));
        }
    };
    let mut read = 0u64;
    for (part, range) in parts.iter().zip(ranges) {
        if part.len() as u64 != range.end - range.start {
            return Err(truncated(
                sidecar,
                range.start + part.len() as u64,
                range.end,
            ));
        }
        read += part.len() as u64;
    }
    if let Some(counter) = &store.bytes_read {
        counter.fetch_add(read, Ordering::Relaxed);
    }
    Ok(parts)
}

fn truncated(sidecar: &TablePath, size: u64, needed: u64) -> Error {
    Error::corrupt(
        sidecar.as_str(),
        format!("the blob sidecar holds {size} bytes, but a descriptor needs {needed}"),
    )
}

/// `batch` (decoded from `data_file`) with each blob column of `blob_ids` resolved to its
/// values' bytes, typed as the file's inline values are (the type it was written in).
pub(in crate::io) async fn resolve_batch(
    store: &TableStore,
    data_file: &DataFile,
    batch: RecordBatch,
    blob_ids: &[FieldId],
) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
    let mut columns = batch.columns().to_vec();
    let mut changed = false;
    for (index, field) in schema.fields().iter().enumerate() {
        if !field_id_of(field).is_some_and(|id| blob_ids.contains(&id)) {
            continue;
        }
        // Bytes come back in the binary type the values were written in.
        let out = match field.data_type() {
            DataType::Struct(children) if children.len() > blob_descriptor::INLINE => {
                children[blob_descriptor::INLINE].data_type().clone()
            }
            other => {
                return Err(Error::corrupt(
                    data_file.path.as_str(),
                    format!("a blob column holds {other}, not blob descriptors"),
                ))
            }
        };
        columns[index] = resolve(store, data_file, &columns[index], &out).await?;
        fields[index] = Arc::new(
            ArrowField::new(field.name(), out, field.is_nullable())
                .with_metadata(field.metadata().clone()),
        );
        changed = true;
    }
    if !changed {
        return Ok(batch);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        Arc::new(ArrowSchema::new(fields)),
        columns,
        &options,
    )?)
}
