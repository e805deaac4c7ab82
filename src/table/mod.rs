//! [`Table`]: a natal table in an object store — create, open, time travel, and every
//! operation that publishes a version. Each operation reads the latest version, plans an
//! [`commit::Action`], and commits it (see [`commit`] for the conflict rules).
//!
//! ```no_run
//! # async fn example() -> natal::Result<()> {
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, RecordBatch};
//! use arrow::datatypes::{DataType, Field, Schema};
//! use natal::{Table, TableOptions};
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
//! let store = Arc::new(object_store::memory::InMemory::new());
//! let table = Table::create(store, "t".into(), &schema, TableOptions::default()).await?;
//! let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))])?;
//! table.append(vec![batch]).await?;
//! assert_eq!(table.latest().await?.count_rows(), 3);
//! # Ok(()) }
//! ```

mod alter;
pub use blobs::reads::SidecarUsage;
pub use vector_index::VectorIndexOptions;
pub use vector_search::{NearestOptions, DISTANCE};
mod blobs;
mod changes;
mod clone;
mod commit;
mod declared;
mod filter;
mod fragment_reads;
mod id_order;
mod index;
mod late_read;
mod maintenance;
mod merge;
mod patch;
mod patching;
mod progress;
mod recovery;
mod rows_with_ids;
mod scan_request;
mod snapshot;
mod upsert;
pub(crate) mod vector;
mod vector_index;
mod vector_search;
mod vector_train;
mod write;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema as ArrowSchema;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::ObjectStore;

use crate::error::{Error, Result};
use crate::format::{DataFile, Manifest, Operation, Schema, TransactionSummary};
use crate::io::{check_storable, ManifestLayout, TableStore};
use write::{delete_written, write_native_fragments};

pub use alter::{ColumnValues, NewColumn};
pub use changes::reads::{ChangeRequest, ChangeStream, ChangedRows};
pub use changes::row_changes::RowChangeSet;
pub(crate) use changes::values::change_schema;
pub(crate) use changes::values::CHANGE_COLUMNS;
pub use changes::values::{ChangeType, CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION};
pub use clone::{CloneTarget, Cloned};
pub use declared::{ColumnDefault, Declarations, TableConstraint};
pub use filter::{predicate_layout, RowPredicate};
pub use index::{IndexBuild, IndexOptions, IndexProbe};
pub use maintenance::{CleanupPolicy, CleanupReport, CompactOptions, Compaction};
pub use merge::TieredMerge;
pub use patch::DEFAULT_PATCH_MAX_SHARE;
pub use progress::{Progress, ProgressHandle};
pub use scan_request::{
    ScanMetrics, ScanRequest, ROW_ADDR, ROW_CREATED_VERSION, ROW_ID, ROW_UPDATED_VERSION,
};
pub use snapshot::Snapshot;
pub use write::{BatchUpdate, RowMatch};

/// Options of a table handle.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Rows per fragment written by append, overwrite and compaction; fixed at create time
    /// and stored in the manifest.
    pub max_rows_per_fragment: u64,
    /// How many times a commit rebases onto newer versions before giving up.
    pub max_commit_retries: u32,
    /// What commits store outside the manifest (row-id files, fragment segments). A
    /// writer's choice: readers load any layout.
    pub layout: ManifestLayout,
    /// Merge small fragments after each write that adds rows (on by default, fan-in 8);
    /// `None`: only [`Table::compact`] merges them.
    pub merge: Option<TieredMerge>,
    /// Told how far this handle's writes, deletes, updates and cleanups have got
    /// (operations `"writing"`, `"creating"`, `"deleting"`, `"updating"`, `"cleaning up"`).
    pub progress: ProgressHandle,
    /// The stores external blob values are read through (by their URIs); `None`: reading
    /// one is an [`Error::ExternalBlob`] naming its URI. A DataFusion session gives its own.
    pub external_stores: Option<Arc<dyn object_store::registry::ObjectStoreRegistry>>,
    /// The URL of the store the table is in (`s3://bucket`, `file://`), when known: what a
    /// shallow clone in another store records to reach this table's files.
    pub store_url: Option<String>,
    /// A table created with this records change data ([`Table::set_change_data_feed`]):
    /// fixed at create time like `max_rows_per_fragment`, changed later by a commit.
    pub change_data_feed: bool,
    /// A table created with this sets its patch share ([`Table::set_patch_max_share`]; in
    /// `0..=1`): fixed at create time, changed later by a commit.
    pub patch_max_share: Option<f64>,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            max_rows_per_fragment: 1024 * 1024,
            max_commit_retries: 20,
            layout: ManifestLayout::default(),
            merge: Some(TieredMerge::default()),
            progress: ProgressHandle::default(),
            external_stores: None,
            store_url: None,
            change_data_feed: false,
            patch_max_share: None,
        }
    }
}

