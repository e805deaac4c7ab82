//! The files a manifest points to for what would make it grow with history: `_rowids/`
//! (a fragment's row-id sequence), `_lineage/` (its rows' versions) and `_fragments/` (a
//! segment of the fragment list). All are sealed protobuf bodies (`envelope.rs`) and
//! immutable once written.

use bytes::Bytes;
use prost::Message;

use super::convert::{
    deletion_from_proto, deletion_to_proto, fragment_from_proto, fragment_to_proto, row_id_files_of,
};
use super::convert_row_ids::{sequence_from_proto, sequence_to_proto};
use super::envelope::{seal, unseal};
use super::lineage::{lineage_from_proto, runs_to_proto};
use super::{proto, Fragment, FragmentSegment, Lineage, SegmentPatch, Unresolved};
use crate::error::{Error, Result};
use crate::rowid::{FragmentId, RowIdSequence};

const ROW_ID_MAGIC: &[u8; 8] = b"NATALRI1";

/// Sequences whose encoding is larger than this are written to a `_rowids/` file rather
/// than inline, so that manifests grow with the fragment count, not with history.
pub const ROW_ID_INLINE_LIMIT: usize = 4096;

impl RowIdSequence {
    /// The size of this sequence's protobuf encoding.
    pub fn encoded_len(&self) -> usize {
        sequence_to_proto(self).encoded_len()
    }
}

/// The bytes of a `_rowids/` file holding `sequence`.
pub fn encode_row_id_file(sequence: &RowIdSequence) -> Vec<u8> {
    seal(ROW_ID_MAGIC, &sequence_to_proto(sequence).encode_to_vec())
}

/// Decodes a `_rowids/` file and checks it holds `expected_rows` ids.
///
/// # Errors
/// [`Error::Corrupt`] for bad magic, checksum, protobuf, segments or length.
pub fn decode_row_id_file(path: &str, bytes: &Bytes, expected_rows: u32) -> Result<RowIdSequence> {
    // Decoded from the file's own buffer: packed ids are slices of it, not copies.
    let body = bytes.slice_ref(unseal(ROW_ID_MAGIC, path, bytes, "row-id file")?);
    let raw = proto::RowIdSequence::decode(body)
        .map_err(|e| Error::corrupt(path, format!("undecodable protobuf: {e}")))?;
    let sequence = sequence_from_proto(raw).map_err(|r| Error::corrupt(path, r))?;
    if sequence.len() != expected_rows as usize {
        return Err(Error::corrupt(
            path,
            format!(
                "holds {} row ids for a fragment of {expected_rows} rows",
                sequence.len()
            ),
        ));
    }
    Ok(sequence)
}

const LINEAGE_MAGIC: &[u8; 8] = b"NATALLN1";

/// Last-change versions whose encoding is larger than this are written to a `_lineage/`
/// file rather than inline: every open reads the manifest, and only lineage reads need them.
pub const LINEAGE_INLINE_LIMIT: usize = 4096;

/// The bytes of a `_lineage/` file holding `lineage`'s last-change runs.
pub fn encode_lineage_file(lineage: &Lineage) -> Vec<u8> {
    let body = proto::RowLineage {
        row_updated_versions: lineage.row_updated.as_deref().map(runs_to_proto),
    };
    seal(LINEAGE_MAGIC, &body.encode_to_vec())
}

/// Decodes the `_lineage/` file of a fragment of `rows` rows whose manifest lineage is
/// `stored`, giving that lineage with its last-change versions at hand.
///
/// # Errors
/// [`Error::Corrupt`] for bad magic, checksum or protobuf, runs that do not cover the
/// fragment's rows, or versions outside the bounds the manifest keeps.
pub fn decode_lineage_file(
    path: &str,
    bytes: &[u8],
    stored: &Lineage,
    rows: u32,
) -> Result<Lineage> {
    let body = unseal(LINEAGE_MAGIC, path, bytes, "lineage file")?;
    let raw = proto::RowLineage::decode(body)
        .map_err(|e| Error::corrupt(path, format!("undecodable protobuf: {e}")))?;
    let Some(updated) = raw.row_updated_versions else {
        return Err(Error::corrupt(path, "holds no last-change versions"));
    };
    let runs = (stored.written_in, None, Some(updated));
    let read = lineage_from_proto(runs, rows).map_err(|r| Error::corrupt(path, r))?;
    (stored.with_updated(read.row_updated)).map_err(|r| Error::corrupt(path, r))
}

