//! [`NatalSchemaProvider`]: every natal table under a root (each a sub-directory) by name,
//! and [`NatalTableFactory`] for `CREATE EXTERNAL TABLE ... STORED AS NATAL LOCATION '...'`.
//!
//! Names: `t` (latest), `t@v7` (version 7, read-only), `t$rows` and `t@v7$rows` (adding
//! `_rowid` and `_rowaddr`).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::MemTable;
use datafusion::catalog::{SchemaProvider, Session, TableProvider, TableProviderFactory};
use datafusion::datasource::empty::EmptyTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::CreateExternalTable;
use futures::StreamExt;
use object_store::path::Path;
use object_store::ObjectStore;

use super::damaged::DamagedTable;
use super::metadata;
use super::provider::{NatalTableProvider, ProviderView};
use super::write::alter::{parse_share, parse_switch, CHANGE_DATA_FEED, PATCH_MAX_SHARE};
use crate::table::{ProgressHandle, Table, TableOptions};

/// What a suffixed table name shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    /// The rows (`t`, or with `$rows` the rows plus `_rowid` and `_rowaddr`).
    Rows,
    /// The versions (`t$versions`).
    Versions,
    /// The fragments of a version (`t$fragments`).
    Fragments,
    /// The ids that moved and where to (`t$relocations`).
    Relocations,
    /// The index segments (`t$indexes`).
    Indexes,
    /// The columns of a version, with their field ids (`t$schema`).
    Schema,
    /// Where each value of each blob column lives (`t$blobs`).
    Blobs,
    /// Each blob sidecar the version's values are in, with its live and dead bytes
    /// (`t$blob_sidecars`).
    BlobSidecars,
}

/// True when `name` is a file, not a natal table: it has a `/` (a path or URL), or ends in
/// a file extension DataFusion reads (`x.parquet`, `data.csv.gz`). A bare name, with `@vN`
/// or `$...` or neither, is a table.
pub fn names_a_file(name: &str) -> bool {
    const EXTENSIONS: [&str; 8] = [
        "parquet", "csv", "tsv", "json", "ndjson", "avro", "arrow", "txt",
    ];
    const COMPRESSED: [&str; 5] = ["gz", "bz2", "xz", "zst", "zstd"];
    if name.contains('/') || name.contains('\\') {
        return true;
    }
    let mut parts = name.rsplit('.');
    let (Some(last), Some(_)) = (parts.next(), parts.clone().next()) else {
        return false;
    };
    let last = last.to_ascii_lowercase();
    if EXTENSIONS.contains(&last.as_str()) {
        return true;
    }
    COMPRESSED.contains(&last.as_str())
        && parts
            .next()
            .is_some_and(|ext| EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}

/// A table name with its version and suffix taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    /// The table's own name.
    pub base: String,
    /// Which version it reads (`@vN`), or the latest.
    pub view: ProviderView,
    /// Which of the table's faces (`$rows`, `$versions`, ...) is named.
    pub kind: TableKind,
}

impl TableName {
    /// Parses `t`, `t@v7`, and either with `$rows`, `$versions`, `$fragments`,
    /// `$relocations`, `$indexes` or `$schema`.
    ///
    /// # Errors
    /// A plan error for an unknown suffix or a version that is not a number.
    pub fn parse(name: &str) -> Result<Self> {
        let (rest, kind, system_columns) = match name.split_once('$') {
            None => (name, TableKind::Rows, false),
            Some((rest, "rows")) => (rest, TableKind::Rows, true),
            Some((rest, "versions")) => (rest, TableKind::Versions, false),
            Some((rest, "fragments")) => (rest, TableKind::Fragments, false),
            Some((rest, "relocations")) => (rest, TableKind::Relocations, false),
            Some((rest, "indexes")) => (rest, TableKind::Indexes, false),
            Some((rest, "schema")) => (rest, TableKind::Schema, false),
            Some((rest, "blobs")) => (rest, TableKind::Blobs, false),
            Some((rest, "blob_sidecars")) => (rest, TableKind::BlobSidecars, false),
            Some((_, other)) => {
                return Err(DataFusionError::Plan(format!(
                    "unknown table suffix '${other}' in '{name}' \
                     (natal knows $rows, $versions, $fragments, $relocations, $indexes, $schema, \
                     $blobs, $blob_sidecars)"
                )))
            }
        };
        let (base, version) = match rest.split_once('@') {
            None => (rest, None),
            Some((base, v)) => {
                let digits = v.strip_prefix('v').unwrap_or(v);
                let version = digits.parse::<u64>().map_err(|_| {
                    DataFusionError::Plan(format!(
                        "'{v}' in '{name}' is not a version (write {base}@v<number>)"
                    ))
                })?;
                (base, Some(version))
            }
        };
        if base.is_empty() || base.contains('/') {
            return Err(DataFusionError::Plan(format!(
                "'{name}' is not a table name"
            )));
        }
        Ok(Self {
            base: base.to_string(),
            view: ProviderView {
                version,
                system_columns,
            },
            kind,
        })
    }
}

