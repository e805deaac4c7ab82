//! Blob values read as references, for rows a rewrite writes back (seed 003: "any rewrite
//! that keeps a value unchanged" reuses it). A scan asked for [`BlobReferences`] returns,
//! in place of a value's bytes, a small *reference*: for an external value, the object's URI
//! and range (`blob_external`); for a value in one of the table's sidecars, the table's
//! uuid, the physical sidecar (directory and id), its kind and range. Written back to the
//! same table, a stored reference becomes a descriptor whose blob id the data file's reuse
//! index maps to that sidecar: 0 payload bytes copied.
//!
//! Like external references, a stored reference carries a tag keyed by the process's secret,
//! so bytes a user stores can never pass for one; and it names its table, so a reference
//! carried into another table is refused instead of naming a sidecar that table lacks.

use std::hash::BuildHasher;

use super::external::secret;
use crate::error::{Error, Result};
use crate::format::{BlobKind, TablePath};

/// How a scan returns blob values that are not inline bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BlobReferences {
    /// Every value as its bytes.
    #[default]
    None,
    /// External values as references to their objects: for rows written back anywhere (a
    /// copy into another table included), which keep those values external, never fetched.
    External,
    /// External values, and values in the table's own sidecars, as references: for rows
    /// written back to the same table (an UPDATE of other columns, MERGE), whose stored
    /// values stay in the sidecars they are in. A stored reference written to another
    /// table is refused.
    Stored,
}

impl BlobReferences {
    /// Whether external values come as references.
    pub(crate) fn external(self) -> bool {
        self != Self::None
    }
}

/// How a stored reference starts.
const MARKER: &[u8; 16] = b"natal:sto-blob\0\x01";
/// Marker, tag, physical id, kind, position, size and the table uuid's length.
const HEADER: usize = MARKER.len() + 16 + 4 + 1 + 8 + 8 + 2;

/// A value in one of a table's sidecars, as a stored reference names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredValue<'a> {
    /// The `table_uuid` of the table whose sidecar it is.
    pub table: &'a str,
    /// The sidecar's directory (a data file's stem) and its id there: the physical object.
    pub directory: &'a str,
    pub physical: u32,
    /// Packed or dedicated.
    pub kind: BlobKind,
    /// Where in the sidecar.
    pub position: u64,
    pub size: u64,
}

impl StoredValue<'_> {
    fn tag(&self) -> [u8; 16] {
        let [first, second] = secret();
        let fields = (
            self.table,
            self.directory,
            self.physical,
            self.kind.code(),
            self.position,
            self.size,
        );
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&first.hash_one(fields).to_le_bytes());
        out[8..].copy_from_slice(&second.hash_one((fields, MARKER)).to_le_bytes());
        out
    }

    /// The reference this process's writes take for it.
    pub(crate) fn reference(&self) -> Result<Vec<u8>> {
        if !matches!(self.kind, BlobKind::Packed | BlobKind::Dedicated) {
            return Err(Error::internal(
                "a stored reference to a value in no sidecar",
            ));
        }
        let table_len = u16::try_from(self.table.len())
            .map_err(|_| Error::internal("a table uuid too long for a blob reference"))?;
        let mut out = Vec::with_capacity(HEADER + self.table.len() + self.directory.len());
        out.extend_from_slice(MARKER);
        out.extend_from_slice(&self.tag());
        out.extend_from_slice(&self.physical.to_le_bytes());
        out.push(self.kind.code());
        out.extend_from_slice(&self.position.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&table_len.to_le_bytes());
        out.extend_from_slice(self.table.as_bytes());
        out.extend_from_slice(self.directory.as_bytes());
        Ok(out)
    }

    /// The sidecar's directory, as a table path.
    pub(crate) fn directory(&self) -> Result<TablePath> {
        TablePath::parse_based(self.directory)
    }
}

/// What a stored reference made by this process says; anything else (other bytes, a forged
/// or foreign tag) is `None`.
pub(crate) fn stored_reference(value: &[u8]) -> Option<StoredValue<'_>> {
    if value.len() < HEADER || !value.starts_with(MARKER) {
        return None;
    }
    let at = |start: usize, len: usize| value.get(start..start + len);
    let mut offset = MARKER.len() + 16;
    let mut take = |len: usize| {
        let bytes = at(offset, len);
        offset += len;
        bytes
    };
    let physical = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let kind = match take(1)?[0] {
        1 => BlobKind::Packed,
        2 => BlobKind::Dedicated,
        _ => return None,
    };
    let position = u64::from_le_bytes(take(8)?.try_into().ok()?);
    let size = u64::from_le_bytes(take(8)?.try_into().ok()?);
    let table_len = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
    let table = std::str::from_utf8(take(table_len)?).ok()?;
    let directory = std::str::from_utf8(value.get(HEADER + table_len..)?).ok()?;
    let stored = StoredValue {
        table,
        directory,
        physical,
        kind,
        position,
        size,
    };
    (value[MARKER.len()..MARKER.len() + 16] == stored.tag()).then_some(stored)
}

/// Whether `column` (of any type) holds a reference (one [`external_blob`] made, or a stored
/// value's, `blob_reference`): a value only a blob column can take.
pub(crate) fn holds_reference(column: &dyn arrow::array::Array) -> bool {
    use arrow::array::AsArray;
    use arrow::datatypes::DataType;
    let any = |mut values: Box<dyn Iterator<Item = Option<&[u8]>> + '_>| {
        values.any(|v| {
            v.is_some_and(|v| {
                super::external::external_reference(v).is_some() || stored_reference(v).is_some()
            })
        })
    };
    match column.data_type() {
        DataType::Binary => any(Box::new(column.as_binary::<i32>().iter())),
        DataType::LargeBinary => any(Box::new(column.as_binary::<i64>().iter())),
        DataType::BinaryView => any(Box::new(column.as_binary_view().iter())),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value() -> StoredValue<'static> {
        StoredValue {
            table: "5b0c6f0e-uuid",
            directory: "data/abc",
            physical: 3,
            kind: BlobKind::Packed,
            position: 100,
            size: 70_000,
        }
    }

    #[test]
    fn references_read_back_and_altered_or_forged_bytes_never_pass_for_one() {
        let made = value().reference().unwrap();
        assert_eq!(stored_reference(&made), Some(value()));
        let dedicated = StoredValue {
            kind: BlobKind::Dedicated,
            position: 0,
            ..value()
        };
        let other = dedicated.reference().unwrap();
        assert_eq!(stored_reference(&other), Some(dedicated));
        // Any byte changed (the tag, the id, the kind, the range, the table, the
        // directory), cut short, or only the marker: bytes, not a reference.
        for at in MARKER.len()..made.len() {
            let mut altered = made.clone();
            altered[at] ^= 1;
            assert_eq!(stored_reference(&altered), None, "byte {at} altered");
        }
        for len in 0..made.len() {
            assert_eq!(stored_reference(&made[..len]), None, "cut to {len}");
        }
        // An external reference is not a stored one.
        let external = crate::io::external_blob("s3://b/k", None).unwrap();
        assert_eq!(stored_reference(&external), None);
    }
}