/// What an operation did: the version it left the table at, whether it published that
/// version, and the operation's own figures ([`RowChanges`] for the row operations,
/// [`Compaction`] for [`Table::compact`], [`IndexBuild`] for [`Table::create_index`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed<F = RowChanges> {
    /// The table's version after the operation: the one it published or, when it had
    /// nothing to do, the one it read.
    pub version: u64,
    /// False when the operation had nothing to do and published nothing: an append of no
    /// rows, a delete or update that matched none, a compaction or index build that found
    /// nothing to merge or cover.
    pub published: bool,
    /// What the operation changed.
    pub figures: F,
}

/// The rows a version added and removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowChanges {
    /// Rows the version added (an update counts its new copies).
    pub rows_added: u64,
    /// Rows the version removed (an update counts the copies it replaced).
    pub rows_removed: u64,
}

impl<F> Committed<F> {
    /// `version` published, with `figures`.
    fn published(version: u64, figures: F) -> Self {
        Self {
            version,
            published: true,
            figures,
        }
    }

    /// Nothing published: the table stays at `read`'s version.
    fn unchanged(read: &Snapshot, figures: F) -> Self {
        Self {
            version: read.version(),
            published: false,
            figures,
        }
    }
}

impl Committed {
    fn of(manifest: &Manifest) -> Self {
        Self::published(
            manifest.version,
            RowChanges {
                rows_added: manifest.transaction.rows_added,
                rows_removed: manifest.transaction.rows_removed,
            },
        )
    }
}

/// A natal table: a directory of immutable files plus one manifest per version.
#[derive(Debug, Clone)]
pub struct Table {
    store: TableStore,
    options: TableOptions,
    /// When set, operations plan against this version instead of the latest.
    planned_at: Option<Arc<Snapshot>>,
}

impl Table {
    /// Creates an empty table (version 1) at `root`.
    ///
    /// # Errors
    /// [`Error::TableAlreadyExists`] if a table is there; [`Error::InvalidInput`] for a schema
    /// natal cannot store (naming the column and its type).
    pub async fn create(
        store: Arc<dyn ObjectStore>,
        root: Path,
        schema: &ArrowSchema,
        options: TableOptions,
    ) -> Result<Self> {
        let (table, _) = Self::create_from(
            store,
            root,
            schema,
            options,
            futures::stream::empty().boxed(),
        )
        .await?;
        Ok(table)
    }

    /// Creates a table at `root` whose first version holds `batches` (`CREATE TABLE ... AS
    /// SELECT`). The rows are written before the version is published, so a failure (a row
    /// the schema refuses, an error from the input, a store error) leaves no table, and
    /// the data files written so far are deleted.
    ///
    /// # Errors
    /// As [`Self::create`], and the input's errors.
    pub async fn create_from(
        store: Arc<dyn ObjectStore>,
        root: Path,
        schema: &ArrowSchema,
        options: TableOptions,
        batches: BoxStream<'_, Result<RecordBatch>>,
    ) -> Result<(Self, Committed)> {
        let declarations = Declarations::default();
        Self::create_declared(store, root, (schema, &declarations), options, batches).await
    }