/// The tables under one root directory of an object store.
#[derive(Debug)]
pub struct NatalSchemaProvider {
    store: Arc<dyn ObjectStore>,
    root: Path,
    /// Tables registered by `CREATE EXTERNAL TABLE` elsewhere, by name.
    registered: RwLock<BTreeMap<String, Arc<dyn TableProvider>>>,
    /// One handle per table directory, kept across queries so its caches (footers, deletion
    /// vectors, row-id files) serve the next query. Every file natal writes has a fresh
    /// name, so a cached entry can never describe another file, even after `DROP TABLE`.
    handles: RwLock<BTreeMap<String, Table>>,
    /// Told how far a `CREATE TABLE ... AS` has got (it runs outside any query's context).
    progress: ProgressHandle,
    /// The stores its tables read external blob values through (the session's).
    external_stores: Option<Arc<dyn object_store::registry::ObjectStoreRegistry>>,
    /// How old a table's latest version a statement may read ([`Table::latest_within`]).
    staleness_limit: std::time::Duration,
    /// The URL of the store `root` is in, when known (what clones elsewhere record).
    store_url: Option<String>,
}

impl NatalSchemaProvider {
    /// A schema of the natal tables under `root` in `store`.
    pub fn new(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        Self {
            store,
            root,
            registered: RwLock::new(BTreeMap::new()),
            handles: RwLock::new(BTreeMap::new()),
            progress: ProgressHandle::default(),
            external_stores: None,
            staleness_limit: std::time::Duration::ZERO,
            store_url: None,
        }
    }

    /// This schema, knowing the URL of the store its root is in (`s3://bucket`, `file://`).
    pub fn with_store_url(mut self, store_url: String) -> Self {
        self.store_url = Some(store_url);
        self
    }

    /// The options of the handles it opens.
    pub(super) fn table_options(&self) -> TableOptions {
        TableOptions {
            external_stores: self.external_stores.clone(),
            store_url: self.store_url.clone(),
            ..TableOptions::default()
        }
    }

    /// A handle on the table at `location` (a URL or a path) or, for a plain name, on
    /// `<root>/<name>`, wherever or not a table is there.
    pub(super) fn handle_at(&self, runtime: &RuntimeEnv, location: &str) -> Result<Table> {
        if !location.contains("://") && !location.starts_with('/') {
            let parsed = TableName::parse(location)?;
            if parsed.base != location {
                return Err(DataFusionError::Plan(format!(
                    "'{location}' is not a table name ('@' and '$' name faces of a table)"
                )));
            }
            return Ok(Table::open_with(
                self.store.clone(),
                self.root.clone().join(location),
                self.table_options(),
            ));
        }
        let (store, root) = resolve_location(runtime, location)?;
        let options = TableOptions {
            store_url: Some(store_url_of(location)?),
            ..self.table_options()
        };
        Ok(Table::open_with(store, root, options))
    }

    /// This schema, its statements reading a table's latest version as listed up to
    /// `limit` ago when this session listed it then ([`Table::latest_within`]); zero (the
    /// default): every statement lists the table's versions.
    pub fn with_staleness_limit(mut self, limit: std::time::Duration) -> Self {
        self.staleness_limit = limit;
        self
    }

