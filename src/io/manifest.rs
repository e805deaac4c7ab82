//! Manifest files: `_versions/<u64::MAX - version, 20 digits>.manifest`, newest first in a
//! lexical listing. Opening the latest version is one LIST and one GET; a pinned version is
//! one GET (plus the row-id files it names, see `rowids.rs`). Publishing a version is one
//! put-if-absent.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;

use super::store::{ListedManifest, VERSIONS_DIR};
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{Manifest, FRAGMENTS_PER_SEGMENT, LINEAGE_INLINE_LIMIT, ROW_ID_INLINE_LIMIT};

/// How many times a manifest PUT of unknown outcome is read back (and put again if absent).
const SETTLE_ATTEMPTS: usize = 3;

/// How a writer lays out what a manifest references. Readers load any layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestLayout {
    /// Row-id sequences whose encoding exceeds this many bytes get a `_rowids/` file.
    pub row_ids_inline_limit: usize,
    /// Per-row versions whose encoding exceeds this many bytes get a `_lineage/` file.
    pub lineage_inline_limit: usize,
    /// Lists of more fragments than this are stored in `_fragments/` segments of this size.
    pub fragments_per_segment: usize,
}

impl Default for ManifestLayout {
    fn default() -> Self {
        Self {
            row_ids_inline_limit: ROW_ID_INLINE_LIMIT,
            lineage_inline_limit: LINEAGE_INLINE_LIMIT,
            fragments_per_segment: FRAGMENTS_PER_SEGMENT,
        }
    }
}

impl TableStore {
    /// The newest published version, or `None` if the table has none (one LIST).
    pub async fn latest_version(&self) -> Result<Option<u64>> {
        Ok(self.latest_listed().await?.map(|(version, _)| version))
    }

    /// The newest published version with its manifest's listing entry (one LIST).
    pub async fn latest_listed(&self) -> Result<Option<(u64, object_store::ObjectMeta)>> {
        Ok(self.list_versions().await?.pop())
    }

    /// Every published version, ascending (one LIST).
    pub async fn list_versions(&self) -> Result<Vec<(u64, object_store::ObjectMeta)>> {
        let prefix = self.child(VERSIONS_DIR);
        let listing: Vec<_> = self
            .object_store()
            .list(Some(&prefix))
            .try_collect()
            .await?;
        let mut versions: Vec<_> = listing
            .into_iter()
            .filter_map(|meta| self.version_of_manifest(&meta.location).map(|v| (v, meta)))
            .collect();
        versions.sort_by_key(|(v, _)| *v);
        Ok(versions)
    }

    /// Reads and validates one version's manifest (one GET).
    pub async fn read_manifest(&self, version: u64) -> Result<Manifest> {
        self.read_manifest_at(version)
            .await
            .map_err(|e| self.located(e))
    }

    async fn read_manifest_at(&self, version: u64) -> Result<Manifest> {
        let path = self.manifest_path(version);
        let bytes = match self.get(&path).await {
            Ok(bytes) => bytes,
            Err(Error::ObjectStore(object_store::Error::NotFound { .. })) => {
                return Err(Error::VersionNotFound {
                    table: self.display(),
                    version,
                })
            }
            Err(e) => return Err(e),
        };
        // Row-id files are named by a unique id, so reading them before the table's uuid is
        // noted (below) cannot find another incarnation's in the cache.
        let mut manifest = self
            .resolve_row_ids(Manifest::decode(path.as_ref(), &bytes)?)
            .await?;
        if manifest.version != version {
            return Err(Error::corrupt(
                path.as_ref(),
                format!(
                    "holds version {} under the name of version {version}",
                    manifest.version
                ),
            ));
        }
        // Before anything it names is looked up in the caches.
        self.note_table_uuid(&manifest.table_uuid);
        self.note_bases(&manifest);
        self.load_fragment_segments(&mut manifest, path.as_ref())
            .await?;
        Ok(manifest)
    }

