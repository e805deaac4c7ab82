//! Writing a Blob Reuse Index (seed 003): a data file being written takes rows whose blob
//! values are already stored (a compaction's, a tiered merge's) as their descriptors, and
//! instead of copying the payloads gives each sidecar they name a local id of its own, mapped
//! to the physical sidecar. A value in a sidecar that was itself reused maps to the physical
//! object, never to the file that reused it.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StructArray, UInt32Array};
use arrow::datatypes::{UInt32Type, UInt64Type, UInt8Type};

use crate::error::{Error, Result};
use crate::format::{
    blob_descriptor, BlobKind, BlobReuseIndex, BlobReuseSource, DataFile, TablePath,
};

/// Packed sidecars a compaction copies the live values out of instead of reusing them, by
/// directory and physical id (their live bytes fell below the threshold).
pub type RepackSidecars = HashSet<(TablePath, u32)>;

/// A value a rewrite copies (its sidecar is repacked): its row, sidecar and byte range.
pub(in crate::io) type Copied = (usize, TablePath, Range<u64>);

/// The sidecars a data file being written reuses, by where they are, with their local ids.
#[derive(Debug, Default)]
pub(in crate::io) struct ReusedSidecars {
    /// (directory, physical id) → the local id given to it.
    local: BTreeMap<(TablePath, u32), u32>,
}

impl ReusedSidecars {
    /// `descriptors` (a blob column as the data file `source` holds it, inline bytes and
    /// all) as the file being written holds them: each sidecar value's blob id replaced by
    /// the local id of its physical sidecar, a new id (from `next_id`) the first time one is
    /// seen. Inline, external and NULL values are kept as they are. A value in a sidecar of
    /// `repack` is not mapped: it is returned among the values to copy (its descriptor left
    /// for the caller to replace).
    pub(in crate::io) fn remap(
        &mut self,
        descriptors: &ArrayRef,
        source: &DataFile,
        repack: &RepackSidecars,
        mut next_id: impl FnMut() -> Result<u32>,
    ) -> Result<(ArrayRef, Vec<Copied>)> {
        let corrupt = || {
            Error::corrupt(
                source.path.as_str(),
                "a blob column read for reuse did not come as whole descriptors",
            )
        };
        let described = descriptors.as_struct_opt().ok_or_else(corrupt)?;
        let columns = described.columns();
        if columns.len() <= blob_descriptor::INLINE {
            return Err(corrupt());
        }
        let kinds =
            (columns[blob_descriptor::KIND].as_primitive_opt::<UInt8Type>()).ok_or_else(corrupt)?;
        let ids = (columns[blob_descriptor::BLOB_ID].as_primitive_opt::<UInt32Type>())
            .ok_or_else(corrupt)?;
        let positions = (columns[blob_descriptor::POSITION].as_primitive_opt::<UInt64Type>())
            .ok_or_else(corrupt)?;
        let sizes = (columns[blob_descriptor::SIZE].as_primitive_opt::<UInt64Type>())
            .ok_or_else(corrupt)?;
        let mut copied = Vec::new();
        let in_sidecar = [BlobKind::Packed.code(), BlobKind::Dedicated.code()];
        let mut local_ids = Vec::with_capacity(described.len());
        for row in 0..described.len() {
            let id = ids.value(row);
            if described.is_null(row) || !in_sidecar.contains(&kinds.value(row)) {
                local_ids.push(id);
                continue;
            }
            let place = source.sidecar_location(id);
            if repack.contains(&place) {
                let (start, size) = (positions.value(row), sizes.value(row));
                let end = start.checked_add(size).ok_or_else(corrupt)?;
                copied.push((row, source.sidecar(id), start..end));
                local_ids.push(id);
                continue;
            }
            local_ids.push(self.local_id(place, &mut next_id)?);
        }
        let mut columns = columns.to_vec();
        columns[blob_descriptor::BLOB_ID] = Arc::new(UInt32Array::from(local_ids));
        let remapped = StructArray::try_new(
            described.fields().clone(),
            columns,
            described.nulls().cloned(),
        )?;
        Ok((Arc::new(remapped), copied))
    }

    /// The local id of the sidecar `place` (directory, physical id): a new one (from
    /// `next_id`) the first time it is seen.
    pub(in crate::io) fn local_id(
        &mut self,
        place: (TablePath, u32),
        mut next_id: impl FnMut() -> Result<u32>,
    ) -> Result<u32> {
        if let Some(&local) = self.local.get(&place) {
            return Ok(local);
        }
        let local = next_id()?;
        self.local.insert(place, local);
        Ok(local)
    }

    /// The index of what was reused: one source per directory, in physical id order.
    pub(in crate::io) fn index(&self) -> Result<Option<BlobReuseIndex>> {
        if self.local.is_empty() {
            return Ok(None);
        }
        let mut sources: Vec<BlobReuseSource> = Vec::new();
        for ((directory, physical), &local) in &self.local {
            if sources.last().is_none_or(|s| s.directory != *directory) {
                sources.push(BlobReuseSource {
                    directory: directory.clone(),
                    local_ids: Vec::new(),
                    physical_ids: Vec::new(),
                });
            }
            if let Some(source) = sources.last_mut() {
                source.local_ids.push(local);
                source.physical_ids.push(*physical);
            }
        }
        BlobReuseIndex::new(sources)
            .map(Some)
            .map_err(Error::internal)
    }
}
