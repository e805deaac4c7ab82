//! The Blob Reuse Index (seed 003, DESIGN.md §6): a data file's map from its local blob ids
//! to sidecars written for other data files, so a rewrite that keeps a value writes its
//! descriptor, not its bytes. Sources are grouped by directory (in its storage base), each with its local
//! and physical ids positionally paired and stored as encoded sequences (as row-id sequences
//! are). A local id found in the index resolves to `<directory>/<physical id>.blob` in the
//! source's base; one not found resolves under the data file's own stem, as without an index.
//! A mapping is immutable and names the physical sidecar itself, never another index.
//!
//! This module owns the type, its validation and its protobuf form; reading through it is
//! `DataFile::sidecar_location`.

use super::convert_row_ids::{sequence_from_proto, sequence_to_proto};
use super::path::TablePath;
use super::proto;
use crate::error::{Error, Result};
use crate::rowid::RowIdSequence;

/// One data file's Blob Reuse Index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobReuseIndex {
    sources: Vec<BlobReuseSource>,
    /// Every mapped local id with its source and physical id, by local id: one lookup per
    /// descriptor, however many sources.
    by_local: Vec<(u32, usize, u32)>,
}

/// The sidecars of one directory that a data file's local ids resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobReuseSource {
    /// The stem directory of the data file the sidecars were written for (`data/<stem>`),
    /// under the storage base that holds it ([`TablePath::in_base`]).
    pub directory: TablePath,
    /// Local blob ids, positionally paired with `physical_ids`.
    pub local_ids: Vec<u32>,
    /// The sidecars' own ids in `directory`.
    pub physical_ids: Vec<u32>,
}

impl BlobReuseIndex {
    /// The index of `sources`, refused (naming what is wrong) if a source's id lists differ
    /// in length or a local id is mapped twice (the manifest checks the bases it names).
    pub fn new(sources: Vec<BlobReuseSource>) -> std::result::Result<Self, String> {
        let mut by_local = Vec::new();
        for (at, source) in sources.iter().enumerate() {
            if source.local_ids.len() != source.physical_ids.len() {
                return Err(format!(
                    "its blob reuse index pairs {} local ids with {} physical ids in {}",
                    source.local_ids.len(),
                    source.physical_ids.len(),
                    source.directory.as_str()
                ));
            }
            let pairs = source.local_ids.iter().zip(&source.physical_ids);
            by_local.extend(pairs.map(|(&local, &physical)| (local, at, physical)));
        }
        by_local.sort_unstable();
        if let Some(pair) = by_local.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(format!(
                "its blob reuse index maps local blob id {} twice",
                pair[0].0
            ));
        }
        Ok(Self { sources, by_local })
    }

    /// Its sources.
    pub fn sources(&self) -> &[BlobReuseSource] {
        &self.sources
    }

    /// Its sources' directories, to move them to another storage base.
    pub(crate) fn directories_mut(&mut self) -> impl Iterator<Item = &mut TablePath> {
        self.sources.iter_mut().map(|s| &mut s.directory)
    }

    /// Where the local id `local` resolves: its source and the sidecar's physical id.
    pub fn resolve(&self, local: u32) -> Option<(&BlobReuseSource, u32)> {
        let at = self.by_local.binary_search_by_key(&local, |e| e.0).ok()?;
        let (_, source, physical) = self.by_local[at];
        Some((&self.sources[source], physical))
    }
}

/// The sidecar `physical` in `directory` (a data file's stem): `<directory>/<id as 8 hex
/// digits>.blob`, as a data file names its own (`format::sidecar_path`).
pub fn sidecar_in(directory: &TablePath, physical: u32) -> TablePath {
    TablePath::in_directory(directory, &format!("{physical:08x}.blob"))
}

pub(super) fn to_proto(index: &BlobReuseIndex) -> proto::BlobReuseIndex {
    let ids = |ids: &[u32]| {
        let wide: Vec<u64> = ids.iter().map(|&id| u64::from(id)).collect();
        Some(sequence_to_proto(&RowIdSequence::from_ids(&wide)))
    };
    proto::BlobReuseIndex {
        sources: (index.sources.iter())
            .map(|s| {
                let (base, directory) = s.directory.split_base();
                proto::BlobReuseSource {
                    base,
                    directory: directory.to_string(),
                    local_ids: ids(&s.local_ids),
                    physical_ids: ids(&s.physical_ids),
                }
            })
            .collect(),
    }
}

