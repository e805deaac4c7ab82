//! A data file's columns made the table's: matched by field id (at the top level and, for
//! nested columns, at every depth), renamed to the table's names, ordered as the read asks,
//! widened types cast, columns and nested fields a file predates as nulls, fields it holds
//! that the table dropped left out.

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, FixedSizeListArray, GenericListArray, MapArray,
    OffsetSizeTrait, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, FieldRef, SchemaRef};

use crate::error::{Error, Result};
use crate::format::{field_id_of, nested, Field, FieldId};

/// The table columns a read projects, as data files hold them: each one's field id and, for
/// a nested column, how its fields are matched.
#[derive(Debug, Clone, Default)]
pub struct FileColumns {
    ids: Vec<FieldId>,
    nested: Vec<Option<Arc<NestedShape>>>,
    /// The ids of the blob columns among them: files hold their descriptors.
    blob_ids: Vec<FieldId>,
    /// Blob columns read as their descriptors, resolved to bytes later (after a filter).
    deferred: Vec<FieldId>,
    /// Those of them read without their inline bytes ([`crate::format::lean_descriptor_type`]).
    lean: Vec<FieldId>,
    /// String and binary columns decoded as views ([`view_type`]), for a filter only: their
    /// values stay in the buffers Parquet decoded them into.
    views: Vec<FieldId>,
}

/// How a nested column's fields are found in a file.
#[derive(Debug)]
struct NestedShape {
    /// The table's type, its nested fields tagged with their ids.
    file_type: DataType,
    /// The ids files written before nested fields had ids are read by, in the order of
    /// their own nested fields (empty: every file tags them).
    legacy_ids: Vec<FieldId>,
}

