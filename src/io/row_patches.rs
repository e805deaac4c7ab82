//! Merging a fragment's row patches into its reads: every read of a fragment's rows
//! (scans, takes, late materialization, version reads) goes through
//! [`TableStore::read_fragment`], which hands its batches here with their offsets. The
//! patches' values of the read's columns are loaded once per read (patches are small: a few
//! columns of a few rows), and each batch takes, cell by cell, the value of the newest patch
//! that holds it; no join: both sides are in offset order. The work is per patched cell, not
//! per row read, beyond one copy of each patched column: a primitive column's values are
//! copied and its patched cells overwritten, any other column is copied run by run.

use std::sync::Arc;

use arrow::array::{
    downcast_primitive, make_array, Array, ArrayData, ArrayRef, ArrowPrimitiveType, AsArray,
    BooleanBufferBuilder, ByteView, GenericByteViewArray, MutableArrayData, PrimitiveArray,
    RecordBatch, MAX_INLINE_VIEW_LEN,
};
use arrow::buffer::{Buffer, MutableBuffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::ArrowNativeType;
use arrow::datatypes::{
    BinaryViewType, ByteViewType, DataType, Schema as ArrowSchema, SchemaRef, StringViewType,
};
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringBitmap;

use super::conform::FileColumns;
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{DataFile, Field, Fragment, FragmentRowIds, RowPatch};

/// Patch files of one fragment read at once.
const CONCURRENT_PATCH_READS: usize = 8;

/// The patches a read merges, each with its values of the read's columns it holds (its
/// rows in offset order) and, per read column, which of those columns holds it.
struct PatchValues {
    patches: Vec<(RowPatch, RecordBatch, Vec<Option<usize>>)>,
}

impl TableStore {
    /// `read` (a read of `fragment`'s `columns` into batches of `output`, with each batch's
    /// offsets) with the values of `patches` (those of the fragment's patches that hold a
    /// read column, oldest first) in place of the ones they change.
    pub(super) fn merging_patches(
        &self,
        read: BoxStream<'static, Result<(RecordBatch, Vec<u32>)>>,
        patches: Vec<RowPatch>,
        columns: FileColumns,
        output: SchemaRef,
    ) -> BoxStream<'static, Result<(RecordBatch, Vec<u32>)>> {
        let this = self.clone();
        let merged = async move {
            // The patches' values load while the read fetches its footer and first pages:
            // one after the other, a cold read of a patched fragment waited for both.
            let mut read = read.peekable();
            let (values, _) = futures::join!(
                this.patch_values(patches, &columns, &output),
                std::pin::Pin::new(&mut read).peek()
            );
            let values = values?;
            Ok::<_, Error>(read.map(move |item| {
                let (batch, offsets) = item?;
                Ok((values.merge(batch, &offsets)?, offsets))
            }))
        };
        stream::once(merged).try_flatten().boxed()
    }

    /// Each patch's values of the read columns it holds, the patches' files read
    /// [`CONCURRENT_PATCH_READS`] at a time.
    async fn patch_values(
        &self,
        patches: Vec<RowPatch>,
        columns: &FileColumns,
        output: &SchemaRef,
    ) -> Result<PatchValues> {
        let loads = patches.into_iter().map(|patch| async move {
            let held: Vec<usize> = (columns.ids().iter().enumerate())
                .filter(|(_, id)| patch.holds(**id))
                .map(|(position, _)| position)
                .collect();
            let output = Arc::new(output.project(&held)?);
            // Files are immutable: a patch's values of some columns, read as these types,
            // are the same for every read.
            let types: Vec<String> = (output.fields().iter())
                .map(|f| format!("{}:{}", f.name(), f.data_type()))
                .collect();
            let ids: Vec<u32> = held.iter().map(|&p| columns.ids()[p]).collect();
            let key = format!("{}#{ids:?}#{}", patch.file.path, types.join(","));
            let load = self.read_patch_file(&patch.file, columns.at(&held), output);
            let values = self.patch_values.get_or_load(&key, load).await?;
            let holds = (0..columns.len())
                .map(|position| held.iter().position(|&p| p == position))
                .collect();
            Ok::<_, Error>((patch, values, holds))
        });
        let patches = stream::iter(loads)
            .buffered(CONCURRENT_PATCH_READS)
            .try_collect()
            .await?;
        Ok(PatchValues { patches })
    }

    /// Every row of the patch file `file`, its columns `fields` (by id, in this order).
    pub(crate) async fn read_patch(
        &self,
        file: &DataFile,
        fields: &[Field],
    ) -> Result<RecordBatch> {
        let output = ArrowSchema::new(fields.iter().map(Field::to_arrow).collect::<Vec<_>>());
        self.read_patch_file(file, FileColumns::of(fields), Arc::new(output))
            .await
    }

    /// Every row of the patch file `file`, its `columns` read as `output`.
    async fn read_patch_file(
        &self,
        file: &DataFile,
        columns: FileColumns,
        output: SchemaRef,
    ) -> Result<RecordBatch> {
        let path = file.path.to_string();
        let rows = u32::try_from(file.row_count)
            .map_err(|_| Error::corrupt(&path, "more rows than a patch holds"))?;
        // The patch's file read as a fragment of its own: its rows are the patched ones.
        let as_fragment = Fragment {
            id: 0,
            files: vec![file.clone()],
            deletion: None,
            physical_rows: rows,
            row_ids: FragmentRowIds::Native,
            lineage: Default::default(),
            patches: Vec::new(),
        };
        let batches: Vec<RecordBatch> = self
            .read_columns(&as_fragment, &columns, output.clone(), None)
            .await?
            .try_collect()
            .await?;
        let values = arrow::compute::concat_batches(&output, &batches)?;
        if values.num_rows() != rows as usize {
            let reason = "a row patch holds fewer rows than it names";
            return Err(Error::corrupt(&path, reason));
        }
        Ok(values)
    }
}