    /// [`Self::create_from`] with column defaults and constraints (`declared`): what a SQL
    /// `CREATE TABLE` declares beyond the schema (whose Arrow metadata is kept too).
    ///
    /// # Errors
    /// As [`Self::create_from`]; and a declaration naming a column that is not there, or a
    /// default value that is not of its column's type.
    pub async fn create_declared(
        store: Arc<dyn ObjectStore>,
        root: Path,
        (schema, declared): (&ArrowSchema, &Declarations),
        options: TableOptions,
        batches: BoxStream<'_, Result<RecordBatch>>,
    ) -> Result<(Self, Committed)> {
        let max_rows_per_fragment = u32::try_from(options.max_rows_per_fragment)
            .ok()
            .and_then(std::num::NonZeroU32::new)
            .ok_or_else(|| Error::invalid("max_rows_per_fragment must be in 1..=u32::MAX"))?;
        patch::check_patch_share(options.patch_max_share)?;
        check_storable(schema).await?;
        let store =
            TableStore::new(store, root).with_external_stores(options.external_stores.clone());
        let already_exists = |store: &TableStore| Error::TableAlreadyExists {
            table: store.display(),
        };
        if store.latest_version().await?.is_some() {
            return Err(already_exists(&store));
        }
        let empty = Manifest {
            version: 1,
            parent_version: None,
            timestamp_micros: chrono::Utc::now().timestamp_micros(),
            table_uuid: uuid::Uuid::new_v4().to_string(),
            schema: {
                let mut table_schema = Schema::from_arrow(schema)?;
                declared.apply_to(&mut table_schema)?;
                table_schema
            },
            fragments: Vec::new(),
            fragment_segments: Vec::new(),
            max_fragment_id: None,
            unknown_reader_flags: 0,
            unknown_writer_flags: 0,
            transaction: TransactionSummary {
                operation: Operation::Create,
                read_version: 0,
                rows_added: 0,
                rows_removed: 0,
                fragments_removed: Vec::new(),
                fragments_added: Vec::new(),
                uuid: String::new(),
                origin: None,
            },
            relocation_checkpoint: None,
            max_rows_per_fragment,
            indexes: Default::default(),
            bases: Vec::new(),
            change_data_feed: options.change_data_feed,
            patch_max_share: options.patch_max_share,
            change_data: None,
            unlinked_change_data: Vec::new(),
        };
        let fragments = write_native_fragments(
            &store,
            &empty.schema,
            empty.fragment_row_target(),
            batches,
            (&options.progress, "creating"),
        )
        .await?;
        let table_schema = empty.schema.clone();
        let published = commit::create(&store, empty, &fragments, &options).await;
        let Some(manifest) = published.as_ref().ok().and_then(Option::as_ref) else {
            delete_written(&store, &table_schema, &fragments).await;
            return Err(published.err().unwrap_or_else(|| already_exists(&store)));
        };
        let committed = Committed::of(manifest);
        let table = Self {
            store,
            options,
            planned_at: None,
        };
        Ok((table, committed))
    }

    /// A handle on the table at `root`. Does no I/O: the first read finds the latest
    /// version (and reports [`Error::TableNotFound`] if there is none). Fragment size comes
    /// from the table's manifest.
    pub fn open(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        Self::open_with(store, root, TableOptions::default())
    }

    /// [`Self::open`] with this handle's own options (commit retries, layout, merging);
    /// `max_rows_per_fragment` is the manifest's, whatever `options` says.
    pub fn open_with(store: Arc<dyn ObjectStore>, root: Path, options: TableOptions) -> Self {
        Self {
            store: TableStore::new(store, root)
                .with_external_stores(options.external_stores.clone()),
            options,
            planned_at: None,
        }
    }

