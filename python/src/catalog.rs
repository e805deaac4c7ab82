//! A catalog: the natal tables under one root (a directory or object-store URL) in a
//! DataFusion session of their own, where SQL reaches every natal feature.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arrow::array::{RecordBatch, RecordBatchIterator};
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use datafusion::datasource::MemTable;

use datafusion::prelude::SessionContext;
use natal::datafusion::{resolve_location, url_creating_directory};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::memory::InMemory;
use object_store::ObjectStore;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_io::{batches, reader_of, ArrowStream};
use crate::errors::{datafusion_error, natal_error};
use crate::provider::TableFunction;
use crate::runtime::{runtime, wait};
use crate::session::Session;
use crate::table::Table;

/// The one in-memory store of the process: `memory://` roots of every catalog share it,
/// so a table written through one is there for the next (until the process ends).
static MEMORY: OnceLock<Arc<InMemory>> = OnceLock::new();

/// The tables under a root (`natal.connect`).
#[pyclass(module = "natal._natal", frozen)]
pub struct Catalog {
    pub session: Arc<Session>,
}

/// The schema of the sources registered for merges.
const SOURCES_SCHEMA: &str = "natal_sources";

/// Sources registered so far (their names' numbers).
static SOURCES: AtomicU64 = AtomicU64::new(0);

impl Catalog {
    /// The session's schema of merge sources, made at the first.
    fn sources(&self) -> PyResult<Arc<dyn SchemaProvider>> {
        let ctx = &self.session.ctx;
        let state = ctx.state();
        let catalog_name = state.config_options().catalog.default_catalog.clone();
        let catalog = ctx
            .catalog(&catalog_name)
            .ok_or_else(|| PyValueError::new_err("the session has no default catalog"))?;
        if let Some(schema) = catalog.schema(SOURCES_SCHEMA) {
            return Ok(schema);
        }
        let schema: Arc<dyn SchemaProvider> = Arc::new(MemorySchemaProvider::new());
        catalog
            .register_schema(SOURCES_SCHEMA, schema.clone())
            .map_err(datafusion_error)?;
        Ok(schema)
    }
}

#[pymethods]
impl Catalog {
    /// The catalog at `root`: a directory (made if missing), `s3://bucket/prefix` (credentials,
    /// region and endpoint from the environment as the AWS tools read them, and from
    /// `storage_options`, e.g. `{"aws_endpoint": ..., "aws_allow_http": "true"}`),
    /// `gs://bucket/prefix` (the environment's Google settings and `google_*` options) or
    /// `memory://` (this process's memory).
    #[new]
    #[pyo3(signature = (root, storage_options=None))]
    fn new(root: String, storage_options: Option<HashMap<String, String>>) -> PyResult<Self> {
        let ctx = SessionContext::new();
        let url = url_creating_directory(&root).map_err(datafusion_error)?;
        let options = storage_options.unwrap_or_default();
        let store: Option<Arc<dyn ObjectStore>> = match url.scheme() {
            "file" => None,
            "s3" | "s3a" => Some(s3_store(&url, &options)?),
            "gs" | "gcs" => Some(gcs_store(&url, &options)?),
            "memory" => Some(MEMORY.get_or_init(|| Arc::new(InMemory::new())).clone()),
            other => {
                return Err(PyValueError::new_err(format!(
                    "{root}: unsupported scheme '{other}' (use a path, file://, s3://, gs:// or memory://)"
                )))
            }
        };
        if store.is_none() && !options.is_empty() {
            return Err(PyValueError::new_err(
                "storage_options are for object stores; a local root takes none",
            ));
        }
        if let Some(store) = store {
            let base = url::Url::parse(&url[..url::Position::BeforePath])
                .map_err(|e| PyValueError::new_err(format!("{root}: {e}")))?;
            ctx.runtime_env().register_object_store(&base, store);
        }
        natal::datafusion::register(&ctx, url.as_str()).map_err(datafusion_error)?;
        let root = url.as_str().to_string();
        Ok(Self {
            session: Arc::new(Session { ctx, root }),
        })
    }

    /// The root, as a URL.
    #[getter]
    fn root(&self) -> String {
        self.session.root.clone()
    }

    /// Runs one SQL statement (natal's SQL: `t@v3`, `"t$rows"`, `natal_*` functions, ...);
    /// its result as a stream read as the caller reads it.
    fn sql(&self, py: Python<'_>, query: &str) -> PyResult<ArrowStream> {
        let ctx = self.session.ctx.clone();
        let query = query.to_string();
        let stream = wait(py, async move {
            let frame = natal::datafusion::sql(&ctx, &query)
                .await
                .map_err(datafusion_error)?;
            frame.execute_stream().await.map_err(datafusion_error)
        })?;
        Ok(ArrowStream::of_stream(runtime()?, stream))
    }

    /// Runs one SQL statement and gathers its whole result in natal (Ctrl-C stops it
    /// while it runs); the result as a stream of those batches.
    fn sql_gathered(&self, py: Python<'_>, query: &str) -> PyResult<ArrowStream> {
        let ctx = self.session.ctx.clone();
        let query = query.to_string();
        let (schema, batches) = wait(py, async move {
            let frame = natal::datafusion::sql(&ctx, &query)
                .await
                .map_err(datafusion_error)?;
            let schema = Arc::new(frame.schema().as_arrow().clone());
            let batches = frame.collect().await.map_err(datafusion_error)?;
            Ok((schema, batches))
        })?;
        let schema = batches.first().map_or(schema, |b| b.schema());
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        Ok(ArrowStream::new(Box::new(reader)))
    }

