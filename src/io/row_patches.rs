//! Merging a fragment's row patches into its reads: every read of a fragment's rows
//! (scans, takes, late materialization, version reads) goes through
//! [`TableStore::read_fragment`], which hands its batches here with their offsets. The
//! patches' values of the read's columns are loaded once per read (patches are small: a few
//! columns of a few rows), and each batch takes, cell by cell, the value of the newest patch
//! that holds it; no join, no sort: both sides are in offset order.

use std::sync::Arc;

use arrow::array::{make_array, Array, ArrayData, ArrayRef, MutableArrayData, RecordBatch};
use arrow::datatypes::SchemaRef;
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};

use super::conform::FileColumns;
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{Fragment, FragmentRowIds, RowPatch};

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
            let values = this.patch_values(patches, &columns, &output).await?;
            Ok::<_, Error>(read.map(move |item| {
                let (batch, offsets) = item?;
                Ok((values.merge(batch, &offsets)?, offsets))
            }))
        };
        stream::once(merged).try_flatten().boxed()
    }

    /// Each patch's values of the read columns it holds.
    async fn patch_values(
        &self,
        patches: Vec<RowPatch>,
        columns: &FileColumns,
        output: &SchemaRef,
    ) -> Result<PatchValues> {
        let mut loaded = Vec::with_capacity(patches.len());
        for patch in patches {
            let path = patch.file.path.to_string();
            let rows = u32::try_from(patch.file.row_count)
                .map_err(|_| Error::corrupt(&path, "more rows than a patch holds"))?;
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
            let key = format!("{path}#{ids:?}#{}", types.join(","));
            let load = async {
                // The patch's file read as a fragment of its own: its rows are the patched ones.
                let as_fragment = Fragment {
                    id: 0,
                    files: vec![patch.file.clone()],
                    deletion: None,
                    physical_rows: rows,
                    row_ids: FragmentRowIds::Native,
                    lineage: Default::default(),
                    patches: Vec::new(),
                };
                let batches: Vec<RecordBatch> = self
                    .read_columns(&as_fragment, &columns.at(&held), output.clone(), None)
                    .await?
                    .try_collect()
                    .await?;
                let values = arrow::compute::concat_batches(&output, &batches)?;
                if values.num_rows() != rows as usize {
                    let reason = "a row patch holds fewer rows than it names";
                    return Err(Error::corrupt(&path, reason));
                }
                Ok(values)
            };
            let values = self.patch_values.get_or_load(&key, load).await?;
            let holds = (0..columns.len())
                .map(|position| held.iter().position(|&p| p == position))
                .collect();
            loaded.push((patch, values, holds));
        }
        Ok(PatchValues { patches: loaded })
    }
}

impl PatchValues {
    /// `batch` (rows at the ascending `offsets`) with each patched cell's newest value.
    fn merge(&self, batch: RecordBatch, offsets: &[u32]) -> Result<RecordBatch> {
        let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
            return Ok(batch);
        };
        // Per patch: (row of the batch, row of the patch) for each patched row in the batch.
        let hits: Vec<Vec<(usize, usize)>> = (self.patches.iter())
            .map(|(patch, _, _)| {
                let bitmap = &patch.offsets;
                // Patch rows are in offset order: the row of offset `o` is its rank - 1.
                let skipped = match first {
                    0 => 0,
                    _ => bitmap.rank(first - 1) as usize,
                };
                let mut at = 0;
                let mut hits = Vec::new();
                for (patch_row, offset) in (skipped..).zip(bitmap.range(first..=last)) {
                    // The batch holds only the rows read (not deleted, selected).
                    while at < offsets.len() && offsets[at] < offset {
                        at += 1;
                    }
                    if offsets.get(at) == Some(&offset) {
                        hits.push((at, patch_row));
                    }
                }
                hits
            })
            .collect();
        if hits.iter().all(Vec::is_empty) {
            return Ok(batch);
        }
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        for (position, column) in columns.iter_mut().enumerate() {
            // (source, row) per batch row: source 0 is the batch, k + 1 the k-th patch
            // holding the column; later patches are applied last and win.
            let mut sources: Vec<&dyn Array> = vec![column.as_ref()];
            let mut indices: Option<Vec<(usize, usize)>> = None;
            for ((_, values, holds), hits) in self.patches.iter().zip(&hits) {
                let Some(held) = holds[position].filter(|_| !hits.is_empty()) else {
                    continue;
                };
                sources.push(values.column(held).as_ref());
                let source = sources.len() - 1;
                let indices =
                    indices.get_or_insert_with(|| (0..batch.num_rows()).map(|i| (0, i)).collect());
                for &(row, patch_row) in hits {
                    indices[row] = (source, patch_row);
                }
            }
            if let Some(indices) = indices {
                *column = by_runs(&sources, &indices)?;
            }
        }
        Ok(RecordBatch::try_new(batch.schema(), columns)?)
    }
}

/// The array whose row `i` is row `indices[i].1` of `sources[indices[i].0]`, copied run by
/// run: patched rows come in runs (and the rows between them in longer ones), which a
/// row-by-row interleave would copy one value at a time.
fn by_runs(sources: &[&dyn Array], indices: &[(usize, usize)]) -> Result<ArrayRef> {
    let data: Vec<ArrayData> = sources.iter().map(|s| s.to_data()).collect();
    let mut merged = MutableArrayData::new(data.iter().collect(), false, indices.len());
    let mut at = 0;
    while let Some(&(source, start)) = indices.get(at) {
        let mut end = at + 1;
        while indices
            .get(end)
            .is_some_and(|&(s, row)| s == source && row == start + (end - at))
        {
            end += 1;
        }
        merged.try_extend(source, start, start + (end - at))?;
        at = end;
    }
    Ok(make_array(merged.freeze()))
}