const SEGMENT_MAGIC: &[u8; 8] = b"NATALFS1";

/// Fragments per `_fragments/` segment file: a commit rewrites the segments it changes plus
/// the last, partly filled one, so smaller segments mean fewer bytes per commit and more
/// files per open.
pub const FRAGMENTS_PER_SEGMENT: usize = 16;

/// The bytes of a `_fragments/` file holding `fragments`.
pub fn encode_fragment_segment(fragments: &[Fragment]) -> Vec<u8> {
    let list = proto::FragmentList {
        fragments: fragments.iter().map(fragment_to_proto).collect(),
    };
    seal(SEGMENT_MAGIC, &list.encode_to_vec())
}

/// Decodes a `_fragments/` file and checks it holds what `segment` says; its fragments are
/// built once the row-id files they name are read.
///
/// # Errors
/// [`Error::Corrupt`] for bad magic, checksum or protobuf, or fragments other than the
/// segment's; [`Error::PathEscapesTable`] for a path outside the table.
pub fn decode_fragment_segment(
    segment: &FragmentSegment,
    bytes: &[u8],
) -> Result<Unresolved<Vec<Fragment>>> {
    let path = segment.path.as_str();
    let body = unseal(SEGMENT_MAGIC, path, bytes, "fragment segment")?;
    let raw = proto::FragmentList::decode(body)
        .map_err(|e| Error::corrupt(path, format!("undecodable protobuf: {e}")))?;
    let in_range = raw.fragments.first().map(|f| f.id) == Some(segment.first_fragment_id)
        && raw.fragments.last().map(|f| f.id) == Some(segment.last_fragment_id)
        && raw.fragments.len() == segment.fragment_count as usize;
    if !in_range {
        return Err(Error::corrupt(
            path,
            format!(
                "holds {} fragments, the manifest expects {} with ids {}..={}",
                raw.fragments.len(),
                segment.fragment_count,
                segment.first_fragment_id,
                segment.last_fragment_id
            ),
        ));
    }
    let files = row_id_files_of(&raw.fragments, path)?;
    let path = path.to_string();
    Ok(Unresolved::new(files, move |read| {
        raw.fragments
            .into_iter()
            .map(|f| fragment_from_proto(f, &path, read))
            .collect()
    }))
}

const PATCH_MAGIC: &[u8; 8] = b"NATALFP1";

/// The bytes of a segment patch: the deletions of `fragments`, each whole, by ascending id.
pub fn encode_segment_patch(fragments: &[&Fragment]) -> Vec<u8> {
    let patch = proto::DeletionPatch {
        fragments: fragments
            .iter()
            .map(|f| proto::PatchedDeletions {
                fragment_id: f.id,
                files: deletion_to_proto(f.id, f.deletion.as_ref()),
            })
            .collect(),
    };
    seal(PATCH_MAGIC, &patch.encode_to_vec())
}

/// Decodes a segment patch and lays it over `body`, the segment's fragments as its file holds
/// them.
///
/// # Errors
/// [`Error::Corrupt`] for bad magic, checksum or protobuf, another count of fragments than
/// the manifest says, or fragments out of order or not in the segment.
pub fn apply_segment_patch(
    patch: &SegmentPatch,
    bytes: &[u8],
    body: &[Fragment],
) -> Result<Vec<Fragment>> {
    let path = patch.path.as_str();
    let raw = proto::DeletionPatch::decode(unseal(PATCH_MAGIC, path, bytes, "segment patch")?)
        .map_err(|e| Error::corrupt(path, format!("undecodable protobuf: {e}")))?;
    if raw.fragments.len() != patch.fragment_count as usize {
        return Err(Error::corrupt(
            path,
            format!(
                "patches {} fragments, the manifest says {}",
                raw.fragments.len(),
                patch.fragment_count
            ),
        ));
    }
    let mut fragments = body.to_vec();
    let mut previous: Option<FragmentId> = None;
    for entry in raw.fragments {
        let id = entry.fragment_id;
        if previous.is_some_and(|p| p >= id) {
            return Err(Error::corrupt(path, "patched fragments out of order"));
        }
        previous = Some(id);
        let index = fragments.binary_search_by_key(&id, |f| f.id).map_err(|_| {
            Error::corrupt(path, format!("patches fragment {id}, not in its segment"))
        })?;
        // Counts against the fragment's rows are checked with the whole manifest.
        fragments[index].deletion = deletion_from_proto(id, entry.files, path)?;
    }
    Ok(fragments)
}