/// A patch holding a column a batch reads: its values of the column, and its hits in the
/// batch ((row of the batch, row of the patch), in row order).
type Holding<'a> = (&'a dyn Array, &'a [(usize, usize)]);

/// A patched cell of a batch: its row, the patch holding its newest value (among those
/// holding the column) and that value's row in the patch.
#[derive(Clone, Copy)]
struct Cell {
    row: usize,
    source: usize,
    patch_row: usize,
}

impl PatchValues {
    /// `batch` (rows at the ascending `offsets`) with each patched cell's newest value.
    fn merge(&self, batch: RecordBatch, offsets: &[u32]) -> Result<RecordBatch> {
        // Per patch: (row of the batch, row of the patch) for each patched row in the batch.
        let mut hits = Vec::with_capacity(self.patches.len());
        for (patch, values, _) in &self.patches {
            let found = hits_in(&patch.offsets, offsets);
            if found.last().is_some_and(|&(_, at)| at >= values.num_rows()) {
                let reason = "a row patch holds fewer rows than it names";
                return Err(Error::corrupt(patch.file.path.to_string(), reason));
            }
            hits.push(found);
        }
        if hits.iter().all(Vec::is_empty) {
            return Ok(batch);
        }
        let (schema, columns, _) = batch.into_parts();
        let mut merged = Vec::with_capacity(columns.len());
        for (position, column) in columns.into_iter().enumerate() {
            let holding: Vec<Holding> = (self.patches.iter())
                .zip(&hits)
                .filter(|(_, hits)| !hits.is_empty())
                .filter_map(|((_, values, holds), hits)| {
                    let held = holds[position]?;
                    Some((values.column(held).as_ref(), hits.as_slice()))
                })
                .collect();
            if holding.is_empty() {
                merged.push(column);
                continue;
            }
            let cells = newest_cells(&holding);
            let patches: Vec<&dyn Array> = holding.iter().map(|(values, _)| *values).collect();
            merged.push(match overwritten(column, &patches, &cells) {
                Ok(patched) => patched,
                Err(column) => by_runs(column.as_ref(), &patches, &cells)?,
            });
        }
        Ok(RecordBatch::try_new(schema, merged)?)
    }
}

/// (row of the batch, row of the patch) for each row of the patch `bitmap` among the batch's
/// `offsets` (ascending): patch rows are in offset order, so the row of offset `o` is its
/// rank - 1.
fn hits_in(bitmap: &RoaringBitmap, offsets: &[u32]) -> Vec<(usize, usize)> {
    let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
        return Vec::new();
    };
    let skipped = match first {
        0 => 0,
        _ => bitmap.rank(first - 1) as usize,
    };
    // A batch of a range of rows (a scan with nothing left out) finds its rows by subtraction.
    let contiguous = (last - first) as usize + 1 == offsets.len();
    let mut at = 0;
    let mut hits = Vec::new();
    for (patch_row, offset) in (skipped..).zip(bitmap.range(first..=last)) {
        if contiguous {
            hits.push(((offset - first) as usize, patch_row));
            continue;
        }
        // The batch holds only the rows read (not deleted, selected).
        while offsets.get(at).is_some_and(|&o| o < offset) {
            at += 1;
        }
        if offsets.get(at) == Some(&offset) {
            hits.push((at, patch_row));
        }
    }
    hits
}

