//! Storage bases: other tables' roots whose files a manifest references in place (a shallow
//! clone's sources, DESIGN.md §3). A reference under one is a [`TablePath::in_base`] path;
//! this module owns the bases' type, the walk over every file reference a manifest holds,
//! and the check that each names a base the manifest lists.

use std::collections::HashSet;

use super::{Manifest, TablePath, OWN_ROOT};
use crate::error::{Error, Result};

/// Another table's root, whose files a manifest references in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageBase {
    /// Its id in the manifest: 1 and up ([`OWN_ROOT`] is the table's own root).
    pub id: u32,
    /// The root's path in its object store.
    pub path: String,
    /// That store, when it is not the table's own (`s3://bucket`, `file:///`).
    pub store_url: Option<String>,
}

impl StorageBase {
    /// Where it is, for messages: its store's URL and path.
    pub fn location(&self) -> String {
        match &self.store_url {
            Some(url) => format!("{}/{}", url.trim_end_matches('/'), self.path),
            None => format!("/{}", self.path),
        }
    }
}

/// The table and version a clone was made from, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneOrigin {
    /// The source table's location, as the clone's maker named it.
    pub table: String,
    /// The version cloned.
    pub version: u64,
    /// Every file copied (deep), or the source's referenced (shallow).
    pub deep: bool,
}

impl Manifest {
    /// Every file reference the manifest holds but its fragment segments (always the
    /// table's own): data files (their sidecars follow their paths), the sidecar
    /// directories reuse indexes name, deletion files, row-id and lineage files, the relocation
    /// checkpoint and index segments.
    pub fn file_references(&self) -> Vec<&TablePath> {
        let mut paths = Vec::new();
        for fragment in &self.fragments {
            for file in &fragment.files {
                paths.push(&file.path);
                let reused = file.blob_reuse_index.iter().flat_map(|i| i.sources());
                paths.extend(reused.map(|source| &source.directory));
            }
            paths.extend(
                fragment
                    .deletion
                    .iter()
                    .flat_map(|d| d.files())
                    .map(|f| &f.path),
            );
            paths.extend(fragment.row_ids.file().map(|f| &f.path));
            paths.extend(fragment.lineage.updated_file.as_ref().map(|f| &f.path));
            paths.extend(fragment.patches.iter().map(|p| &p.file.path));
        }
        paths.extend(self.relocation_checkpoint.iter().map(|c| &c.path));
        paths.extend(self.indexes.segments.iter().map(|s| &s.path));
        paths
    }

    /// Moves every reference of [`Self::file_references`] to the base `remap` gives for
    /// its current one (a clone naming its source's files).
    pub fn rebase_file_references(&mut self, remap: impl Fn(u32) -> u32) {
        let moved = |path: &mut TablePath| *path = path.rebased(&remap);
        for fragment in &mut self.fragments {
            for file in &mut fragment.files {
                moved(&mut file.path);
                if let Some(index) = &mut file.blob_reuse_index {
                    index.directories_mut().for_each(moved);
                }
            }
            for deletion in fragment.deletion.iter_mut().flat_map(|d| d.files_mut()) {
                moved(&mut deletion.path);
            }
            if let Some(file) = fragment.row_ids.file_mut() {
                moved(&mut file.path);
            }
            if let Some(file) = &mut fragment.lineage.updated_file {
                moved(&mut file.path);
            }
            for patch in &mut fragment.patches {
                moved(&mut patch.file.path);
            }
        }
        if let Some(checkpoint) = &mut self.relocation_checkpoint {
            moved(&mut checkpoint.path);
        }
        for segment in &mut self.indexes.segments {
            moved(&mut segment.path);
        }
    }

    /// The base `id` names, if the manifest lists it.
    pub fn base(&self, id: u32) -> Option<&StorageBase> {
        self.bases.iter().find(|b| b.id == id)
    }

    /// Refuses bases with repeated or reserved ids, and references under a base the
    /// manifest does not list.
    pub(super) fn validate_bases(&self, path: &str) -> Result<()> {
        let mut ids = HashSet::new();
        for base in &self.bases {
            if base.id == OWN_ROOT || !ids.insert(base.id) {
                return Err(Error::corrupt(
                    path,
                    format!("storage base id {} is reserved or repeated", base.id),
                ));
            }
        }
        for reference in self.file_references() {
            let (base, _) = reference.split_base();
            if base != OWN_ROOT && !ids.contains(&base) {
                return Err(Error::corrupt(
                    path,
                    format!(
                        "{reference} is under storage base {base}, which the manifest does \
                         not list"
                    ),
                ));
            }
        }
        Ok(())
    }
}
