//! Row patches (reader flag [`ROW_PATCHES`](super::flags::ROW_PATCHES), seed 004's "small
//! change records"): new values of some columns of some rows of a fragment, written by one
//! version. The rows stay where they are, so their ids, the relocation view and the indexes
//! keyed by id need nothing; reads merge a fragment's patches over its files by offset, a
//! later patch of a cell winning, until maintenance folds them into new data files.

use std::sync::Arc;

use roaring::RoaringBitmap;

use super::{proto, DataFile, FieldId};
use crate::error::{Error, Result};

/// One version's new values of some columns (`file.field_ids`) of the rows at `offsets`.
#[derive(Debug, Clone, PartialEq)]
pub struct RowPatch {
    /// The new values: one row per patched offset, in offset order, only the changed
    /// columns, in natal's data-file form (Parquet tagged by field id, with statistics).
    pub file: DataFile,
    /// The offsets of the fragment's rows it changes.
    pub offsets: Arc<RoaringBitmap>,
    /// The version that wrote it.
    pub version: u64,
}

impl RowPatch {
    /// Whether it holds new values of field `field_id`.
    pub fn holds(&self, field_id: FieldId) -> bool {
        self.file.field_ids.contains(&field_id)
    }

    /// Whether it holds a new value of any of `field_ids`.
    pub fn holds_any(&self, field_ids: &[FieldId]) -> bool {
        field_ids.iter().any(|&id| self.holds(id))
    }
}

/// The patches of fragment `fragment` (of `physical_rows` rows), checked against it: a
/// patch that names an offset past the fragment's end, holds another number of rows than
/// offsets, or no column, is the manifest's corruption.
pub(super) fn row_patches_from_proto(
    raw: Vec<proto::RowPatch>,
    (fragment, physical_rows): (u32, u32),
    path: &str,
) -> Result<Vec<RowPatch>> {
    let corrupt = |reason: &str| Error::corrupt(path, format!("fragment {fragment}: {reason}"));
    let mut previous_version = 0;
    raw.into_iter()
        .map(|patch| {
            let file = patch
                .file
                .ok_or_else(|| corrupt("a row patch without its file"))?;
            let file = super::convert_data_file::data_file_from_proto(file)?;
            let offsets = RoaringBitmap::deserialize_from(patch.offsets.as_slice())
                .map_err(|_| corrupt("a row patch's offsets do not decode"))?;
            if offsets.is_empty() || file.field_ids.is_empty() {
                return Err(corrupt("an empty row patch"));
            }
            if offsets.max().is_some_and(|last| last >= physical_rows) {
                return Err(corrupt("a row patch names a row past the fragment's end"));
            }
            if offsets.len() != file.row_count {
                return Err(corrupt(
                    "a row patch holds another number of rows than it names",
                ));
            }
            let mut ids = file.field_ids.clone();
            ids.sort_unstable();
            if ids.windows(2).any(|w| w[0] == w[1]) {
                return Err(corrupt("a row patch names a column twice"));
            }
            // Oldest first: a later patch of a cell wins.
            if patch.version == 0 || patch.version < previous_version {
                return Err(corrupt("row patches out of version order"));
            }
            previous_version = patch.version;
            Ok(RowPatch {
                file,
                offsets: Arc::new(offsets),
                version: patch.version,
            })
        })
        .collect()
}

pub(super) fn row_patch_to_proto(patch: &RowPatch) -> proto::RowPatch {
    let mut offsets = Vec::with_capacity(patch.offsets.serialized_size());
    // Writing into a Vec cannot fail.
    let _ = patch.offsets.serialize_into(&mut offsets);
    proto::RowPatch {
        file: Some(super::convert_data_file::data_file_to_proto(&patch.file)),
        offsets,
        version: patch.version,
    }
}