    /// The `natal_*` table functions, bound to this catalog's tables, for a datafusion-python
    /// session (`Catalog.register_functions`).
    fn table_functions(&self) -> PyResult<Vec<TableFunction>> {
        let ctx = &self.session.ctx;
        let mut names: Vec<String> = (ctx.state().table_functions().keys())
            .filter(|name| name.starts_with("natal_"))
            .cloned()
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|name| {
                let function = ctx.table_function(&name).map_err(datafusion_error)?;
                Ok(TableFunction::new(name, function.function().clone()))
            })
            .collect()
    }

    /// The names of the tables under the root.
    fn table_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let ctx = self.session.ctx.clone();
        wait(py, async move {
            let state = ctx.state();
            let defaults = &state.config_options().catalog;
            let schema = ctx
                .catalog(&defaults.default_catalog)
                .and_then(|c| c.schema(&defaults.default_schema))
                .ok_or_else(|| PyValueError::new_err("the catalog has no default schema"))?;
            let mut names = schema.table_names();
            names.sort();
            Ok(names)
        })
    }

    /// Registers `data` (Arrow data, gathered: a merge reads its source whole) as a table
    /// of the session's `natal_sources` schema, for a statement to read; returns its SQL
    /// name. [`Self::deregister_source`] forgets it.
    fn register_source(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<String> {
        let reader = reader_of(data)?;
        let schema = reader.schema();
        let batches: Vec<RecordBatch> = py
            .detach(|| reader.collect::<Result<_, _>>())
            .map_err(|e| PyValueError::new_err(format!("cannot read the source: {e}")))?;
        let source = MemTable::try_new(schema, vec![batches]).map_err(datafusion_error)?;
        let number = SOURCES.fetch_add(1, Ordering::Relaxed);
        let name = format!("source_{number}");
        self.sources()?
            .register_table(name.clone(), Arc::new(source))
            .map_err(datafusion_error)?;
        Ok(format!("{SOURCES_SCHEMA}.{name}"))
    }

    /// Forgets a source [`Self::register_source`] registered.
    fn deregister_source(&self, name: &str) -> PyResult<()> {
        let table = name
            .strip_prefix(&format!("{SOURCES_SCHEMA}."))
            .unwrap_or(name);
        self.sources()?
            .deregister_table(table)
            .map_err(datafusion_error)?;
        Ok(())
    }

    /// Creates table `name` from `data` (Arrow data, streamed) or, with no data, empty with
    /// `schema` (an object with `__arrow_c_schema__`, or Arrow data whose schema is used).
    #[pyo3(signature = (name, data))]
    fn create_table(&self, py: Python<'_>, name: &str, data: &Bound<'_, PyAny>) -> PyResult<Table> {
        let location = self.session.location(name)?;
        let reader = reader_of(data)?;
        let ctx = self.session.ctx.clone();
        let schema = reader.schema();
        let created = location.clone();
        wait(py, async move {
            let (store, path) =
                resolve_location(&ctx.runtime_env(), &created).map_err(datafusion_error)?;
            let options = natal::TableOptions::default();
            let created =
                natal::Table::create_from(store, path, &schema, options, batches(reader)).await;
            created.map(|_| ()).map_err(natal_error)
        })?;
        self.handle(name, &location)
    }

    /// A handle on table `name` (its latest version at each read); `NotFoundError` when
    /// there is none.
    fn open_table(&self, py: Python<'_>, name: &str) -> PyResult<Table> {
        let table = self.handle(name, &self.session.location(name)?)?;
        let latest = table.natal().clone();
        wait(
            py,
            async move { latest.latest().await.map_err(natal_error) },
        )?;
        Ok(table)
    }
}

impl Catalog {
    /// The handle on table `name` at `location`, reading external blob values through the
    /// session's stores (nothing read yet).
    fn handle(&self, name: &str, location: &str) -> PyResult<Table> {
        let table =
            natal::datafusion::open_table(&self.session.ctx, location).map_err(datafusion_error)?;
        Ok(Table::new(
            self.session.clone(),
            name.to_string(),
            table,
            None,
        ))
    }
}

/// An S3 store for `url`: the environment's settings, then `options` (named as
/// `object_store` names them: `aws_access_key_id`, `aws_endpoint`, `aws_region`, ...).
fn s3_store(url: &url::Url, options: &HashMap<String, String>) -> PyResult<Arc<dyn ObjectStore>> {
    let mut builder = AmazonS3Builder::from_env().with_url(url.as_str());
    for (key, value) in options {
        builder = builder.with_config(option_key(key, "S3")?, value);
    }
    // An S3-compatible server has no AWS region: as the CLI, `us-east-1` then.
    let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
    let region = builder.get_config_value(&AmazonS3ConfigKey::Region);
    if endpoint.is_some() && region.is_none() {
        builder = builder.with_region("us-east-1");
    }
    let store = builder
        .build()
        .map_err(|e| PyValueError::new_err(format!("{url}: {e}")))?;
    Ok(Arc::new(store))
}

/// A Google Cloud Storage store for `url`: the environment's settings, then `options`
/// (`google_service_account`, `google_service_account_key`, ...).
fn gcs_store(url: &url::Url, options: &HashMap<String, String>) -> PyResult<Arc<dyn ObjectStore>> {
    let mut builder = GoogleCloudStorageBuilder::from_env().with_url(url.as_str());
    for (key, value) in options {
        builder = builder.with_config(option_key(key, "GCS")?, value);
    }
    let store = builder
        .build()
        .map_err(|e| PyValueError::new_err(format!("{url}: {e}")))?;
    Ok(Arc::new(store))
}

/// A storage option's key as `object_store` names it for the `store` kind.
fn option_key<K: FromStr>(key: &str, store: &str) -> PyResult<K> {
    K::from_str(key)
        .map_err(|_| PyValueError::new_err(format!("unknown {store} storage option '{key}'")))
}