    /// The table's store (internals: paths, caches, request counters).
    pub fn store(&self) -> &TableStore {
        &self.store
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &TableOptions {
        &self.options
    }

    /// The newest version: one LIST, and one GET unless this handle read that manifest
    /// before (see `TableStore::read_listed_manifest`).
    pub async fn latest(&self) -> Result<Snapshot> {
        let listing = self.store.recent_latest.listing_starts();
        let (version, listed) =
            self.store
                .latest_listed()
                .await?
                .ok_or_else(|| Error::TableNotFound {
                    table: self.store.display(),
                })?;
        let manifest = match self.store.read_listed_manifest(version, &listed).await {
            Ok(manifest) => manifest,
            Err(Error::Corrupt { path, reason }) => {
                return Err(Error::Corrupt {
                    path,
                    reason: format!(
                        "{reason}. The latest version ({version}) is damaged; older versions \
                         still read (`at_version`, or \"t@vN\" in SQL), and `restore` \
                         (`natal_restore('t', N)`) publishes one of them as the latest"
                    ),
                })
            }
            Err(e) => return Err(e),
        };
        let manifest = Arc::new(manifest);
        self.store.recent_latest.keep(listing, &manifest);
        Ok(Snapshot::shared(self.store.clone(), manifest))
    }

    /// The newest version this handle (or a clone of it) listed no longer than `limit`
    /// ago, with no request; else [`Self::latest`]. Another writer's commit may then go
    /// unseen for up to `limit` (Delta's `stalenessLimit`, DataFusion's listing cache
    /// TTL); this handle's own commits are always seen. A zero limit always lists.
    pub async fn latest_within(&self, limit: std::time::Duration) -> Result<Snapshot> {
        match self.store.recent_latest.within(limit) {
            Some(manifest) => Ok(Snapshot::shared(self.store.clone(), manifest)),
            None => self.latest().await,
        }
    }

    /// A pinned version (time travel): one GET.
    pub async fn at_version(&self, version: u64) -> Result<Snapshot> {
        let manifest = self.store.read_manifest(version).await?;
        Ok(Snapshot::new(self.store.clone(), manifest))
    }

    /// Every retained version, ascending, with its manifest, or why it does not read: a
    /// damaged version ([`Error::Corrupt`]) is listed, not the listing's end (what a user
    /// looks at after restoring over one). Other errors (the store's) end it.
    pub async fn version_list(&self) -> Result<Vec<(u64, Result<Manifest>)>> {
        let mut out = Vec::new();
        for (version, _) in self.store.list_versions().await? {
            match self.store.read_manifest(version).await {
                Err(e) if !matches!(e, Error::Corrupt { .. }) => return Err(e),
                read => out.push((version, read)),
            }
        }
        Ok(out)
    }

    /// Every retained version, ascending, with its manifest.
    pub async fn versions(&self) -> Result<Vec<Manifest>> {
        self.version_list()
            .await?
            .into_iter()
            .map(|(_, manifest)| manifest)
            .collect()
    }

    /// This handle, telling `progress` how far its operations have got (see
    /// [`TableOptions::progress`]).
    pub fn with_progress(&self, progress: ProgressHandle) -> Self {
        let mut table = self.clone();
        table.options.progress = progress;
        table
    }

    /// This handle, merging small fragments after its writes by `merge` (see
    /// [`TableOptions::merge`]).
    pub fn with_merge(&self, merge: Option<TieredMerge>) -> Self {
        let mut table = self.clone();
        table.options.merge = merge;
        table
    }

    /// This handle (sharing its caches) reading external blob values through `stores`.
    pub fn with_external_stores(
        &self,
        stores: Arc<dyn object_store::registry::ObjectStoreRegistry>,
    ) -> Self {
        let mut table = self.clone();
        table.store = table.store.with_external_stores(Some(stores.clone()));
        table.options.external_stores = Some(stores);
        table
    }

    /// A handle whose operations read `snapshot` instead of the latest version, as a writer
    /// that read an older version would. Commits still land on the latest version, rebasing
    /// or failing with [`Error::Conflict`] by the usual rules.
    pub fn planned_at(&self, snapshot: impl Into<Arc<Snapshot>>) -> Self {
        Self {
            planned_at: Some(snapshot.into()),
            ..self.clone()
        }
    }

    /// The version this handle's operations plan against: the one given to
    /// [`Self::planned_at`], or else the latest. Ids and addresses handed to
    /// [`Self::commit_changes`] are read from it.
    pub async fn snapshot(&self) -> Result<Arc<Snapshot>> {
        self.read_snapshot().await
    }

    /// The version an operation plans against.
    async fn read_snapshot(&self) -> Result<Arc<Snapshot>> {
        match &self.planned_at {
            Some(snapshot) => Ok(snapshot.clone()),
            None => Ok(Arc::new(self.latest().await?)),
        }
    }

    /// Commits `action` on `read`, or, if it changes nothing, publishes nothing.
    async fn commit(&self, read: &Snapshot, action: commit::Action) -> Result<Committed> {
        if action.changes_nothing() {
            return Ok(Committed::unchanged(read, RowChanges::default()));
        }
        Ok(Committed::of(
            &self.commit_manifest(read, action, None).await?,
        ))
    }

    /// [`Self::commit`], returning the published manifest itself.
    /// The files the action wrote are deleted if it surely published nothing (a conflict, a
    /// refused rebase): a failed write leaves no trace.
    /// On a table recording change data, the rows the action deletes or rewrites are
    /// captured first (`change_capture`), unless the operation captured them as it read them
    /// (`captured`).
    async fn commit_manifest(
        &self,
        read: &Snapshot,
        action: commit::Action,
        captured: Option<Vec<commit::NewFragment>>,
    ) -> Result<Manifest> {
        let mut written = action.written_files();
        let captured = match captured {
            Some(captured) => Ok(Some(captured)),
            None => self.capture_change_data(read, &action).await,
        };
        let captured = match captured {
            Ok(captured) => captured,
            Err(e) => {
                write::delete_files(&self.store, read.schema(), written.iter()).await;
                return Err(e);
            }
        };
        let captured_files: Vec<DataFile> = (captured.iter().flatten())
            .map(|f| f.file.clone())
            .collect();
        written.extend(captured_files.iter().cloned());
        let outcome = commit::commit(
            &self.store,
            read.manifest(),
            action,
            captured,
            &self.options,
        )
        .await;
        match &outcome {
            Err(e) if write::surely_unpublished(e) => {
                write::delete_files(&self.store, read.schema(), written.iter()).await;
            }
            // Published without its captures (rebased over a schema change): no version
            // names them.
            Ok(published) if published.change_data.is_none() => {
                write::delete_files(&self.store, read.schema(), captured_files.iter()).await;
            }
            _ => {}
        }
        outcome
    }
}