/// The cells `holding` (per patch holding the column, oldest first: its values and hits)
/// patch, by row, each from the newest patch holding it.
fn newest_cells(holding: &[Holding]) -> Vec<Cell> {
    let mut cells: Vec<Cell> = (holding.iter().enumerate())
        .flat_map(|(source, (_, hits))| {
            (hits.iter()).map(move |&(row, patch_row)| Cell {
                row,
                source,
                patch_row,
            })
        })
        .collect();
    if holding.len() > 1 {
        // Stable: of one row's cells, the newest patch's comes last and is kept.
        cells.sort_by_key(|c| c.row);
        let mut newest: Vec<Cell> = Vec::with_capacity(cells.len());
        for cell in cells {
            match newest.last_mut() {
                Some(last) if last.row == cell.row => *last = cell,
                _ => newest.push(cell),
            }
        }
        return newest;
    }
    cells
}

/// `base` with `cells` overwritten in its values, for primitive columns: in place when
/// this read holds the only reference to them (as a batch just decoded does), else in a
/// copy; one store per cell. `Err(base)` for other types.
fn overwritten(
    base: ArrayRef,
    patches: &[&dyn Array],
    cells: &[Cell],
) -> std::result::Result<ArrayRef, ArrayRef> {
    macro_rules! overwrite {
        ($t:ty) => {
            overwrite_primitive::<$t>(base, patches, cells)
        };
    }
    let data_type = base.data_type().clone();
    match data_type {
        DataType::Utf8View => overwrite_views::<StringViewType>(base, patches, cells),
        DataType::BinaryView => overwrite_views::<BinaryViewType>(base, patches, cells),
        _ => downcast_primitive! {
            data_type => (overwrite),
            _ => Err(base)
        },
    }
}

/// `values` (slots of `N`) with each cell's slot set to `value(cell)`: in place when this
/// read holds the buffer alone (a batch just decoded), else in a copy.
fn overwrite_slots<N: ArrowNativeType>(
    values: Buffer,
    cells: &[Cell],
    value: impl Fn(&Cell) -> N,
) -> ScalarBuffer<N> {
    let mut buffer = values.into_mutable().unwrap_or_else(|shared| {
        let mut copy = MutableBuffer::new(shared.len());
        copy.extend_from_slice(shared.as_slice());
        copy
    });
    let slots: &mut [N] = buffer.typed_data_mut();
    for cell in cells {
        slots[cell.row] = value(cell);
    }
    ScalarBuffer::from(Buffer::from(buffer))
}

/// `nulls` (of a column of `len` rows) with each patched cell's validity from its patch;
/// `None` when neither the column nor the patches hold a null.
fn patched_nulls(
    len: usize,
    nulls: Option<NullBuffer>,
    patches: &[&dyn Array],
    cells: &[Cell],
) -> Option<NullBuffer> {
    if nulls.is_none() && patches.iter().all(|p| p.null_count() == 0) {
        return None;
    }
    let mut valid = BooleanBufferBuilder::new(len);
    match &nulls {
        Some(nulls) => valid.append_buffer(nulls.inner()),
        None => valid.append_n(len, true),
    }
    for cell in cells {
        valid.set_bit(cell.row, patches[cell.source].is_valid(cell.patch_row));
    }
    Some(NullBuffer::new(valid.finish()))
}

fn overwrite_primitive<T: ArrowPrimitiveType>(
    base: ArrayRef,
    patches: &[&dyn Array],
    cells: &[Cell],
) -> std::result::Result<ArrayRef, ArrayRef> {
    // `base` is of `T` (`overwritten` chose `T` by its type); the patches must be too.
    let typed_patches: Option<Vec<&PrimitiveArray<T>>> = (patches.iter())
        .map(|p| {
            p.as_primitive_opt::<T>()
                .filter(|_| p.data_type() == base.data_type())
        })
        .collect();
    let Some(typed_patches) = typed_patches else {
        return Err(base);
    };
    let len = base.len();
    // The batch's own reference dropped, its values are this array's alone.
    let typed = PrimitiveArray::<T>::from(base.to_data());
    drop(base);
    let data_type = typed.data_type().clone();
    let (_, values, nulls) = typed.into_parts();
    let values = overwrite_slots(values.into_inner(), cells, |cell| {
        typed_patches[cell.source].value(cell.patch_row)
    });
    let nulls = patched_nulls(len, nulls, patches, cells);
    Ok(Arc::new(
        PrimitiveArray::<T>::new(values, nulls).with_data_type(data_type),
    ))
}

