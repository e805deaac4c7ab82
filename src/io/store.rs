//! [`TableStore`]: one table's directory in an object store, and the only place that turns
//! table-relative paths into object-store paths.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use roaring::RoaringBitmap;

use super::cache::FileCache;
use crate::error::{Error, Result};
use crate::format::{DerivedName, Fragment, Manifest, TablePath};
use crate::rowid::RowIdSequence;

/// The directory under a table root holding its manifests.
pub const VERSIONS_DIR: &str = "_versions";
/// How a manifest's file name ends (`<version>.manifest`).
pub const MANIFEST_SUFFIX: &str = ".manifest";

/// Files a manifest names (row-id files, fragment segments) fetched at once when it is loaded.
pub(crate) const CONCURRENT_FILE_LOADS: usize = 16;

/// Names a derived file may try at one version before the write gives up. Each taken name
/// is a writer that wrote for this version and lost the race or crashed.
const MAX_NAME_ATTEMPTS: u32 = 64;

/// Footers, deletion vectors and row-id files kept per table handle.
const CACHED_FILES: usize = 4096;
/// Vector index segment heads kept per table handle.
const CACHED_VECTOR_HEADS: usize = 256;
/// Decoded vector index partitions kept per table handle: what a search probes again at
/// every query (Lance keeps its index in memory too). An `ivf_pq` partition of 1M vectors
/// in 256 is ~94 KB, an `ivf_flat` one ~2 MB: at most ~1 GB for the widest.
const CACHED_VECTOR_PARTITIONS: usize = 512;
/// Bytes of vectors of fragments no vector index covers a handle keeps (as 128-component
/// vectors: 500K rows).
const CACHED_VECTOR_RUN_BYTES: usize = 256 * 1024 * 1024;
/// Bytes of row patches' decoded values a handle keeps: every read of a patched column
/// merges them, and patches are small (compaction folds the large ones).
const CACHED_PATCH_BYTES: usize = 64 * 1024 * 1024;
/// Decoded manifests kept per table handle: the latest, read again by every query's
/// planning, and the one before it. A manifest holds the whole fragment list, so few.
const CACHED_MANIFESTS: usize = 2;

/// A fresh name for a new immutable file: 95 random bits (of a v4 uuid) in 16 base-62
/// characters, for files that have no derived name (data, row-id and checkpoint files).
/// Fragment segments repeat data files' names, so they are kept short; 95 bits keep two
/// writers from ever picking the same one.
pub(crate) fn unique_name() -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut bits = uuid::Uuid::new_v4().as_u128();
    (0..16)
        .map(|_| {
            let digit = DIGITS[(bits % 62) as usize];
            bits /= 62;
            digit as char
        })
        .collect()
}

/// What a listing said of a manifest file; a file put under the same name later (by a table
/// created again in the same place) differs in its size, tag or time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedManifest {
    size: u64,
    e_tag: Option<String>,
    last_modified: chrono::DateTime<chrono::Utc>,
}

impl From<&object_store::ObjectMeta> for ListedManifest {
    fn from(meta: &object_store::ObjectMeta) -> Self {
        Self {
            size: meta.size,
            e_tag: meta.e_tag.clone(),
            last_modified: meta.last_modified,
        }
    }
}