    /// This schema, its tables reading external blob values through `stores`.
    pub fn with_external_stores(
        mut self,
        stores: Arc<dyn object_store::registry::ObjectStoreRegistry>,
    ) -> Self {
        self.external_stores = Some(stores);
        self
    }

    /// This schema, telling `progress` how far its `CREATE TABLE ... AS` statements have got.
    pub fn with_progress(mut self, progress: ProgressHandle) -> Self {
        self.progress = progress;
        self
    }

    /// The handle of table `base`: a natal table registered by `CREATE EXTERNAL TABLE`
    /// under that name, wherever it lives; else the kept handle of `<root>/<base>`, or a new
    /// one (kept once a version of it opens).
    pub(super) fn table_handle(&self, base: &str) -> Table {
        let external = (self.registered.read().ok())
            .and_then(|r| r.get(base).cloned())
            .and_then(|provider| {
                (provider.downcast_ref::<NatalTableProvider>()).map(|natal| natal.table().clone())
            });
        if let Some(table) = external {
            return table;
        }
        match self.handles.read().ok().and_then(|h| h.get(base).cloned()) {
            Some(table) => table,
            None => Table::open_with(
                self.store.clone(),
                self.root.clone().join(base),
                self.table_options(),
            ),
        }
    }

    /// Keeps `table`'s handle for later queries; names that never opened are not kept.
    fn keep_handle(&self, base: &str, table: &Table) {
        if let Ok(mut handles) = self.handles.write() {
            handles
                .entry(base.to_string())
                .or_insert_with(|| table.clone());
        }
    }
}

#[async_trait]
impl SchemaProvider for NatalSchemaProvider {
    /// The tables under the root (each directory holding manifests) and those registered
    /// by name, sorted. Versions and suffixed names (`t@v3`, `t$rows`) are not listed: they
    /// name faces of the same tables.
    fn table_names(&self) -> Vec<String> {
        let mut names: std::collections::BTreeSet<String> = self
            .registered
            .read()
            .map(|r| r.keys().cloned().collect())
            .unwrap_or_default();
        let (store, root) = (self.store.clone(), self.root.clone());
        // No error channel here: a root that cannot be listed lists only registered tables,
        // and reading any table by name still reports what is wrong.
        if let Ok(stored) = blocking(stored_table_names(store, root)) {
            names.extend(stored);
        }
        names.into_iter().collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if let Some(provider) = self
            .registered
            .read()
            .ok()
            .and_then(|r| r.get(name).cloned())
        {
            // A natal table registered here is read, like those under the root, at the
            // version this statement resolves now.
            let Some(natal) = provider.downcast_ref::<NatalTableProvider>() else {
                return Ok(Some(provider));
            };
            let (table, view) = (natal.table().clone(), natal.view());
            let snapshot = match view.version {
                Some(v) => table.at_version(v).await?,
                None => table.latest_within(self.staleness_limit).await?,
            };
            let statement = NatalTableProvider::from_snapshot(table, view, snapshot);
            return Ok(Some(Arc::new(statement.for_one_statement())));
        }
        if names_a_file(name) {
            // A file path: for the session's URL tables (`SELECT * FROM 'x.parquet'`).
            return Ok(None);
        }
        let parsed = TableName::parse(name)?;
        let table = self.table_handle(&parsed.base);
        // The history lists damaged versions too, the latest among them.
        if parsed.kind == TableKind::Versions && parsed.view.version.is_none() {
            let listed = table.version_list().await?;
            if listed.is_empty() {
                return Ok(None);
            }
            self.keep_handle(&parsed.base, &table);
            return Ok(Some(metadata::versions(listed)?));
        }
        let snapshot = match parsed.view.version {
            Some(v) => table.at_version(v).await,
            None => table.latest_within(self.staleness_limit).await,
        };
        let snapshot = match snapshot {
            Ok(snapshot) => snapshot,
            Err(crate::Error::TableNotFound { .. }) => return Ok(None),
            // A pinned version of a table that does not exist at all: no such table.
            Err(e @ crate::Error::VersionNotFound { .. }) => {
                return match table.store().latest_version().await? {
                    None => Ok(None),
                    Some(_) => Err(e.into()),
                }
            }
            // The latest version is damaged: the table is still there (to drop, to restore),
            // and every read of it reports the damage.
            Err(crate::Error::Corrupt { path, reason })
                if parsed.view.version.is_none() && parsed.kind == TableKind::Rows =>
            {
                let schema = newest_readable_schema(&table).await;
                return Ok(Some(Arc::new(DamagedTable::new(schema, path, reason))));
            }
            Err(e) => return Err(e.into()),
        };
        self.keep_handle(&parsed.base, &table);
        Ok(Some(match parsed.kind {
            TableKind::Rows => Arc::new(
                NatalTableProvider::from_snapshot(table, parsed.view, snapshot).for_one_statement(),
            ),
            TableKind::Versions => metadata::versions(table.version_list().await?)?,
            TableKind::Fragments => metadata::fragments(&snapshot)?,
            TableKind::Relocations => metadata::relocations(&snapshot).await?,
            TableKind::Indexes => metadata::indexes(&snapshot)?,
            TableKind::Schema => metadata::schema(&snapshot)?,
            TableKind::Blobs => metadata::blobs(&snapshot).await?,
            TableKind::BlobSidecars => metadata::blob_sidecars(&snapshot).await?,
        }))
    }

