//! Clones: a new table whose first version is another table's version. A shallow clone
//! references the source's files in place, under storage bases its manifest names (one
//! manifest and its fragment segments written); rows keep their ids, and everything the
//! clone writes afterwards goes to its own root. A clone of a clone names the original
//! files' base directly. A deep clone copies every file the version reads into its own root
//! and names no base. Cleanup never crosses a base: the clone's never touches the source,
//! and the source's does not know its clones. A shallow clone reads the source's files
//! while the source keeps them (the documented rule; deep-clone before the source expires
//! the versions a clone was made from).

use std::collections::HashMap;
use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::{commit, Committed, Table, TableOptions};
use crate::error::{Error, Result};
use crate::format::{
    sidecar_in, CloneOrigin, Manifest, Operation, StorageBase, TablePath, TransactionSummary,
    OWN_ROOT,
};
use crate::io::TableStore;

/// Where a clone goes.
#[derive(Debug, Clone)]
pub struct CloneTarget {
    /// The store the clone is written to.
    pub store: Arc<dyn ObjectStore>,
    /// Its root in that store (no table there yet).
    pub root: Path,
    /// The clone's handle options. A shallow clone in another store than the source's
    /// reaches the source's files through `external_stores`, by the source handle's
    /// `TableOptions::store_url`.
    pub options: TableOptions,
    /// How the source is named in the clone's history (`t$versions`).
    pub source_name: String,
}

/// What a clone wrote: the live rows it holds, the files it copied (none for a shallow
/// clone) and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cloned {
    /// Live rows of the clone's first version.
    pub live_rows: u64,
    /// Files copied into the clone's root (a deep clone's).
    pub files_copied: u64,
    /// Their bytes.
    pub bytes_copied: u64,
}

impl Table {
    /// A shallow clone of this table's `version` at `target`: one new version (numbered
    /// `version`, as the source's) whose files are the source's, referenced in place.
    ///
    /// # Errors
    /// [`Error::TableAlreadyExists`] when the target holds a table;
    /// [`Error::VersionNotFound`] for a version the source does not have;
    /// [`Error::InvalidInput`] for a clone into another store when this handle does not
    /// know its store's URL (`TableOptions::store_url`). Nothing is written then, and
    /// nothing of the source is ever touched.
    pub async fn shallow_clone(
        &self,
        version: u64,
        target: CloneTarget,
    ) -> Result<(Table, Committed<Cloned>)> {
        let (mut manifest, store) = self.clone_start(version, &target).await?;
        let same_store = Arc::ptr_eq(self.store.underlying(), &target.store);
        let source_store_url = match (same_store, &self.options.store_url) {
            (true, _) => None,
            (false, Some(url)) => Some(url.clone()),
            (false, None) => {
                return Err(Error::invalid(
                    "a shallow clone into another store needs the source's store URL \
                     (TableOptions::store_url of the source's handle) to reach its files",
                ))
            }
        };
        let (bases, remap) = clone_bases(&manifest.bases, self.store.root(), source_store_url);
        manifest.rebase_file_references(remap);
        manifest.bases = bases;
        publish_clone(manifest, store, target, Cloned::default()).await
    }

    /// A deep clone of this table's `version` at `target`: every file the version reads
    /// (data files, their blob sidecars and the sidecars reuse indexes name, deletion and
    /// row-id files, the relocation checkpoint, index segments), the source's bases'
    /// included, copied into the clone's root, several at once, then one new version
    /// (numbered `version`) naming them there. The clone has no base but its own root.
    /// `target.options.progress` is told the bytes copied (operation `"cloning"`).
    ///
    /// # Errors
    /// As [`Self::shallow_clone`]; and the store's, reading or copying a file. A clone
    /// that fails deletes what it copied.
    pub async fn deep_clone(
        &self,
        version: u64,
        target: CloneTarget,
    ) -> Result<(Table, Committed<Cloned>)> {
        let (mut manifest, store) = self.clone_start(version, &target).await?;
        let files = files_to_copy(&self.store, &manifest).await?;
        let total: u64 = files.iter().map(|(_, size)| size).sum();
        let progress = target.options.progress.clone();
        let copied = |bytes| progress.update("cloning", bytes, Some(total));
        let destinations: Vec<Path> = (files.iter())
            .map(|(file, _)| store.child(file.split_base().1))
            .collect();
        let outcome = self
            .store
            .copy_files_to(files.clone(), &store, &copied)
            .await;
        progress.finish("cloning");
        manifest.rebase_file_references(|_| OWN_ROOT);
        manifest.bases.clear();
        let figures = Cloned {
            live_rows: 0,
            files_copied: files.len() as u64,
            bytes_copied: total,
        };
        let published = match outcome {
            Ok(_) => publish_clone(manifest, store.clone(), target, figures).await,
            Err(e) => Err(e),
        };
        if published.is_err() {
            for path in &destinations {
                let _ = store.object_store().delete(path).await;
            }
        }
        published
    }

    /// The version to clone and the target's store, refusing a target that holds a table.
    async fn clone_start(
        &self,
        version: u64,
        target: &CloneTarget,
    ) -> Result<(Manifest, TableStore)> {
        let source = self.at_version(version).await?;
        let store = TableStore::new(target.store.clone(), target.root.clone())
            .with_external_stores(target.options.external_stores.clone());
        if store.latest_version().await?.is_some() {
            return Err(Error::TableAlreadyExists {
                table: store.display(),
            });
        }
        let mut manifest = Manifest::clone(source.manifest());
        // The source version's change data is its commit's, not the clone's (whose files
        // it would reference or copy for nothing); the feed setting carries over.
        manifest.change_data = None;
        manifest.transaction.origin = Some(CloneOrigin {
            table: target.source_name.clone(),
            version,
            deep: false,
        });
        Ok((manifest, store))
    }
}