/// A table's root in an object store, with caches of decoded immutable files.
#[derive(Debug, Clone)]
pub struct TableStore {
    store: Arc<dyn ObjectStore>,
    root: Path,
    pub(crate) footers: Arc<FileCache<ArrowReaderMetadata>>,
    pub(crate) deletions: Arc<FileCache<Arc<RoaringBitmap>>>,
    pub(crate) row_ids: Arc<FileCache<Arc<RowIdSequence>>>,
    /// Fragments' lineage read from their `_lineage/` files, by file.
    pub(crate) lineage: Arc<FileCache<Arc<crate::format::Lineage>>>,
    pub(crate) segments: Arc<FileCache<Arc<Vec<Fragment>>>>,
    /// Vector index segment heads, by file.
    pub(crate) vector_heads: Arc<FileCache<Arc<super::VectorHead>>>,
    /// Vector index partitions, by file and partition (`<path>#<i>`).
    pub(crate) vector_partitions: Arc<FileCache<Arc<super::VectorPartition>>>,
    /// The vectors of fragments no vector index segment covers, as searches read them, by
    /// the fragment's file and deletion files.
    pub(crate) vector_runs: Arc<FileCache<Arc<super::VectorRun>>>,
    /// Row patches' values as reads merge them, by patch file and the columns read.
    pub(crate) patch_values: Arc<FileCache<RecordBatch>>,
    /// Each with the listing entry it was read under, to tell it from a file of the same
    /// name written later by a table created again in this place.
    pub(crate) manifests: Arc<FileCache<(ListedManifest, Arc<Manifest>)>>,
    /// The `table_uuid` of the manifests these caches hold files of.
    incarnation: Arc<Mutex<Option<String>>>,
    /// Counts the bytes data-file reads receive, for one scan's metrics.
    pub(crate) bytes_read: Option<Arc<AtomicU64>>,
    /// The table's directory when the store is a local disk (found once, at `new`).
    local_directory: Option<Arc<std::path::PathBuf>>,
    /// The stores external blob values are read through.
    pub(crate) external: Option<Arc<dyn object_store::registry::ObjectStoreRegistry>>,
    /// Which blob values reads return as references, not bytes (for rows written back).
    pub(crate) blob_references: super::BlobReferences,
    /// The newest manifest a listing found, for reads that accept some staleness.
    pub(crate) recent_latest: Arc<super::recent_latest::RecentLatest>,
    /// `store`, seen through: where the storage bases its manifests name are.
    pub(super) bases: Arc<super::bases::BasedStore>,
}

impl TableStore {
    /// The decoded footer of the Parquet file at `path`: the table's cached one when
    /// `usable` accepts it, else read through `reader` with `options` and cached (one home
    /// for footers, whichever file kind they belong to).
    pub(crate) async fn cached_footer(
        &self,
        path: &TablePath,
        reader: &mut super::reader::ObjectFileReader,
        options: parquet::arrow::arrow_reader::ArrowReaderOptions,
        usable: impl Fn(&ArrowReaderMetadata) -> bool,
    ) -> std::result::Result<ArrowReaderMetadata, parquet::errors::ParquetError> {
        let load = ArrowReaderMetadata::load_async(reader, options);
        (self.footers)
            .get_usable_or_load(path.as_str(), usable, load)
            .await
    }

    /// The table at `root` of `store`, with empty caches.
    pub fn new(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        let local_directory = super::staged::local_directory(store.as_ref(), &root).map(Arc::new);
        let bases = Arc::new(super::bases::BasedStore::new(store, &root));
        Self {
            local_directory,
            store: bases.clone(),
            bases,
            root,
            footers: FileCache::new(CACHED_FILES),
            deletions: FileCache::new(CACHED_FILES),
            row_ids: FileCache::new(CACHED_FILES),
            lineage: FileCache::new(CACHED_FILES),
            segments: FileCache::new(CACHED_FILES),
            vector_heads: FileCache::new(CACHED_VECTOR_HEADS),
            vector_partitions: FileCache::new(CACHED_VECTOR_PARTITIONS),
            vector_runs: FileCache::by_bytes(CACHED_VECTOR_RUN_BYTES, super::VectorRun::bytes),
            patch_values: FileCache::by_bytes(
                CACHED_PATCH_BYTES,
                RecordBatch::get_array_memory_size,
            ),
            manifests: FileCache::new(CACHED_MANIFESTS),
            incarnation: Arc::new(Mutex::new(None)),
            bytes_read: None,
            external: None,
            blob_references: super::BlobReferences::None,
            recent_latest: Arc::default(),
        }
    }

    /// This store (sharing its caches), reading blob values as `references` say.
    pub fn blob_references(self, references: super::BlobReferences) -> Self {
        Self {
            blob_references: references,
            ..self
        }
    }

    /// The `table_uuid` of the table whose manifests this handle has read, if it has read one.
    pub(crate) fn table_uuid(&self) -> Option<String> {
        self.incarnation.lock().ok()?.clone()
    }

    /// This store with `stores` to read external blob values through.
    pub fn with_external_stores(
        self,
        stores: Option<Arc<dyn object_store::registry::ObjectStoreRegistry>>,
    ) -> Self {
        Self {
            external: stores,
            ..self
        }
    }

    /// This store (sharing its caches) with data-file reads counted into `counter`.
    pub fn counting_bytes(&self, counter: Arc<AtomicU64>) -> Self {
        Self {
            bytes_read: Some(counter),
            ..self.clone()
        }
    }

    /// Notes the storage bases `manifest` names, so its files under them can be read.
    pub(crate) fn note_bases(&self, manifest: &crate::format::Manifest) {
        self.note_storage_bases(&manifest.bases);
    }