    /// `CREATE TABLE` and `CREATE TABLE AS` hand DataFusion's in-memory result here: natal
    /// stores it as a new table `<root>/<name>`. Natal tables created elsewhere (`CREATE
    /// EXTERNAL TABLE ... STORED AS NATAL`) are registered by name as they are.
    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> Result<Option<Arc<dyn TableProvider>>> {
        if let Some(memory) = table.downcast_ref::<MemTable>() {
            if names_a_file(&name) {
                return Err(DataFusionError::Plan(format!(
                    "cannot create a table named '{name}': it names a file (a '/' or a file \
                     extension); natal tables have bare names"
                )));
            }
            let parsed = TableName::parse(&name)?;
            if parsed.kind != TableKind::Rows
                || parsed.view.version.is_some()
                || parsed.view.system_columns
            {
                return Err(DataFusionError::Plan(format!(
                    "cannot create a table named '{name}': '@' and '$' are natal syntax"
                )));
            }
            let handle = self.table_handle(&name);
            let progress = self.progress.clone();
            let partitions = memory.batches.clone();
            let schema = table.schema();
            let declared = super::write::declared::provider_declarations(table.as_ref(), &schema)?;
            blocking(async move {
                let store = handle.store();
                let mut batches = Vec::new();
                for partition in partitions {
                    batches.extend(partition.read().await.iter().cloned().map(Ok));
                }
                // One version holding the rows: a failure leaves no table behind.
                let options = TableOptions {
                    progress,
                    ..TableOptions::default()
                };
                Table::create_declared(
                    store.object_store().clone(),
                    store.root().clone(),
                    (&schema, &declared),
                    options,
                    futures::StreamExt::boxed(futures::stream::iter(batches)),
                )
                .await?;
                Ok(())
            })?;
            return Ok(None);
        }
        let mut registered = self
            .registered
            .write()
            .map_err(|_| DataFusionError::Internal("natal schema lock poisoned".into()))?;
        Ok(registered.insert(name, table))
    }

