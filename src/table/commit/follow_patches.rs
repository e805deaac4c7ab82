//! A row patch planned before a compaction moved its rows, moved onto their new addresses.
//! The patch's rows are named by offset in a fragment the compaction removed; their ids say
//! where each went (the compacted fragments' row-id sequences), and the patch's values are
//! written again, one file per fragment that now holds some of its rows, in that fragment's
//! offset order. A row the compaction did not carry (deleted meanwhile) is a conflict. Where
//! a compaction put the rows it carried is found here for every rebase that follows rows.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, ArrayRef, RecordBatch};
use roaring::RoaringBitmap;

use super::action::NewPatch;
use crate::error::{Error, Result};
use crate::format::{Field, Manifest, Schema};
use crate::io::TableStore;
use crate::rowid::{FragmentId, RowAddress, RowId};

/// Per fragment now holding patched rows: (offset there, index of the moved patch, row of
/// its file), in offset order.
type Landed = BTreeMap<FragmentId, Vec<(u32, usize, usize)>>;

/// Moves those of `patches` whose fragment `next` (a compaction on top of `prev`) removed
/// onto the fragments now holding their rows. `Ok(Err(reason))`: a patched row was not
/// carried, a conflict.
pub(super) async fn follow_patches(
    store: &TableStore,
    patches: &mut Vec<NewPatch>,
    prev: &Manifest,
    next: &Manifest,
) -> Result<std::result::Result<(), String>> {
    // Rows deleted before the compaction are not carried by it, whatever their ids (the
    // fragments it left have the deletions they had).
    if let Some(reason) = deleted_under(store, patches, prev).await? {
        return Ok(Err(reason));
    }
    let gone = |p: &NewPatch| next.fragment(p.fragment).is_none();
    let moved: Vec<NewPatch> = patches.iter().filter(|p| gone(p)).cloned().collect();
    if moved.is_empty() {
        return Ok(Ok(()));
    }
    let Some(fields) = patch_fields(&moved, next) else {
        return Ok(Err("the patched columns changed meanwhile".into()));
    };
    let landed = match landed_cells(&moved, prev, next) {
        Ok(landed) => landed,
        Err(reason) => return Ok(Err(reason)),
    };
    let schema = Schema {
        fields,
        constraints: Vec::new(),
        ..next.schema.clone()
    };
    let rebased = write_moved(store, &moved, &schema, landed).await?;
    // The files planned for the removed fragments are no version's now.
    super::delete_files(store, &schema, moved.iter().map(|p| &p.file)).await;
    patches.retain(|p| !gone(p));
    patches.extend(rebased);
    Ok(Ok(()))
}

/// Why `patches` cannot land on `manifest`: a row they patch is deleted there (deleted or
/// rewritten by another commit). `None`: each patched row of a fragment `manifest` has is
/// live.
pub(super) async fn deleted_under(
    store: &TableStore,
    patches: &[NewPatch],
    manifest: &Manifest,
) -> Result<Option<String>> {
    for patch in patches {
        let Some(fragment) = manifest.fragment(patch.fragment) else {
            continue;
        };
        if let Some(deleted) = store.fragment_deletions(fragment).await? {
            if !deleted.is_disjoint(&patch.offsets) {
                return Ok(Some(format!(
                    "a patched row of fragment {} was deleted or updated concurrently",
                    fragment.id
                )));
            }
        }
    }
    Ok(None)
}

/// Per fragment of `next` holding rows `moved` patches: (offset there, patch, row of the
/// patch), in offset order. `Err`: a patched row is not in `next`.
fn landed_cells(
    moved: &[NewPatch],
    prev: &Manifest,
    next: &Manifest,
) -> std::result::Result<Landed, String> {
    let carried = added_row_ids(prev, next);
    let mut landed = Landed::new();
    for (k, patch) in moved.iter().enumerate() {
        let Some(old) = prev.fragment(patch.fragment) else {
            return Err(format!("fragment {} was rewritten", patch.fragment));
        };
        for (patch_row, offset) in patch.offsets.iter().enumerate() {
            let id = old.row_id_at(offset);
            let Some(now) = id.and_then(|id| carried.get(&id)) else {
                let id = id.map_or_else(|| format!("at offset {offset}"), |id| id.to_string());
                return Err(format!("patched row {id} was removed meanwhile"));
            };
            (landed.entry(now.fragment_id()).or_default()).push((now.offset(), k, patch_row));
        }
    }
    for cells in landed.values_mut() {
        cells.sort_unstable();
    }
    Ok(landed)
}

/// The columns every one of `moved` holds (one action's patches hold the same), as `next`
/// has them; `None` if they differ or `next` lacks one.
fn patch_fields(moved: &[NewPatch], next: &Manifest) -> Option<Vec<Field>> {
    let ids = &moved.first()?.file.field_ids;
    if moved.iter().any(|p| &p.file.field_ids != ids) {
        return None;
    }
    (ids.iter())
        .map(|&id| next.schema.field_by_id(id).cloned())
        .collect()
}

/// Writes, per fragment of `landed`, the values its cells take from `moved`'s files (whose
/// columns are `schema`'s): the new patches.
async fn write_moved(
    store: &TableStore,
    moved: &[NewPatch],
    schema: &Schema,
    landed: Landed,
) -> Result<Vec<NewPatch>> {
    let mut values: Vec<RecordBatch> = Vec::with_capacity(moved.len());
    for patch in moved {
        values.push(store.read_patch(&patch.file, &schema.fields).await?);
    }
    let output = schema.to_arrow();
    let mut batches = Vec::with_capacity(landed.len());
    for (fragment, cells) in landed {
        let indices: Vec<(usize, usize)> = cells.iter().map(|&(_, k, row)| (k, row)).collect();
        let columns = (0..schema.fields.len())
            .map(|c| {
                let sources: Vec<&dyn Array> =
                    values.iter().map(|v| v.column(c).as_ref()).collect();
                arrow::compute::interleave(&sources, &indices)
            })
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()?;
        let offsets: RoaringBitmap = cells.iter().map(|&(offset, _, _)| offset).collect();
        if offsets.len() != cells.len() as u64 {
            return Err(Error::invalid("two patched rows were carried to one row"));
        }
        batches.push((
            fragment,
            RecordBatch::try_new(output.clone(), columns)?,
            offsets,
        ));
    }
    super::write_patches(store, schema, batches).await
}

/// Where the carried rows of fragments new in `next` are.
pub(super) fn added_row_ids(prev: &Manifest, next: &Manifest) -> HashMap<RowId, RowAddress> {
    let mut out = HashMap::new();
    for fragment in &next.fragments {
        if prev.fragment(fragment.id).is_some() {
            continue;
        }
        if let Some(seq) = fragment.row_ids.sequence() {
            for (offset, id) in seq.iter().enumerate() {
                out.insert(id, RowAddress::new(fragment.id, offset as u32));
            }
        }
    }
    out
}