    pub(crate) fn note_storage_bases(&self, bases: &[crate::format::StorageBase]) {
        if !bases.is_empty() {
            self.bases.note(bases, self.external.as_ref());
        }
    }

    /// Notes that a manifest of the table `table_uuid` was read, and forgets every cached
    /// file if the caches hold another table's: one dropped and created again here, whose
    /// derived file names the new table repeats.
    pub(crate) fn note_table_uuid(&self, table_uuid: &str) {
        let Ok(mut seen) = self.incarnation.lock() else {
            return;
        };
        if seen.as_deref() == Some(table_uuid) {
            return;
        }
        if seen.is_some() {
            self.footers.clear();
            self.deletions.clear();
            self.row_ids.clear();
            self.lineage.clear();
            self.segments.clear();
            self.vector_heads.clear();
            self.vector_partitions.clear();
            self.vector_runs.clear();
            self.patch_values.clear();
            self.manifests.clear();
        }
        *seen = Some(table_uuid.to_string());
    }

    /// Every file under the table's own directories ([`crate::format::TABLE_FILE_DIRS`]),
    /// with its table-relative path (one listing of the table).
    pub async fn list_table_files(&self) -> Result<Vec<(String, object_store::ObjectMeta)>> {
        let listing: Vec<_> = self.store.list(Some(&self.root)).try_collect().await?;
        Ok(listing
            .into_iter()
            .filter(|meta| self.is_table_file(&meta.location))
            .filter_map(|meta| Some((self.relative(&meta.location)?, meta)))
            .collect())
    }

    /// `location`'s path under the table's root, if it is under it.
    pub(crate) fn relative(&self, location: &Path) -> Option<String> {
        let parts = location.prefix_match(&self.root)?;
        let relative: Vec<String> = parts.map(|p| p.as_ref().to_string()).collect();
        Some(relative.join("/"))
    }

    /// Every blob sidecar under the table's `data/` directory: its table-relative path and
    /// size, from one listing.
    pub async fn list_sidecars(&self) -> Result<Vec<(String, u64)>> {
        let data = self.root.clone().join("data");
        let listing: Vec<_> = self.store.list(Some(&data)).try_collect().await?;
        Ok(listing
            .into_iter()
            .filter_map(|meta| {
                let parts = meta.location.prefix_match(&self.root)?;
                let relative: Vec<String> = parts.map(|p| p.as_ref().to_string()).collect();
                let relative = relative.join("/");
                crate::format::sidecar_owner(&relative)?;
                Some((relative, meta.size))
            })
            .collect())
    }

    /// True when `location` is under one of the table's own directories
    /// ([`crate::format::TABLE_FILE_DIRS`]): a file natal wrote for it.
    pub fn is_table_file(&self, location: &Path) -> bool {
        let Some(mut parts) = location.prefix_match(&self.root) else {
            return false;
        };
        let top = parts.next();
        top.is_some_and(|top| crate::format::TABLE_FILE_DIRS.contains(&top.as_ref()))
            && parts.next().is_some()
    }

    /// The object store the table is in.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The store the table is in, beneath the routing of its storage bases.
    pub fn underlying(&self) -> &Arc<dyn ObjectStore> {
        self.bases.underlying()
    }

    /// The table's root in the store.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The object-store path of a table-relative path.
    pub fn path(&self, path: &TablePath) -> Path {
        self.child(path.as_str())
    }

    pub(crate) fn child(&self, relative: &str) -> Path {
        relative
            .split('/')
            .fold(self.root.clone(), |p, segment| p.clone().join(segment))
    }

    /// Manifest names invert the version so that a lexical listing puts the newest first.
    pub fn manifest_path(&self, version: u64) -> Path {
        self.child(&format!(
            "{VERSIONS_DIR}/{:020}{MANIFEST_SUFFIX}",
            u64::MAX - version
        ))
    }

    /// The version a manifest file name stands for, if it is one.
    pub fn version_of_manifest(&self, path: &Path) -> Option<u64> {
        let name = path.filename()?;
        let digits = name.strip_suffix(MANIFEST_SUFFIX)?;
        if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits
            .parse::<u64>()
            .ok()
            .map(|inverted| u64::MAX - inverted)
    }

    /// The table's location, for messages: a local table's path as the user wrote it (an
    /// object-store path has no leading `/`; a local one had).
    pub fn display(&self) -> String {
        match self.local_directory() {
            Some(directory) => directory.display().to_string(),
            None => self.root.to_string(),
        }
    }