impl FileColumns {
    /// The columns `fields`, in that order.
    pub fn of<'a>(fields: impl IntoIterator<Item = &'a Field>) -> Self {
        let mut columns = Self::default();
        for field in fields {
            columns.ids.push(field.id);
            if field.blob.is_some() {
                columns.blob_ids.push(field.id);
            }
            columns.nested.push((!field.nested_ids.is_empty()).then(|| {
                Arc::new(NestedShape {
                    file_type: field.file_type(),
                    legacy_ids: field.legacy_nested_ids.clone(),
                })
            }));
        }
        columns
    }

    /// Their field ids.
    pub fn ids(&self) -> &[FieldId] {
        &self.ids
    }

    /// The field ids of the blob columns among them.
    pub fn blob_ids(&self) -> &[FieldId] {
        &self.blob_ids
    }

    /// These columns with the blob columns `deferred` read as their descriptors (the read's
    /// output types them so), for the caller to resolve once it knows which rows it keeps.
    pub fn deferring(mut self, deferred: Vec<FieldId>) -> Self {
        self.deferred = deferred;
        self
    }

    /// These columns with the deferred blob columns `lean` read without their inline bytes:
    /// the read's output types them as lean descriptors, and Parquet decodes none of the
    /// bytes (a blob column read for its sizes, or for the rows a filter keeps).
    pub fn without_inline(mut self, lean: Vec<FieldId>) -> Self {
        debug_assert!(lean.iter().all(|id| self.deferred.contains(id)));
        self.lean = lean;
        self
    }

    /// These columns with the string and binary columns `views` decoded as views: the
    /// read's output types them so ([`view_type`]).
    pub fn as_views(mut self, views: Vec<FieldId>) -> Self {
        self.views = views;
        self
    }

    /// The columns decoded as views.
    pub fn view_ids(&self) -> &[FieldId] {
        &self.views
    }

    /// The blob columns read without their inline bytes.
    pub fn lean_ids(&self) -> &[FieldId] {
        &self.lean
    }

    /// The blob columns a read resolves to bytes itself.
    pub fn resolved_blob_ids(&self) -> Vec<FieldId> {
        let deferred = |id: &&FieldId| !self.deferred.contains(id);
        self.blob_ids.iter().filter(deferred).copied().collect()
    }

    /// Those of them at `positions` (ascending), as they are read here.
    pub(super) fn at(&self, positions: &[usize]) -> Self {
        let ids: Vec<FieldId> = positions.iter().map(|&p| self.ids[p]).collect();
        let kept = |list: &[FieldId]| -> Vec<FieldId> {
            list.iter().copied().filter(|id| ids.contains(id)).collect()
        };
        Self {
            nested: positions.iter().map(|&p| self.nested[p].clone()).collect(),
            blob_ids: kept(&self.blob_ids),
            deferred: kept(&self.deferred),
            lean: kept(&self.lean),
            views: kept(&self.views),
            ids,
        }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// The table's batch of `rows` rows from `batches` (the same rows of one or more of a
/// fragment's files): `columns` as `output` types them (see the module header).
pub(super) fn conform(
    batches: &[RecordBatch],
    rows: usize,
    columns: &FileColumns,
    output: &SchemaRef,
) -> Result<RecordBatch> {
    let arrays = columns
        .ids
        .iter()
        .zip(&columns.nested)
        .zip(output.fields())
        .map(|((&id, nested), field)| {
            let column = column_in(batches, id);
            match (column, nested) {
                (Some(column), Some(shape)) => shape.conform(&column, field.data_type()),
                // A filter's view column goes no further than the filter: no buffer to join.
                (Some(column), None)
                    if columns.views.contains(&id) && column.data_type() == field.data_type() =>
                {
                    Ok(column)
                }
                (column, _) => conform_column(column, field.data_type(), rows),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        output.clone(),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

/// The column with field id `id` in any of `batches` (the first that holds it: a field is
/// read from one file only).
fn column_in(batches: &[RecordBatch], id: u32) -> Option<ArrayRef> {
    batches.iter().find_map(|b| column_by_field_id(b, id))
}

fn column_by_field_id(batch: &RecordBatch, id: u32) -> Option<ArrayRef> {
    let position = batch
        .schema()
        .fields()
        .iter()
        .position(|f| field_id_of(f) == Some(id))?;
    Some(batch.column(position).clone())
}

/// The view type a column of `data_type` decodes as, if it has one: strings as
/// `Utf8View`, binaries as `BinaryView`.
pub fn view_type(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(DataType::Utf8View),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            Some(DataType::BinaryView)
        }
        _ => None,
    }
}

/// A column in the table's type: cast if the file stored a narrower type, nulls if the file
/// predates the column; view columns with their values in one buffer ([`one_view_buffer`]).
fn conform_column(column: Option<ArrayRef>, data_type: &DataType, rows: usize) -> Result<ArrayRef> {
    match column {
        Some(c) if c.data_type() == data_type => Ok(one_view_buffer(c)),
        Some(c) if crate::format::stored_as(data_type).as_ref() == Some(c.data_type()) => {
            super::stored_type::from_stored(&c, data_type)
        }
        Some(c) => Ok(cast(&c, data_type)?),
        None => Ok(new_null_array(data_type, rows)),
    }
}

impl NestedShape {
    /// `column`, as a file holds it, as `out` (the table's type).
    fn conform(&self, column: &ArrayRef, out: &DataType) -> Result<ArrayRef> {
        let held = column.data_type();
        if !self.legacy_ids.is_empty() {
            let ids = nested::ids_in(held);
            if ids.len() == self.legacy_ids.len() && ids.iter().all(Option::is_none) {
                // Written before nested fields had ids: they are the legacy ids, in order.
                let held = nested::tagged(held, &self.legacy_ids);
                return by_id(column, &held, &self.file_type, out);
            }
        }
        by_id(column, held, &self.file_type, out)
    }
}

/// `array` (of type `held`, its nested fields tagged with ids) as `out`, the table's type,
/// whose fields `wanted` (the same type tagged with ids) names by id: each field found by id,
/// nulls where `held` has none. `out` is the output schema's own type, so no batch builds one.
fn by_id(array: &ArrayRef, held: &DataType, wanted: &DataType, out: &DataType) -> Result<ArrayRef> {
    Ok(match (held, wanted, out) {
        (
            DataType::Struct(held_fields),
            DataType::Struct(wanted_fields),
            DataType::Struct(out_fields),
        ) => {
            let array = array.as_struct();
            // A file whose fields carry no ids (none do, by the legacy ids) is read by name:
            // the names it was written with are the table's of then.
            let by_name = held_fields.iter().all(|f| field_id_of(f).is_none());
            let columns = wanted_fields
                .iter()
                .zip(out_fields)
                .map(|(wanted, out)| {
                    let at = match field_id_of(wanted) {
                        _ if by_name => held_fields.iter().position(|f| f.name() == wanted.name()),
                        Some(id) => held_fields.iter().position(|f| field_id_of(f) == Some(id)),
                        None => None,
                    };
                    match at {
                        Some(at) => by_id(
                            array.column(at),
                            held_fields[at].data_type(),
                            wanted.data_type(),
                            out.data_type(),
                        ),
                        None => Ok(new_null_array(out.data_type(), array.len())),
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            Arc::new(StructArray::try_new(
                out_fields.clone(),
                columns,
                array.nulls().cloned(),
            )?)
        }
        (DataType::List(held_item), DataType::List(wanted_item), DataType::List(out_item)) => {
            list_by_id::<i32>(array, [held_item, wanted_item, out_item])?
        }
        (
            DataType::LargeList(held_item),
            DataType::LargeList(wanted_item),
            DataType::LargeList(out_item),
        ) => list_by_id::<i64>(array, [held_item, wanted_item, out_item])?,
        (
            DataType::FixedSizeList(held_item, _),
            DataType::FixedSizeList(wanted_item, _),
            DataType::FixedSizeList(out_item, size),
        ) => {
            let array = array.as_fixed_size_list();
            let values = by_id(
                array.values(),
                held_item.data_type(),
                wanted_item.data_type(),
                out_item.data_type(),
            )?;
            Arc::new(FixedSizeListArray::try_new(
                out_item.clone(),
                *size,
                values,
                array.nulls().cloned(),
            )?)
        }
        (
            DataType::Map(held_entries, _),
            DataType::Map(wanted_entries, _),
            DataType::Map(out_entries, sorted),
        ) => {
            let array = array.as_map();
            let entries: ArrayRef = Arc::new(array.entries().clone());
            let entries = by_id(
                &entries,
                held_entries.data_type(),
                wanted_entries.data_type(),
                out_entries.data_type(),
            )?;
            Arc::new(MapArray::try_new(
                out_entries.clone(),
                array.offsets().clone(),
                entries.as_struct().clone(),
                array.nulls().cloned(),
                *sorted,
            )?)
        }
        _ => conform_column(Some(array.clone()), out, array.len())?,
    })
}

/// A list (`O`: its offsets) of `[held, wanted, out]` items as a list of `out` items.
fn list_by_id<O: OffsetSizeTrait>(array: &ArrayRef, items: [&FieldRef; 3]) -> Result<ArrayRef> {
    let [held, wanted, out] = items;
    let array = array.as_list::<O>();
    let values = by_id(
        array.values(),
        held.data_type(),
        wanted.data_type(),
        out.data_type(),
    )?;
    Ok(Arc::new(GenericListArray::<O>::try_new(
        out.clone(),
        array.offsets().clone(),
        values,
        array.nulls().cloned(),
    )?))
}

/// `column` as the table's `data_type` when the two differ only in metadata on nested fields
/// (rows read from a Parquet file that tags its fields with ids, say, or values an INSERT
/// gives a column whose nested fields keep metadata): the same buffers under
/// the table's fields. Any other difference is left as it is, for the batch check to refuse.
pub(super) fn relabelled(column: &ArrayRef, data_type: &DataType) -> Result<ArrayRef> {
    if column.data_type() == data_type
        || nested::plain(column.data_type()) != nested::plain(data_type)
    {
        return Ok(column.clone());
    }
    relabel(column, data_type)
}

/// A batch of the table's `schema` from `columns` of its types up to nested fields' metadata
/// (values DataFusion cast to a column's type keep no metadata inside it: arrow's casts of
/// lists and structs take the target's shape, not its fields' metadata).
pub(crate) fn table_batch(schema: &SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    let columns = columns
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| relabelled(column, field.data_type()))
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| Error::invalid(e.to_string()))
}

fn relabel(array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    Ok(match to {
        DataType::Struct(fields) => {
            let array = array.as_struct();
            let columns = array
                .columns()
                .iter()
                .zip(fields)
                .map(|(column, field)| relabel(column, field.data_type()))
                .collect::<Result<Vec<_>>>()?;
            Arc::new(StructArray::try_new(
                fields.clone(),
                columns,
                array.nulls().cloned(),
            )?)
        }
        DataType::List(item) => relabel_list::<i32>(array, item)?,
        DataType::LargeList(item) => relabel_list::<i64>(array, item)?,
        DataType::FixedSizeList(item, size) => {
            let array = array.as_fixed_size_list();
            Arc::new(FixedSizeListArray::try_new(
                item.clone(),
                *size,
                relabel(array.values(), item.data_type())?,
                array.nulls().cloned(),
            )?)
        }
        DataType::Map(entries, sorted) => {
            let array = array.as_map();
            let pairs: ArrayRef = Arc::new(array.entries().clone());
            let pairs = relabel(&pairs, entries.data_type())?;
            Arc::new(MapArray::try_new(
                entries.clone(),
                array.offsets().clone(),
                pairs.as_struct().clone(),
                array.nulls().cloned(),
                *sorted,
            )?)
        }
        _ => array.clone(),
    })
}

fn relabel_list<O: OffsetSizeTrait>(array: &ArrayRef, item: &FieldRef) -> Result<ArrayRef> {
    let array = array.as_list::<O>();
    Ok(Arc::new(GenericListArray::<O>::try_new(
        item.clone(),
        array.offsets().clone(),
        relabel(array.values(), item.data_type())?,
        array.nulls().cloned(),
    )?))
}

/// `column` with its out-of-line values in one buffer, if it is a string or binary view.
///
/// Parquet's reader gives a view column one buffer per page it decoded, so a batch of
/// [`READ_BATCH_ROWS`](super::data::READ_BATCH_ROWS) over natal's small pages holds eight.
/// That costs little in the batch itself, but operators that concatenate batches keep every
/// buffer, and those that take rows from the result hand all of them to each batch they
/// emit: a hash join whose build side held TPC-H customer's names (1,465 buffers at SF 10)
/// spent twice DataFusion's time on q18 passing them along. The copy is of the long values
/// only, once.
fn one_view_buffer(column: ArrayRef) -> ArrayRef {
    match column.data_type() {
        DataType::Utf8View if column.as_string_view().data_buffers().len() > 1 => {
            Arc::new(column.as_string_view().gc())
        }
        DataType::BinaryView if column.as_binary_view().data_buffers().len() > 1 => {
            Arc::new(column.as_binary_view().gc())
        }
        _ => column,
    }
}