/// `base`, a string or binary view column, with `cells` overwritten in its views: a patched
/// cell's view is its patch's, pointing into that patch's buffers, which the column holds
/// after its own. No value is copied or validated again: each view is one of a valid array.
fn overwrite_views<T: ByteViewType>(
    base: ArrayRef,
    patches: &[&dyn Array],
    cells: &[Cell],
) -> std::result::Result<ArrayRef, ArrayRef> {
    let typed_patches: Option<Vec<&GenericByteViewArray<T>>> = (patches.iter())
        .map(|p| p.as_byte_view_opt::<T>())
        .collect();
    let Some(typed_patches) = typed_patches else {
        return Err(base);
    };
    let own_buffers = base.as_byte_view::<T>().data_buffers().len();
    let patch_buffers = typed_patches.iter().map(|p| p.data_buffers().len());
    if own_buffers + patch_buffers.sum::<usize>() > u32::MAX as usize {
        return Err(base);
    }
    let len = base.len();
    let typed = GenericByteViewArray::<T>::from(base.to_data());
    drop(base);
    let (views, buffers, nulls) = typed.into_parts();
    // Where each patch's buffers start among the column's.
    let mut all_buffers: Vec<Buffer> = buffers.to_vec();
    let mut first_buffer = Vec::with_capacity(patches.len());
    for patch in &typed_patches {
        first_buffer.push(all_buffers.len() as u32);
        all_buffers.extend(patch.data_buffers().iter().cloned());
    }
    let views = overwrite_slots(views.into_inner(), cells, |cell| {
        let view = typed_patches[cell.source].views()[cell.patch_row];
        // A view's low 32 bits are its length; a short value is inline, with no buffer.
        match view as u32 <= MAX_INLINE_VIEW_LEN {
            true => view,
            false => {
                let moved = ByteView::from(view);
                let index = moved.buffer_index + first_buffer[cell.source];
                moved.with_buffer_index(index).as_u128()
            }
        }
    });
    let nulls = patched_nulls(len, nulls, patches, cells);
    // SAFETY: every view is either the column's own (valid against its buffers, which keep
    // their positions) or a patch's (valid against that patch's buffers, which sit at
    // `first_buffer[source]` onward, its buffer index moved by as much); `nulls` has `len`
    // bits, as `views` has `len` views. So `try_new` would not fail.
    Ok(Arc::new(unsafe {
        GenericByteViewArray::<T>::new_unchecked(views, all_buffers, nulls)
    }))
}