    /// [`Self::read_manifest`] for a version a listing has just shown to exist (as
    /// `listed`), from this handle's cache when it was read before under the same listing
    /// entry: a published manifest never changes, but a table created again in this place
    /// publishes another under the same name. (A version asked for by number is always
    /// read, so one removed by cleanup is reported.)
    pub async fn read_listed_manifest(
        &self,
        version: u64,
        listed: &object_store::ObjectMeta,
    ) -> Result<Manifest> {
        let path = self.manifest_path(version);
        let entry = ListedManifest::from(listed);
        let load = async {
            let manifest = self.read_manifest(version).await?;
            Ok::<_, Error>((entry.clone(), Arc::new(manifest)))
        };
        let seen_so = |(seen, _): &(ListedManifest, Arc<Manifest>)| *seen == entry;
        let (_, manifest) = (self.manifests)
            .get_usable_or_load(path.as_ref(), seen_so, load)
            .await?;
        Ok(manifest.as_ref().clone())
    }

    /// Publishes `manifest` unless its version exists, after storing what `layout` keeps
    /// outside it (row-id and lineage files, fragment segments) (recorded in `manifest`). Returns false if another writer published
    /// that version first.
    pub async fn publish_manifest(
        &self,
        manifest: &mut Manifest,
        layout: &ManifestLayout,
    ) -> Result<bool> {
        // Before and after: a listing this handle began meanwhile may miss the version.
        self.recent_latest.forget();
        let published = self.publish_manifest_once(manifest, layout).await;
        self.recent_latest.forget();
        published
    }

    async fn publish_manifest_once(
        &self,
        manifest: &mut Manifest,
        layout: &ManifestLayout,
    ) -> Result<bool> {
        self.store_row_ids(manifest, layout.row_ids_inline_limit)
            .await?;
        self.store_lineage(manifest, layout.lineage_inline_limit)
            .await?;
        self.store_fragment_segments(manifest, layout.fragments_per_segment)
            .await?;
        manifest.transaction.uuid = uuid::Uuid::new_v4().to_string();
        let path = self.manifest_path(manifest.version);
        let bytes = Bytes::from(manifest.encode());
        match self.put_if_absent(&path, bytes.clone()).await {
            Err(Error::ObjectStore(error)) => self.settle_publish(&path, bytes, error).await,
            // Refused: another writer's, or this one's own. An HTTP client retries a PUT
            // whose response it lost (a 5xx, a dropped connection) after the store kept it,
            // and the retry is refused by the very version it wrote; the bytes say whose.
            Ok(false) => self.holds(&path, &bytes).await,
            outcome => outcome,
        }
    }

    /// Whether the manifest at `path` is `bytes` (this attempt's: its transaction id is
    /// fresh), read back after a put-if-absent was refused.
    async fn holds(&self, path: &Path, bytes: &Bytes) -> Result<bool> {
        match self.get(path).await {
            Ok(stored) => Ok(stored == *bytes),
            // Refused, then gone: a table dropped meanwhile; not this attempt's.
            Err(Error::ObjectStore(object_store::Error::NotFound { .. })) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The outcome of a manifest PUT that failed with `error`, which the store may have kept
    /// all the same (a timeout, a dropped connection after the body was sent): the version
    /// is read back. Holding these bytes (this attempt's id among them), it is published;
    /// holding another's, another writer won; absent, it is put again, put-if-absent, so a
    /// version is never published twice nor reported failed when it landed. A read that
    /// fails too leaves the outcome unknown: `error` is returned.
    async fn settle_publish(
        &self,
        path: &Path,
        bytes: Bytes,
        error: object_store::Error,
    ) -> Result<bool> {
        for _ in 0..SETTLE_ATTEMPTS {
            match self.get(path).await {
                Ok(stored) => return Ok(stored == bytes),
                Err(Error::ObjectStore(object_store::Error::NotFound { .. })) => {}
                Err(_) => return Err(Error::ObjectStore(error)),
            }
            // Absent: put again. Refused or failed, the next read tells whose it is now.
            if let Ok(true) = self.put_if_absent(path, bytes.clone()).await {
                return Ok(true);
            }
        }
        Err(Error::ObjectStore(error))
    }
}
