//! Conversion between the generated protobuf types and the domain model, and the manifest's
//! byte envelope. Proto3 sentinels end here.
//!
//! A manifest file is `MAGIC | protobuf | crc32(protobuf) as u32 LE`. The checksum makes a
//! torn or bit-flipped manifest a [`Error::Corrupt`] instead of a silently different table.

use std::sync::Arc;

use prost::Message;

use super::convert_data_file::{data_file_from_proto, data_file_to_proto};
use super::convert_index::{indexes_from_proto, indexes_to_proto};
use super::convert_row_ids::{sequence_from_proto, sequence_to_proto};
use super::envelope::{seal, unseal};
use super::proto;
use super::*;
use crate::error::{Error, FlagKind, Result};
use crate::rowid::FragmentId;

const MAGIC: &[u8; 8] = b"NATALMF1";
impl Manifest {
    /// Encodes the manifest into its file bytes.
    pub fn encode(&self) -> Vec<u8> {
        seal(MAGIC, &proto::Manifest::from(self).encode_to_vec())
    }

    /// Decodes and validates a manifest file. Refuses unknown reader flags and format
    /// versions; writer flags are checked by [`Manifest::check_writable`].
    ///
    /// # Errors
    /// [`Error::Corrupt`] for bad magic, checksum, protobuf or inconsistent contents;
    /// [`Error::UnsupportedFeature`] / [`Error::UnsupportedFormatVersion`];
    /// [`Error::PathEscapesTable`] for a path outside the table.
    pub fn decode(path: &str, bytes: &[u8]) -> Result<Unresolved<Self>> {
        let body = unseal(MAGIC, path, bytes, "manifest")?;
        let raw = proto::Manifest::decode(body)
            .map_err(|e| Error::corrupt(path, format!("undecodable protobuf: {e}")))?;
        if raw.format_version != FORMAT_VERSION {
            return Err(Error::UnsupportedFormatVersion {
                path: path.to_string(),
                found: raw.format_version,
                supported: FORMAT_VERSION,
            });
        }
        let unknown = raw.reader_feature_flags & !flags::KNOWN_READER;
        if unknown != 0 {
            return Err(Error::UnsupportedFeature {
                path: path.to_string(),
                kind: FlagKind::Reader,
                flag: unknown,
                action: "read",
            });
        }
        let files = row_id_files_of(&raw.fragments, path)?;
        let bases = raw.bases.iter().map(base_from_proto).collect();
        let path = path.to_string();
        let unresolved = Unresolved::new(files, move |read| {
            let mut manifest = manifest_from_proto(raw, &path, read)?;
            // Fragments kept in segment files link captures once they are loaded.
            if manifest.fragment_segments.is_empty() {
                manifest.link_change_data(&path)?;
            }
            manifest.validate(&path)?;
            Ok(manifest)
        });
        Ok(unresolved.with_bases(bases))
    }

    /// Refuses to write on top of a manifest whose writer flags this client does not know.
    pub fn check_writable(&self, path: &str) -> Result<()> {
        let unknown = self.unknown_writer_flags;
        if unknown != 0 {
            return Err(Error::UnsupportedFeature {
                path: path.to_string(),
                kind: FlagKind::Writer,
                flag: unknown,
                action: "write",
            });
        }
        Ok(())
    }
}