/// `base` with `cells` taken from `patches`, copied run by run: patched rows come in runs
/// (and the rows between them in longer ones), which a row-by-row interleave would copy one
/// value at a time.
fn by_runs(base: &dyn Array, patches: &[&dyn Array], cells: &[Cell]) -> Result<ArrayRef> {
    let data: Vec<ArrayData> = (std::iter::once(base).chain(patches.iter().copied()))
        .map(|s| s.to_data())
        .collect();
    let mut merged = MutableArrayData::new(data.iter().collect(), false, base.len());
    // The next row of `base` not yet copied or replaced.
    let mut next = 0;
    let mut at = 0;
    while let Some(&Cell {
        row,
        source,
        patch_row,
    }) = cells.get(at)
    {
        if next < row {
            merged.try_extend(0, next, row)?;
        }
        let mut end = at + 1;
        while cells.get(end).is_some_and(|c| {
            c.source == source && c.row == row + (end - at) && c.patch_row == patch_row + (end - at)
        }) {
            end += 1;
        }
        merged.try_extend(source + 1, patch_row, patch_row + (end - at))?;
        next = row + (end - at);
        at = end;
    }
    if next < base.len() {
        merged.try_extend(0, next, base.len())?;
    }
    Ok(make_array(merged.freeze()))
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray, StringViewArray};

    use super::*;

    /// Cells patching rows `rows` of a 40-row batch from two patches, newest winning.
    fn cells_of(first: &[usize], second: &[usize]) -> Vec<Cell> {
        let hits = |rows: &[usize]| rows.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        let (first, second): (Vec<_>, Vec<_>) = (hits(first), hits(second));
        let none = Int64Array::from(Vec::<i64>::new());
        newest_cells(&[(&none, &first), (&none, &second)])
    }

    #[test]
    fn the_newest_patch_of_a_cell_wins_and_both_copies_agree() {
        let base = Int64Array::from_iter((0..40).map(|i| (i % 7 != 0).then_some(i)));
        let first = Int64Array::from(vec![Some(100), Some(101), Some(102), None, Some(104)]);
        let second = Int64Array::from(vec![Some(200), Some(201), None]);
        let cells = cells_of(&[1, 2, 3, 20, 39], &[2, 3, 21]);
        let patches: [&dyn Array; 2] = [&first, &second];
        let copied = overwritten(Arc::new(base.clone()), &patches, &cells).expect("primitive");
        let runs = by_runs(&base, &patches, &cells).expect("runs");
        assert_eq!(copied.as_ref(), runs.as_ref());
        let expected = Int64Array::from_iter((0..40).map(|i| match i {
            1 => Some(100),
            2 => Some(200),
            3 => Some(201),
            20 => None,
            21 => None,
            39 => Some(104),
            _ => (i % 7 != 0).then_some(i),
        }));
        assert_eq!(
            copied.as_primitive::<arrow::datatypes::Int64Type>(),
            &expected
        );
    }

    #[test]
    fn strings_are_copied_run_by_run() {
        let base = StringArray::from_iter_values((0..40).map(|i| format!("row {i}")));
        let first = StringArray::from(vec![Some("a"), Some("b"), None]);
        let cells = cells_of(&[0, 1, 39], &[]);
        assert!(overwritten(Arc::new(base.clone()), &[&first], &cells).is_err());
        let merged = by_runs(&base, &[&first], &cells).expect("runs");
        let merged = merged.as_string::<i32>();
        assert_eq!((merged.value(0), merged.value(1)), ("a", "b"));
        assert!(merged.is_null(39));
        assert_eq!(merged.value(38), "row 38");
    }

    #[test]
    fn string_views_take_their_patches_views_and_buffers() {
        let long = |tag: &str, i: usize| format!("{tag} value {i} longer than twelve bytes");
        let base = StringViewArray::from_iter((0..40).map(|i| match i % 5 {
            0 => None,
            1 => Some(format!("s{i}")),
            _ => Some(long("base", i)),
        }));
        let first = StringViewArray::from(vec![
            Some(long("first", 0)),
            Some("short".to_string()),
            None,
            Some(long("first", 3)),
        ]);
        let second = StringViewArray::from(vec![Some(long("second", 0)), Some("x".to_string())]);
        let cells = cells_of(&[1, 5, 10, 39], &[5, 20]);
        let patches: [&dyn Array; 2] = [&first, &second];
        let viewed = overwritten(Arc::new(base.clone()), &patches, &cells).expect("view");
        let runs = by_runs(&base, &patches, &cells).expect("runs");
        assert_eq!(viewed.as_ref(), runs.as_ref());
        let viewed = viewed.as_string_view();
        assert_eq!(viewed.value(1), long("first", 0));
        assert_eq!(viewed.value(5), long("second", 0));
        assert!(viewed.is_null(10));
        assert_eq!(viewed.value(20), "x");
        assert_eq!(viewed.value(39), long("first", 3));
        assert_eq!(viewed.value(2), long("base", 2));
        assert!(viewed.is_null(15));
        // What a checked construction would refuse, it refuses here too.
        let (views, buffers, nulls) = viewed.clone().into_parts();
        StringViewArray::try_new(views, buffers, nulls).expect("valid views");
    }

    #[test]
    fn a_batch_with_rows_left_out_finds_its_patched_rows_by_offset() {
        let bitmap: RoaringBitmap = [3, 5, 9, 12].into_iter().collect();
        // Offsets 4..=12 without 6 and 12: 5 is row 1, 9 row 4; 3 precedes the batch.
        assert_eq!(
            hits_in(&bitmap, &[4, 5, 7, 8, 9, 10, 11]),
            vec![(1, 1), (4, 2)]
        );
        assert_eq!(hits_in(&bitmap, &[9, 10, 11, 12]), vec![(0, 2), (3, 3)]);
        assert!(hits_in(&bitmap, &[]).is_empty());
    }
}