    /// `DROP TABLE`: forgets a registered table, or deletes a natal table under the root
    /// with every file it has.
    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let removed = self
            .registered
            .write()
            .map_err(|_| DataFusionError::Internal("natal schema lock poisoned".into()))?
            .remove(name);
        if removed.is_some() {
            return Ok(removed);
        }
        let parsed = TableName::parse(name)?;
        if parsed.kind != TableKind::Rows
            || parsed.view.version.is_some()
            || parsed.view.system_columns
        {
            return Err(DataFusionError::Plan(format!(
                "cannot drop '{name}': drop the table itself"
            )));
        }
        let handle = self.table_handle(&parsed.base);
        if let Ok(mut handles) = self.handles.write() {
            handles.remove(&parsed.base);
        }
        blocking(async move {
            let dropped: Arc<dyn TableProvider> = match handle.latest().await {
                Ok(snapshot) => {
                    let view = ProviderView {
                        version: None,
                        system_columns: false,
                    };
                    Arc::new(NatalTableProvider::from_snapshot(
                        handle.clone(),
                        view,
                        snapshot,
                    ))
                }
                // A table whose latest version is damaged, or the files a failed drop left,
                // are dropped all the same.
                Err(crate::Error::Corrupt { .. } | crate::Error::TableNotFound { .. }) => {
                    Arc::new(EmptyTable::new(Arc::new(ArrowSchema::empty())))
                }
                Err(e) => return Err(e),
            };
            handle.delete_all_files().await?;
            Ok(Some(dropped))
        })
    }

    fn table_exist(&self, name: &str) -> bool {
        if self.registered.read().is_ok_and(|r| r.contains_key(name)) {
            return true;
        }
        if names_a_file(name) {
            return false;
        }
        let Ok(parsed) = TableName::parse(name) else {
            return false;
        };
        let handle = self.table_handle(&parsed.base);
        // Files left by a drop that failed half way (manifests go first) still make a table
        // here: `DROP TABLE IF EXISTS` must remove them, not report there is nothing.
        blocking(async move {
            let store = handle.store();
            if store.latest_version().await?.is_some() {
                return Ok(true);
            }
            let mut listing = store.object_store().list(Some(store.root()));
            while let Some(meta) = listing.next().await.transpose()? {
                if store.is_table_file(&meta.location) {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .unwrap_or(false)
    }
}

/// The table property `name` a `CREATE EXTERNAL TABLE`'s options give, read by `parse`
/// (`None`: not given); a value `parse` refuses is an error saying it is not `what`.
fn table_option<T>(
    cmd: &CreateExternalTable,
    name: &str,
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Result<Option<T>> {
    // DataFusion files an option without a namespace under `format.`.
    let Some(text) = cmd.options.get(&format!("format.{name}")) else {
        return Ok(None);
    };
    let value = parse(text)
        .ok_or_else(|| DataFusionError::Plan(format!("option '{name}' is {what}, not '{text}'")))?;
    Ok(Some(value))
}

/// `CREATE EXTERNAL TABLE t (...) STORED AS NATAL LOCATION 'url'`: opens the natal table at
/// the location, creating it with the statement's columns if there is none.
#[derive(Debug, Default)]
pub struct NatalTableFactory;

#[async_trait]
impl TableProviderFactory for NatalTableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        let location = cmd
            .locations
            .first()
            .ok_or_else(|| DataFusionError::Plan("STORED AS NATAL needs a LOCATION".into()))?;
        let (store, root) = resolve_location(state.runtime_env(), location)?;
        let options = TableOptions {
            external_stores: Some(super::SessionStores::of(state.runtime_env())),
            store_url: Some(store_url_of(location)?),
            ..TableOptions::default()
        };
        let table = Table::open_with(store.clone(), root.clone(), options);
        let schema = cmd.schema.as_arrow();
        let blob_options = cmd.options.keys().any(|k| k.starts_with("blob."));
        let feed = table_option(cmd, CHANGE_DATA_FEED, parse_switch, "'true' or 'false'")?;
        let share = table_option(cmd, PATCH_MAX_SHARE, parse_share, "a share between 0 and 1")?;
        match table.latest().await {
            Ok(snapshot)
                if share.is_some_and(|s| Some(s) != snapshot.manifest().patch_max_share) =>
            {
                return Err(DataFusionError::Plan(format!(
                    "'{location}' is a table already, with another {0}: ALTER TABLE t SET \
                     TBLPROPERTIES ('{0}' = '<share>') changes it",
                    PATCH_MAX_SHARE
                )));
            }
            Ok(snapshot) if feed.is_some_and(|f| f != snapshot.manifest().change_data_feed) => {
                return Err(DataFusionError::Plan(format!(
                    "'{location}' is a table already, with another change_data_feed: ALTER \
                     TABLE t SET TBLPROPERTIES ({} = true|false) starts or stops its change data",
                    CHANGE_DATA_FEED
                )));
            }
            Ok(_) if blob_options => {
                return Err(DataFusionError::Plan(format!(
                    "'{location}' is a table already: its blob columns' thresholds change with \
                     natal_blob_options('t', 'column', inline_limit, dedicated_threshold, \
                     pack_file_size)"
                )));
            }
            Err(crate::Error::TableNotFound { .. }) => {
                if schema.fields().is_empty() {
                    return Err(DataFusionError::Plan(format!(
                        "no natal table at '{location}': give its columns to create one"
                    )));
                }
                let schema = &super::write::blob_ddl::with_blob_options(schema, &cmd.options)?;
                let declared = super::write::declared::declarations(
                    schema,
                    cmd.column_defaults
                        .iter()
                        .map(|(name, expr)| (name.as_str(), expr)),
                    Some(&cmd.constraints),
                )?;
                let created = TableOptions {
                    change_data_feed: feed.unwrap_or(false),
                    patch_max_share: share,
                    ..TableOptions::default()
                };
                Table::create_declared(
                    store,
                    root,
                    (schema, &declared),
                    created,
                    futures::stream::empty().boxed(),
                )
                .await?;
            }
            Ok(snapshot) if !schema.fields().is_empty() => {
                let stored = snapshot.schema().to_arrow();
                if let Some(difference) = declared_difference(schema, &stored) {
                    return Err(DataFusionError::Plan(format!(
                        "the columns declared for '{location}' differ from the table's: \
                         {difference} (declare none to use the table's)"
                    )));
                }
            }
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        let view = ProviderView {
            version: None,
            system_columns: false,
        };
        Ok(Arc::new(NatalTableProvider::try_new(table, view).await?))
    }
}

/// The directories under `root` that hold a natal table (a manifest under `_versions`), by
/// name; names that do not parse as a plain table name are left out.
async fn stored_table_names(store: Arc<dyn ObjectStore>, root: Path) -> crate::Result<Vec<String>> {
    let listed = store.list_with_delimiter(Some(&root)).await?;
    let mut names = Vec::new();
    for dir in listed.common_prefixes {
        let Some(name) = dir.filename().map(str::to_string) else {
            continue;
        };
        let plain = TableName::parse(&name).is_ok_and(|parsed| {
            parsed.base == name && parsed.kind == TableKind::Rows && parsed.view.version.is_none()
        });
        if !plain {
            continue;
        }
        // A table dropped from a local disk leaves empty directories: no manifest, no table.
        let versions = dir.clone().join(crate::io::VERSIONS_DIR);
        if store
            .list(Some(&versions))
            .next()
            .await
            .transpose()?
            .is_some()
        {
            names.push(name);
        }
    }
    Ok(names)
}

fn blocking<T: Send + 'static>(
    work: impl std::future::Future<Output = crate::Result<T>> + Send + 'static,
) -> Result<T> {
    blocking_for(
        "CREATE TABLE and DROP TABLE on natal tables",
        "; use CREATE EXTERNAL TABLE ... STORED AS NATAL instead",
        work,
    )
}

/// Runs `work` to its end from synchronous planning code (DataFusion asks some answers
/// without `await`), which a multi-threaded tokio runtime allows; `what` needs it, and
/// `instead` says what to do without one.
pub(super) fn blocking_for<T: Send + 'static>(
    what: &str,
    instead: &str,
    work: impl std::future::Future<Output = crate::Result<T>> + Send + 'static,
) -> Result<T> {
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|_| DataFusionError::Execution(format!("{what} need a tokio runtime")))?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Err(DataFusionError::Execution(format!(
            "{what} need a multi-threaded tokio runtime{instead}"
        )));
    }
    tokio::task::block_in_place(|| handle.block_on(work)).map_err(DataFusionError::from)
}