/// The index of the data file `data_file`, from its protobuf: damage is `Corrupt` naming
/// the data file.
pub(super) fn from_proto(raw: proto::BlobReuseIndex, data_file: &str) -> Result<BlobReuseIndex> {
    let corrupt = |reason: String| Error::corrupt(data_file, reason);
    let ids = |raw: Option<proto::RowIdSequence>| -> Result<Vec<u32>> {
        let sequence = sequence_from_proto(raw.unwrap_or_default()).map_err(corrupt)?;
        sequence
            .iter()
            .map(|id| {
                u32::try_from(id.as_u64()).map_err(|_| {
                    corrupt(format!(
                        "its blob reuse index holds blob id {}",
                        id.as_u64()
                    ))
                })
            })
            .collect()
    };
    let sources = (raw.sources.into_iter())
        .map(|s| {
            let directory = TablePath::parse(&s.directory).map_err(|_| {
                corrupt(format!(
                    "its blob reuse index names '{}', not a sidecar directory",
                    s.directory
                ))
            })?;
            Ok(BlobReuseSource {
                directory: TablePath::in_base(s.base, directory),
                local_ids: ids(s.local_ids)?,
                physical_ids: ids(s.physical_ids)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    BlobReuseIndex::new(sources).map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::DataFile;

    fn source(directory: &str, local: &[u32], physical: &[u32]) -> BlobReuseSource {
        BlobReuseSource {
            directory: TablePath::parse(directory).unwrap(),
            local_ids: local.to_vec(),
            physical_ids: physical.to_vec(),
        }
    }

    #[test]
    fn local_ids_resolve_through_the_index_or_under_the_files_own_stem() {
        let index = BlobReuseIndex::new(vec![
            source("data/a", &[4, 0], &[7, 1]),
            source("data/b", &[2], &[0]),
        ])
        .unwrap();
        let mut file = DataFile {
            path: TablePath::parse("data/c.parquet").unwrap(),
            field_ids: Vec::new(),
            row_count: 0,
            file_size_bytes: 0,
            column_stats: Vec::new(),
            blob_reuse_index: Some(index.clone()),
        };
        let at = |file: &DataFile, id| file.sidecar(id).as_str().to_string();
        assert_eq!(at(&file, 0), "data/a/00000001.blob");
        assert_eq!(at(&file, 4), "data/a/00000007.blob");
        assert_eq!(at(&file, 2), "data/b/00000000.blob");
        assert_eq!(at(&file, 3), "data/c/00000003.blob");
        let directory = TablePath::parse("data/a").unwrap();
        assert_eq!(file.sidecar_location(4), (directory, 7));
        file.blob_reuse_index = None;
        assert_eq!(at(&file, 4), "data/c/00000004.blob");
        let decoded = from_proto(to_proto(&index), "data/c.parquet").unwrap();
        assert_eq!(decoded, index);
    }

    #[test]
    fn a_damaged_index_is_refused_naming_its_data_file() {
        let twice = BlobReuseIndex::new(vec![
            source("data/a", &[1], &[1]),
            source("data/b", &[1], &[2]),
        ]);
        assert!(twice.unwrap_err().contains("twice"));
        let uneven = BlobReuseIndex::new(vec![source("data/a", &[1, 2], &[1])]);
        assert!(uneven.unwrap_err().contains("pairs 2 local ids with 1"));
        let mut based = source("data/a", &[1], &[1]);
        based.directory = TablePath::in_base(3, based.directory);
        let index = BlobReuseIndex::new(vec![based]).unwrap();
        let stored = to_proto(&index);
        assert_eq!(stored.sources[0].base, 3);
        assert_eq!(stored.sources[0].directory, "data/a");
        assert_eq!(from_proto(stored, "data/c.parquet").unwrap(), index);
        let escaping = proto::BlobReuseIndex {
            sources: vec![proto::BlobReuseSource {
                base: 0,
                directory: "../elsewhere".into(),
                local_ids: None,
                physical_ids: None,
            }],
        };
        let error = from_proto(escaping, "data/c.parquet").unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { path, .. } if path == "data/c.parquet"),
            "{error:?}"
        );
        let mut uneven =
            to_proto(&BlobReuseIndex::new(vec![source("data/a", &[1], &[1])]).unwrap());
        uneven.sources[0].physical_ids = None;
        let error = from_proto(uneven, "data/c.parquet")
            .unwrap_err()
            .to_string();
        assert!(error.contains("pairs 1 local ids with 0"), "{error}");
    }
}