fn manifest_from_proto(raw: proto::Manifest, path: &str, read: &RowIdsRead) -> Result<Manifest> {
    let corrupt = |reason: &str| Error::corrupt(path, reason);
    let schema = raw.schema.ok_or_else(|| corrupt("missing schema"))?;
    let schema = super::convert_schema::schema_from_proto(schema, path)?;
    let fragments = raw
        .fragments
        .into_iter()
        .map(|f| fragment_from_proto(f, path, read))
        .collect::<Result<Vec<_>>>()?;
    let fragment_segments = raw
        .fragment_segments
        .into_iter()
        .map(|s| {
            let first = s.first_fragment_id;
            let what = format!("the segment from fragment {first}");
            let named =
                |name, stored, version| named_path(name, first, stored, version, (path, &what));
            Ok::<_, Error>(FragmentSegment {
                path: named(DerivedName::SEGMENT, s.path, (s.version, s.attempt))?,
                first_fragment_id: first,
                last_fragment_id: s.last_fragment_id,
                fragment_count: s.fragment_count,
                size_bytes: s.size_bytes,
                patch: s
                    .patch
                    .map(|p| {
                        Ok::<_, Error>(SegmentPatch {
                            path: named(DerivedName::PATCH, p.path, (p.version, p.attempt))?,
                            fragment_count: p.fragment_count,
                            size_bytes: p.size_bytes,
                        })
                    })
                    .transpose()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if !fragment_segments.is_empty() && !fragments.is_empty() {
        return Err(corrupt("fragments both inline and in segment files"));
    }
    for pair in fragment_segments.windows(2) {
        if pair[0].last_fragment_id >= pair[1].first_fragment_id {
            return Err(corrupt("fragment segments overlap or are out of order"));
        }
    }
    let (change_data, unlinked_change_data) = change_data_from_proto(raw.change_data, path, read)?;
    let transaction = raw
        .transaction
        .ok_or_else(|| corrupt("missing transaction"))?;
    let operation = match proto::transaction::Operation::try_from(transaction.operation) {
        Ok(proto::transaction::Operation::Create) => Operation::Create,
        Ok(proto::transaction::Operation::Append) => Operation::Append,
        Ok(proto::transaction::Operation::Overwrite) => Operation::Overwrite,
        Ok(proto::transaction::Operation::Delete) => Operation::Delete,
        Ok(proto::transaction::Operation::Update) => Operation::Update,
        Ok(proto::transaction::Operation::Compact) => Operation::Compact,
        Ok(proto::transaction::Operation::Checkpoint) => Operation::Checkpoint,
        Ok(proto::transaction::Operation::Restore) => Operation::Restore,
        Ok(proto::transaction::Operation::CreateIndex) => Operation::CreateIndex,
        Ok(proto::transaction::Operation::DropIndex) => Operation::DropIndex,
        Ok(proto::transaction::Operation::AlterSchema) => Operation::AlterSchema,
        Ok(proto::transaction::Operation::Clone) => Operation::Clone,
        Ok(proto::transaction::Operation::Patch) => Operation::Patch,
        _ => return Err(corrupt("unknown transaction operation")),
    };
    Ok(Manifest {
        version: raw.version,
        parent_version: raw.parent_version,
        timestamp_micros: raw.timestamp_micros,
        table_uuid: raw.table_uuid,
        schema,
        fragments,
        fragment_segments,
        max_fragment_id: raw.max_fragment_id,
        // Unknown reader flags were refused before; the known ones follow the contents.
        unknown_reader_flags: 0,
        unknown_writer_flags: raw.writer_feature_flags & !flags::KNOWN_WRITER,
        transaction: TransactionSummary {
            operation,
            read_version: transaction.read_version,
            rows_added: transaction.rows_added,
            rows_removed: transaction.rows_removed,
            fragments_removed: transaction.fragments_removed,
            fragments_added: transaction.fragments_added,
            uuid: transaction.uuid,
            origin: transaction.origin.map(|o| CloneOrigin {
                table: o.table,
                version: o.version,
                deep: o.deep,
            }),
        },
        relocation_checkpoint: raw
            .relocation_checkpoint
            .map(|c| {
                Ok::<_, Error>(CheckpointRef {
                    path: TablePath::in_base(c.base, TablePath::parse(&c.path)?),
                    covers_fragments_through: c.covers_fragments_through,
                    entry_count: c.entry_count,
                    file_size_bytes: c.file_size_bytes,
                })
            })
            .transpose()?,
        max_rows_per_fragment: u32::try_from(raw.max_rows_per_fragment)
            .ok()
            .and_then(std::num::NonZeroU32::new)
            .ok_or_else(|| {
                corrupt(&format!(
                    "max_rows_per_fragment {} is not in 1..=u32::MAX",
                    raw.max_rows_per_fragment
                ))
            })?,
        indexes: indexes_from_proto(raw.indexes.unwrap_or_default(), path)?,
        bases: raw.bases.iter().map(base_from_proto).collect(),
        change_data_feed: raw.change_data_feed,
        patch_max_share: match raw.patch_max_share {
            Some(share) if !is_patch_share(share) => {
                return Err(corrupt(&format!("patch_max_share {share} is not in 0..=1")));
            }
            share => share,
        },
        change_data,
        unlinked_change_data,
    })
}

fn base_from_proto(raw: &proto::StorageBase) -> StorageBase {
    StorageBase {
        id: raw.id,
        path: raw.path.clone(),
        store_url: raw.store_url.clone(),
    }
}

/// The row-id files `fragments` name, each with the ids it must hold.
pub(super) fn row_id_files_of(
    fragments: &[proto::Fragment],
    path: &str,
) -> Result<Vec<RowIdsToRead>> {
    fragments
        .iter()
        .filter_map(|f| f.row_id_file.as_ref().map(|file| (f, file)))
        .map(|(f, file)| {
            Ok(RowIdsToRead {
                file: RowIdFile {
                    path: TablePath::in_base(file.base, TablePath::parse(&file.path)?),
                    size_bytes: file.size_bytes,
                },
                rows: physical_rows_of(f, path)?,
            })
        })
        .collect()
}

fn physical_rows_of(raw: &proto::Fragment, path: &str) -> Result<u32> {
    u32::try_from(raw.physical_rows)
        .map_err(|_| Error::corrupt(path, format!("fragment {} has too many rows", raw.id)))
}

/// A fragment from its protobuf, its stored row ids taken from `read` (see `unresolved.rs`).
pub(super) fn fragment_from_proto(
    raw: proto::Fragment,
    path: &str,
    read: &RowIdsRead,
) -> Result<Fragment> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    let physical_rows = physical_rows_of(&raw, path)?;
    let files = (raw.files.into_iter())
        .map(data_file_from_proto)
        .collect::<Result<_>>()?;
    let patches =
        super::row_patch::row_patches_from_proto(raw.row_patches, (raw.id, physical_rows), path)?;
    let deletion = match raw.deletion_file {
        None if !raw.deletion_deltas.is_empty() => {
            return Err(corrupt(format!(
                "fragment {} has deletion deltas but no deletion file",
                raw.id
            )))
        }
        None => None,
        Some(first) => deletion_from_proto(
            raw.id,
            std::iter::once(first).chain(raw.deletion_deltas).collect(),
            path,
        )?,
    };
    let row_ids = raw
        .row_id_sequence
        .map(|s| {
            sequence_from_proto(s)
                .map(Arc::new)
                .map_err(|r| corrupt(format!("fragment {}: {r}", raw.id)))
        })
        .transpose()?;
    let row_ids_file = raw
        .row_id_file
        .map(|f| {
            let path = TablePath::in_base(f.base, TablePath::parse(&f.path)?);
            let sequence = read.get(&path).cloned().ok_or_else(|| {
                Error::internal(format!(
                    "row-id file {path} was not read before its fragment"
                ))
            })?;
            let file = RowIdFile {
                path,
                size_bytes: f.size_bytes,
            };
            Ok::<_, Error>((file, sequence))
        })
        .transpose()?;
    let row_ids = match (row_ids, row_ids_file) {
        (None, None) => FragmentRowIds::Native,
        (Some(sequence), None) => FragmentRowIds::Inline(sequence),
        (None, Some((file, sequence))) => FragmentRowIds::Stored { file, sequence },
        (Some(_), Some(_)) => {
            return Err(corrupt(format!(
                "fragment {} has both an inline and a stored row-id sequence",
                raw.id
            )))
        }
    };
    let lineage = super::lineage::lineage_from_proto(
        (
            raw.written_in_version,
            raw.row_created_versions,
            raw.row_updated_versions,
        ),
        physical_rows,
    );
    let lineage = match (lineage, raw.lineage_file) {
        (Ok(lineage), Some(stored)) => {
            let file = LineageFile {
                path: TablePath::in_base(stored.base, TablePath::parse(&stored.path)?),
                size_bytes: stored.size_bytes,
                bounds: None,
            };
            super::lineage::with_updated_file(lineage, file, &stored)
        }
        (lineage, _) => lineage,
    }
    .map_err(|reason| corrupt(format!("fragment {}: {reason}", raw.id)))?;
    Ok(Fragment {
        id: raw.id,
        files,
        deletion,
        physical_rows,
        row_ids,
        lineage,
        patches,
    })
}

pub(super) fn fragment_to_proto(f: &Fragment) -> proto::Fragment {
    let (written_in_version, row_created_versions, row_updated_versions) =
        super::lineage::lineage_to_proto(&f.lineage);
    proto::Fragment {
        written_in_version,
        row_created_versions,
        row_updated_versions,
        lineage_file: (f.lineage.updated_file.as_ref()).map(super::lineage::lineage_file_to_proto),
        id: f.id,
        files: f.files.iter().map(data_file_to_proto).collect(),
        row_patches: (f.patches.iter())
            .map(super::row_patch::row_patch_to_proto)
            .collect(),
        deletion_file: f
            .deletion
            .as_ref()
            .map(|d| deletion_file_to_proto(f.id, d.first())),
        deletion_deltas: f
            .deletion
            .as_ref()
            .map(|d| {
                d.deltas()
                    .iter()
                    .map(|file| deletion_file_to_proto(f.id, file))
                    .collect()
            })
            .unwrap_or_default(),
        physical_rows: f.physical_rows as u64,
        row_id_sequence: match &f.row_ids {
            FragmentRowIds::Inline(sequence) => Some(sequence_to_proto(sequence)),
            _ => None,
        },
        row_id_file: f.row_ids.file().map(|r| proto::RowIdFile {
            path: r.path.split_base().1.to_string(),
            size_bytes: r.size_bytes,
            base: r.path.split_base().0,
        }),
    }
}

/// `fragment`'s deletion vector from its files, oldest first; `None` for no files.
pub(super) fn deletion_from_proto(
    fragment: FragmentId,
    files: Vec<proto::DeletionFile>,
    path: &str,
) -> Result<Option<DeletionVector>> {
    let files = files
        .into_iter()
        .map(|d| {
            if d.moved_rows > d.deleted_rows {
                return Err(Error::corrupt(
                    path,
                    format!(
                        "deletion file {} counts more moved rows than deleted rows",
                        d.path
                    ),
                ));
            }
            let within = named_path(
                DerivedName::DELETION,
                fragment,
                d.path,
                (d.version, d.attempt),
                (path, &format!("a deletion file of fragment {fragment}")),
            )?;
            Ok(DeletionFile {
                path: TablePath::in_base(d.base, within),
                deleted_rows: d.deleted_rows,
                moved_rows: d.moved_rows,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DeletionVector::from_files(files))
}

pub(super) fn deletion_to_proto(
    fragment: FragmentId,
    deletion: Option<&DeletionVector>,
) -> Vec<proto::DeletionFile> {
    deletion
        .map(|d| {
            d.files()
                .map(|file| deletion_file_to_proto(fragment, file))
                .collect()
        })
        .unwrap_or_default()
}

/// A stored path: the path itself, or the version and attempt of a derived name; exactly one
/// must be present. `what` names the file in the error (read from `file`).
fn named_path(
    name: DerivedName,
    owner: u32,
    path: String,
    (version, attempt): (Option<u64>, u32),
    (file, what): (&str, &dyn std::fmt::Display),
) -> Result<TablePath> {
    let wrong = |reason: &str| Error::corrupt(file, format!("{what} has {reason}"));
    match (path.is_empty(), version) {
        (true, Some(version)) => Ok(name.path(owner, version, attempt)),
        (false, None) => TablePath::parse(&path),
        (false, Some(_)) => Err(wrong("both a path and a version")),
        (true, None) => Err(wrong("neither a path nor a version")),
    }
}

/// What [`named_path`] reads back: an empty path and the version and attempt when `path` is
/// a derived name of `owner`.
fn name_to_proto(name: DerivedName, owner: u32, path: &TablePath) -> (String, Option<u64>, u32) {
    match name.parse(path, owner) {
        Some((version, attempt)) => (String::new(), Some(version), attempt),
        None => (path.split_base().1.to_string(), None, 0),
    }
}

fn deletion_file_to_proto(fragment: FragmentId, file: &DeletionFile) -> proto::DeletionFile {
    let (path, version, attempt) = name_to_proto(DerivedName::DELETION, fragment, &file.path);
    proto::DeletionFile {
        path,
        deleted_rows: file.deleted_rows,
        moved_rows: file.moved_rows,
        version,
        attempt,
        base: file.path.split_base().0,
    }
}

/// Captured fragments and the (captured, fragment) pairs whose ids are still to link.
type DecodedChangeData = (Option<Vec<Fragment>>, Vec<(FragmentId, FragmentId)>);

/// The change data of a manifest's protobuf, its shared ids not yet linked.
fn change_data_from_proto(
    raw: Option<proto::ChangeData>,
    path: &str,
    read: &RowIdsRead,
) -> Result<DecodedChangeData> {
    let Some(raw) = raw else {
        return Ok((None, Vec::new()));
    };
    let unlinked = (raw.shared_ids.iter())
        .map(|s| (s.captured, s.fragment))
        .collect();
    let fragments = (raw.fragments.into_iter())
        .map(|f| fragment_from_proto(f, path, read))
        .collect::<Result<Vec<_>>>()?;
    Ok((Some(fragments), unlinked))
}

/// A version's change data: a captured fragment whose row ids are those of a fragment the
/// version added is stored without them, naming that fragment.
fn change_data_to_proto(m: &Manifest, captured: &[Fragment]) -> proto::ChangeData {
    let shared = m.shared_change_data_ids();
    let fragments = (captured.iter())
        .map(|c| match shared.iter().any(|&(id, _)| id == c.id) {
            true => fragment_to_proto(&Fragment {
                row_ids: FragmentRowIds::Native,
                ..c.clone()
            }),
            false => fragment_to_proto(c),
        })
        .collect();
    let shared_ids = (shared.into_iter())
        .map(|(captured, fragment)| proto::SharedIds { captured, fragment })
        .collect();
    proto::ChangeData {
        fragments,
        shared_ids,
    }
}

impl From<&Manifest> for proto::Manifest {
    fn from(m: &Manifest) -> Self {
        use proto::transaction::Operation as Op;
        let flags = m.feature_flags();
        proto::Manifest {
            version: m.version,
            parent_version: m.parent_version,
            timestamp_micros: m.timestamp_micros,
            table_uuid: m.table_uuid.clone(),
            schema: Some(super::convert_schema::schema_to_proto(&m.schema)),
            // Fragments stored in segment files are not repeated inline.
            fragments: if m.fragment_segments.is_empty() {
                m.fragments.iter().map(fragment_to_proto).collect()
            } else {
                Vec::new()
            },
            fragment_segments: m
                .fragment_segments
                .iter()
                .map(|s| {
                    let first = s.first_fragment_id;
                    let (path, version, attempt) =
                        name_to_proto(DerivedName::SEGMENT, first, &s.path);
                    proto::FragmentSegment {
                        path,
                        version,
                        attempt,
                        first_fragment_id: first,
                        last_fragment_id: s.last_fragment_id,
                        fragment_count: s.fragment_count,
                        size_bytes: s.size_bytes,
                        patch: s.patch.as_ref().map(|p| {
                            let (path, version, attempt) =
                                name_to_proto(DerivedName::PATCH, first, &p.path);
                            proto::SegmentPatch {
                                path,
                                version,
                                attempt,
                                fragment_count: p.fragment_count,
                                size_bytes: p.size_bytes,
                            }
                        }),
                    }
                })
                .collect(),
            max_fragment_id: m.max_fragment_id,
            reader_feature_flags: flags.0,
            writer_feature_flags: flags.1,
            format_version: FORMAT_VERSION,
            transaction: Some(proto::Transaction {
                operation: match m.transaction.operation {
                    Operation::Create => Op::Create,
                    Operation::Append => Op::Append,
                    Operation::Overwrite => Op::Overwrite,
                    Operation::Delete => Op::Delete,
                    Operation::Update => Op::Update,
                    Operation::Compact => Op::Compact,
                    Operation::Checkpoint => Op::Checkpoint,
                    Operation::Restore => Op::Restore,
                    Operation::CreateIndex => Op::CreateIndex,
                    Operation::DropIndex => Op::DropIndex,
                    Operation::AlterSchema => Op::AlterSchema,
                    Operation::Clone => Op::Clone,
                    Operation::Patch => Op::Patch,
                } as i32,
                read_version: m.transaction.read_version,
                rows_added: m.transaction.rows_added,
                rows_removed: m.transaction.rows_removed,
                fragments_removed: m.transaction.fragments_removed.clone(),
                fragments_added: m.transaction.fragments_added.clone(),
                uuid: m.transaction.uuid.clone(),
                origin: m.transaction.origin.as_ref().map(|o| proto::CloneOrigin {
                    table: o.table.clone(),
                    version: o.version,
                    deep: o.deep,
                }),
            }),
            relocation_checkpoint: m.relocation_checkpoint.as_ref().map(|c| {
                proto::RelocationCheckpoint {
                    path: c.path.split_base().1.to_string(),
                    base: c.path.split_base().0,
                    covers_fragments_through: c.covers_fragments_through,
                    entry_count: c.entry_count,
                    file_size_bytes: c.file_size_bytes,
                }
            }),
            max_rows_per_fragment: u64::from(m.max_rows_per_fragment.get()),
            indexes: (m.indexes != IndexSection::default()).then(|| indexes_to_proto(&m.indexes)),
            bases: (m.bases.iter())
                .map(|b| proto::StorageBase {
                    id: b.id,
                    path: b.path.clone(),
                    store_url: b.store_url.clone(),
                })
                .collect(),
            change_data_feed: m.change_data_feed,
            patch_max_share: m.patch_max_share,
            change_data: m
                .change_data
                .as_ref()
                .map(|captured| change_data_to_proto(m, captured)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, version: Option<u64>, attempt: u32) -> proto::DeletionFile {
        proto::DeletionFile {
            path: path.into(),
            deleted_rows: 1,
            moved_rows: 0,
            version,
            attempt,
            base: 0,
        }
    }

    #[test]
    fn deletion_files_name_a_path_or_a_version_never_both() {
        let paths = |files| {
            deletion_from_proto(7, files, "m").map(|d| {
                d.map(|d| {
                    d.files()
                        .map(|f| f.path.as_str().to_string())
                        .collect::<Vec<_>>()
                })
            })
        };
        assert_eq!(
            paths(vec![
                file("", Some(12), 0),
                file("", Some(12), 3),
                file("_deletions/x.bin", None, 0)
            ])
            .unwrap(),
            Some(vec![
                "_deletions/7-12.bin".to_string(),
                "_deletions/7-12-3.bin".into(),
                "_deletions/x.bin".into()
            ])
        );
        for bad in [file("_deletions/x.bin", Some(12), 0), file("", None, 0)] {
            let err = paths(vec![bad]).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        }
        let escaping = paths(vec![file("../x.bin", None, 0)]).unwrap_err();
        assert!(
            matches!(escaping, Error::PathEscapesTable { .. }),
            "{escaping}"
        );
    }
}