/// Publishes `manifest` (a source version, its references moved) as the clone's first
/// version at `store`.
async fn publish_clone(
    mut manifest: Manifest,
    store: TableStore,
    target: CloneTarget,
    mut figures: Cloned,
) -> Result<(Table, Committed<Cloned>)> {
    let mut origin = manifest.transaction.origin.take();
    if let Some(origin) = &mut origin {
        // Deep: it copied what the version reads, so it names no base.
        origin.deep = manifest.bases.is_empty();
    }
    manifest.fragment_segments.clear();
    manifest.table_uuid = uuid::Uuid::new_v4().to_string();
    manifest.parent_version = None;
    manifest.timestamp_micros = chrono::Utc::now().timestamp_micros();
    figures.live_rows = manifest.live_rows();
    manifest.transaction = TransactionSummary {
        operation: Operation::Clone,
        read_version: manifest.version,
        rows_added: figures.live_rows,
        rows_removed: 0,
        fragments_removed: Vec::new(),
        fragments_added: manifest.fragments.iter().map(|f| f.id).collect(),
        uuid: String::new(),
        origin,
    };
    let published = commit::create(&store, manifest, &[], &target.options).await?;
    let manifest = published.ok_or_else(|| Error::TableAlreadyExists {
        table: store.display(),
    })?;
    let clone = Table {
        store,
        options: target.options,
        planned_at: None,
    };
    Ok((clone, Committed::published(manifest.version, figures)))
}

/// Every file `manifest` reads, with its size: what a deep clone copies. Sidecars are
/// found by listing (the manifest names data files, not their sidecars).
async fn files_to_copy(store: &TableStore, manifest: &Manifest) -> Result<Vec<(TablePath, u64)>> {
    let bases: Vec<u32> = manifest.bases.iter().map(|b| b.id).collect();
    let sizes = store.files_with_sizes(&bases).await?;
    let mut wanted: Vec<TablePath> = Vec::new();
    for fragment in &manifest.fragments {
        let patches = fragment.patches.iter().map(|p| &p.file);
        for file in fragment.files.iter().chain(patches) {
            wanted.push(file.path.clone());
            let stem = format!("{}/", TablePath::sidecar_dir(&file.path).as_str());
            let reused = file.blob_reuse_index.iter().flat_map(|i| i.sources());
            let named = reused.flat_map(|source| {
                (source.physical_ids.iter()).map(|id| sidecar_in(&source.directory, *id))
            });
            wanted.extend(named);
            let own = sizes.keys().filter(|p| p.starts_with(&stem));
            wanted.extend(own.filter_map(|p| TablePath::parse_based(p).ok()));
        }
        wanted.extend(
            fragment
                .deletion
                .iter()
                .flat_map(|d| d.files())
                .map(|f| f.path.clone()),
        );
        wanted.extend(fragment.row_ids.file().map(|f| f.path.clone()));
        wanted.extend(fragment.lineage.updated_file.iter().map(|f| f.path.clone()));
    }
    wanted.extend(
        manifest
            .relocation_checkpoint
            .iter()
            .map(|c| c.path.clone()),
    );
    wanted.extend(manifest.indexes.segments.iter().map(|s| s.path.clone()));
    wanted.sort();
    wanted.dedup();
    let mut landing: HashMap<&str, &TablePath> = HashMap::new();
    let mut files = Vec::with_capacity(wanted.len());
    for path in &wanted {
        let size = *sizes.get(path.as_str()).ok_or_else(|| {
            Error::corrupt(
                path.as_str(),
                "the version names this file but it is not there to copy",
            )
        })?;
        if let Some(other) = landing.insert(path.split_base().1, path) {
            return Err(Error::internal(format!(
                "{path} and {other} would be copied to the same path"
            )));
        }
        files.push((path.clone(), size));
    }
    Ok(files)
}

/// The clone's bases: the source's own root, then the source's bases (one entry per
/// place, so a clone of a clone names the original files' base directly), seen from the
/// clone's store (`source_store_url`: the source's store, when the clone is in another).
/// With the map from the source's base ids to the clone's.
fn clone_bases(
    source_bases: &[StorageBase],
    source_root: &Path,
    source_store_url: Option<String>,
) -> (Vec<StorageBase>, impl Fn(u32) -> u32) {
    let seen_from_clone = |path: &str, store_url: &Option<String>| StorageBase {
        id: 0,
        path: path.to_string(),
        store_url: store_url.clone().or_else(|| source_store_url.clone()),
    };
    let places = std::iter::once((OWN_ROOT, seen_from_clone(source_root.as_ref(), &None))).chain(
        source_bases
            .iter()
            .map(|b| (b.id, seen_from_clone(&b.path, &b.store_url))),
    );
    let mut bases: Vec<StorageBase> = Vec::new();
    let mut remap: Vec<(u32, u32)> = Vec::new();
    for (source_id, mut place) in places {
        let same = |b: &&StorageBase| b.path == place.path && b.store_url == place.store_url;
        let id = match bases.iter().find(same) {
            Some(existing) => existing.id,
            None => {
                place.id = bases.len() as u32 + 1;
                bases.push(place.clone());
                place.id
            }
        };
        remap.push((source_id, id));
    }
    let map = move |source_id: u32| {
        (remap.iter())
            .find(|(from, _)| *from == source_id)
            .map_or(source_id, |(_, to)| *to)
    };
    (bases, map)
}
