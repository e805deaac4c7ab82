//! Clones: a new table whose first version is another table's version. A shallow clone
//! references the source's files in place, under storage bases its manifest names (one
//! manifest and its fragment segments written); rows keep their ids, and everything the
//! clone writes afterwards goes to its own root. A clone of a clone names the original
//! files' base directly. Cleanup never crosses a base: the clone's never touches the source,
//! and the source's does not know its clones. A shallow clone reads the source's files
//! while the source keeps them (the documented rule; deep-clone before the source expires
//! the versions a clone was made from).

use std::sync::Arc;

use object_store::path::Path;
use object_store::ObjectStore;

use super::{commit, Committed, Table, TableOptions};
use crate::error::{Error, Result};
use crate::format::{CloneOrigin, Manifest, Operation, StorageBase, TransactionSummary, OWN_ROOT};
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

impl Table {
    /// A shallow clone of this table's `version` at `target`: one new version (numbered
    /// `version`, as the source's) whose files are the source's, referenced in place.
    ///
    /// # Errors
    /// [`Error::TableAlreadyExists`] when the target holds a table;
    /// [`Error::VersionNotFound`] for a version the source does not have;
    /// [`Error::InvalidInput`] for a clone into another store when this handle does not
    /// know its store's URL (`TableOptions::store_url`). Nothing is written then, and nothing of the source is ever touched.
    pub async fn shallow_clone(
        &self,
        version: u64,
        target: CloneTarget,
    ) -> Result<(Table, Committed)> {
        let source = self.at_version(version).await?;
        let store = TableStore::new(target.store.clone(), target.root.clone())
            .with_external_stores(target.options.external_stores.clone());
        if store.latest_version().await?.is_some() {
            return Err(Error::TableAlreadyExists {
                table: store.display(),
            });
        }
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
        let mut manifest = Manifest::clone(source.manifest());
        let (bases, remap) = clone_bases(&manifest.bases, self.store.root(), source_store_url);
        manifest.rebase_file_references(remap);
        manifest.bases = bases;
        manifest.fragment_segments.clear();
        manifest.table_uuid = uuid::Uuid::new_v4().to_string();
        manifest.parent_version = None;
        manifest.timestamp_micros = chrono::Utc::now().timestamp_micros();
        manifest.transaction = TransactionSummary {
            operation: Operation::Clone,
            read_version: version,
            rows_added: manifest.live_rows(),
            rows_removed: 0,
            fragments_removed: Vec::new(),
            fragments_added: manifest.fragments.iter().map(|f| f.id).collect(),
            uuid: String::new(),
            origin: Some(CloneOrigin {
                table: target.source_name.clone(),
                version,
                deep: false,
            }),
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
        Ok((clone, Committed::of(&manifest)))
    }
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