/// How columns declared for an existing table differ from its stored ones, if they do:
/// names, order, types (string and binary types of the same values match whatever their
/// layout: `VARCHAR` may be stored as `Utf8` or `Utf8View`), and `NOT NULL` declared for a
/// column that holds nulls.
fn declared_difference(declared: &ArrowSchema, stored: &ArrowSchema) -> Option<String> {
    let describe = |f: &Field| {
        let null = if f.is_nullable() { "" } else { " NOT NULL" };
        format!("{} {}{null}", f.name(), f.data_type())
    };
    let family = |t: &DataType| match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    };
    if declared.fields().len() != stored.fields().len() {
        let names = |s: &ArrowSchema| {
            s.fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Some(format!(
            "{} columns declared ({}), the table has {} ({})",
            declared.fields().len(),
            names(declared),
            stored.fields().len(),
            names(stored)
        ));
    }
    declared
        .fields()
        .iter()
        .zip(stored.fields())
        .enumerate()
        .find(|(_, (d, s))| {
            d.name() != s.name()
                || family(d.data_type()) != family(s.data_type())
                // A nullable declaration reads a NOT NULL column as it is.
                || (!d.is_nullable() && s.is_nullable())
        })
        .map(|(i, (d, s))| {
            format!(
                "column {} is declared `{}`, stored `{}`",
                i + 1,
                describe(d),
                describe(s)
            )
        })
}