    /// `error` with the object path it names under the table shown as [`Self::display`]
    /// shows the table: a local file by its file-system path, with its leading `/`.
    pub(crate) fn located(&self, error: Error) -> Error {
        let Error::Corrupt { path, reason } = error else {
            return error;
        };
        let inside = self.local_directory().and_then(|directory| {
            let rest = path
                .strip_prefix(self.root.as_ref())?
                .trim_start_matches('/');
            Some(directory.join(rest).display().to_string())
        });
        Error::Corrupt {
            path: inside.unwrap_or(path),
            reason,
        }
    }

    /// The table's directory when it is on a local disk.
    pub(crate) fn local_directory(&self) -> Option<&std::path::Path> {
        self.local_directory.as_deref().map(|d| d.as_path())
    }

    /// Uploads a killed writer left unfinished in the table's directories, which only a
    /// local disk keeps (as staging files its listings hide); none elsewhere.
    pub(crate) async fn staged_uploads(&self) -> Result<Vec<super::StagedUpload>> {
        match self.local_directory() {
            Some(directory) => {
                let mut dirs = crate::format::TABLE_FILE_DIRS.to_vec();
                dirs.push(VERSIONS_DIR);
                super::staged::staged_uploads(directory.to_path_buf(), dirs).await
            }
            None => Ok(Vec::new()),
        }
    }

    /// Reads the file at `path` (a full store path).
    pub async fn get(&self, path: &Path) -> Result<Bytes> {
        Ok(self.store.get(path).await?.bytes().await?)
    }

    /// Reads a whole file whose size the manifest records, as one ranged read: on a local
    /// disk one blocking call instead of two (open, then read), which is most of the cost of
    /// loading a small side file. A shorter file, or a failed read, falls back to [`get`],
    /// so what is wrong with the file is reported as before (a longer one fails its checksum).
    ///
    /// [`get`]: TableStore::get
    pub async fn get_sized(&self, path: &Path, size: u64) -> Result<Bytes> {
        match self
            .store
            .get_ranges(path, std::slice::from_ref(&(0..size)))
            .await
        {
            Ok(mut parts) if parts.len() == 1 && parts[0].len() as u64 == size => {
                Ok(parts.remove(0))
            }
            _ => self.get(path).await,
        }
    }

    /// Writes `bytes` to `path`, replacing any file there.
    pub async fn put(&self, path: &Path, bytes: Bytes) -> Result<()> {
        self.store.put(path, PutPayload::from(bytes)).await?;
        Ok(())
    }

    /// Writes `bytes` as a new file of fragment `fragment` under `dir`
    /// (`<dir>/<fragment>-<unique name>.bin`, never written before): a fragment's row ids
    /// or lineage. Returns its path and size.
    pub(crate) async fn put_fragment_file(
        &self,
        dir: &str,
        fragment: crate::rowid::FragmentId,
        bytes: Vec<u8>,
    ) -> Result<(TablePath, u64)> {
        let path = TablePath::parse(&format!("{dir}/{fragment}-{}.bin", unique_name()))?;
        let size_bytes = bytes.len() as u64;
        self.put(&self.path(&path), Bytes::from(bytes)).await?;
        Ok((path, size_bytes))
    }

    /// Writes `bytes` under the first free name `name` derives for `owner` at `version`
    /// (attempt 0, 1, ...), claimed with put-if-absent: writers racing for the same version,
    /// or a name left by one that never published, never share a file.
    pub(crate) async fn put_derived(
        &self,
        name: DerivedName,
        owner: u32,
        version: u64,
        bytes: Bytes,
    ) -> Result<TablePath> {
        for attempt in 0..MAX_NAME_ATTEMPTS {
            let path = name.path(owner, version, attempt);
            if self.put_if_absent(&self.path(&path), bytes.clone()).await? {
                return Ok(path);
            }
        }
        Err(Error::invalid(format!(
            "{MAX_NAME_ATTEMPTS} files named for {owner} at version {version} already exist \
             ({}); run cleanup",
            name.path(owner, version, 0)
        )))
    }

    /// Writes `bytes` only if nothing is at `path`. Returns false if something was.
    pub async fn put_if_absent(&self, path: &Path, bytes: Bytes) -> Result<bool> {
        let options = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .store
            .put_opts(path, PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(Error::ObjectStore(e)),
        }
    }
}