/// The user columns of the newest version of `table` that reads; none if no version does.
async fn newest_readable_schema(table: &Table) -> SchemaRef {
    let versions = table.store().list_versions().await.unwrap_or_default();
    for (version, _) in versions.into_iter().rev() {
        if let Ok(snapshot) = table.at_version(version).await {
            return snapshot.schema().to_arrow();
        }
    }
    Arc::new(ArrowSchema::empty())
}

/// The object store (registered with the runtime) and path a location names.
pub fn resolve_location(
    runtime: &RuntimeEnv,
    location: &str,
) -> Result<(Arc<dyn ObjectStore>, Path)> {
    let url = location_url(location)?;
    let store_url = ObjectStoreUrl::parse(&url[..url::Position::BeforePath])?;
    let store = runtime.object_store(&store_url)?;
    let path = Path::from_url_path(url.path())
        .map_err(|e| DataFusionError::Plan(format!("bad location '{location}': {e}")))?;
    Ok((store, path))
}

/// The URL of the store `location` is in: its scheme and authority (`s3://bucket`,
/// `file://`).
pub fn store_url_of(location: &str) -> Result<String> {
    let url = location_url(location)?;
    Ok(url[..url::Position::BeforePath].to_string())
}

/// A local file-system failure at `path`, as natal reports one.
fn local_io(path: &str, source: std::io::Error) -> DataFusionError {
    DataFusionError::from(crate::Error::Io {
        path: path.to_string(),
        source,
    })
}

/// A LOCATION as a URL: URLs as given, plain paths as `file://` URLs (made absolute).
/// Nothing is created: a table's directory appears with its first file.
pub fn location_url(location: &str) -> Result<url::Url> {
    Ok(location_url_and_path(location)?.0)
}

/// [`location_url`], creating a plain path's directory if it does not exist yet (a catalog
/// root, which must exist to be listed).
pub fn url_creating_directory(location: &str) -> Result<url::Url> {
    let (url, local) = location_url_and_path(location)?;
    if let Some(directory) = local {
        std::fs::create_dir_all(&directory).map_err(|source| local_io(location, source))?;
    }
    Ok(url)
}

/// The URL, and the local directory when `location` is a plain path.
fn location_url_and_path(location: &str) -> Result<(url::Url, Option<std::path::PathBuf>)> {
    if let Ok(url) = url::Url::parse(location) {
        if url.scheme().len() > 1 {
            return Ok((url, None));
        }
    }
    let path = std::path::Path::new(location);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| local_io(location, source))?
            .join(path)
    };
    let url = url::Url::from_directory_path(&absolute)
        .map_err(|_| DataFusionError::Plan(format!("'{location}' is not a usable path")))?;
    Ok((url, Some(absolute)))
}
