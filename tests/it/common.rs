//! Shared fixtures: a small schema, batches, in-memory tables, and reading a whole version
//! back as plain rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, UInt64Type};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use natal::{ScanRequest, Snapshot, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::ObjectStore;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("val", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// Rows `(key, val)`; `name` is derived from both so a misplaced column shows.
pub fn batch(rows: &[(i64, i64)]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| format!("n{}-{}", r.0, r.1)),
            )),
        ],
    )
    .expect("valid batch")
}

pub async fn memory_table(max_rows_per_fragment: u64) -> (Table, Arc<dyn ObjectStore>) {
    memory_table_with(TableOptions {
        max_rows_per_fragment,
        ..Default::default()
    })
    .await
}

pub async fn memory_table_with(options: TableOptions) -> (Table, Arc<dyn ObjectStore>) {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let table = Table::create(store.clone(), "t".into(), &schema(), options)
        .await
        .expect("create");
    (table, store)
}

/// One live row as a test sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub addr: u64,
    pub key: i64,
    pub val: i64,
}

/// Every live row of a version, by id. Also checks `name` agrees with key and val.
pub async fn read_rows(snapshot: &Snapshot) -> natal::Result<BTreeMap<u64, Row>> {
    let batches: Vec<RecordBatch> = snapshot
        .scan(ScanRequest {
            with_row_id: true,
            with_row_addr: true,
            ..Default::default()
        })
        .await?
        .try_collect()
        .await?;
    let mut rows = BTreeMap::new();
    for batch in batches {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let vals = batch.column(1).as_primitive::<Int64Type>();
        let names = batch.column(2).as_string::<i32>();
        let column = |name: &str| batch.column_by_name(name).expect("system column");
        let ids = column(natal::ROW_ID).as_primitive::<UInt64Type>();
        let addrs = column(natal::ROW_ADDR).as_primitive::<UInt64Type>();
        // Columns past `key, val, name` are the model test's extras, which hold NULL or
        // their row's key (`model_schema::check_extras` says which).
        for (field, extra) in batch.schema().fields().iter().zip(batch.columns()).skip(3) {
            if !natal::internals::format::RESERVED_COLUMNS.contains(&field.name().as_str()) {
                let extra = as_keys(extra);
                let extra = extra.as_primitive::<Int64Type>();
                let keys_or_null =
                    (0..extra.len()).all(|i| extra.is_null(i) || extra.value(i) == keys.value(i));
                assert!(
                    keys_or_null,
                    "extra {} holds a value not its key",
                    field.name()
                );
            }
        }
        for i in 0..batch.num_rows() {
            let row = Row {
                addr: addrs.value(i),
                key: keys.value(i),
                val: vals.value(i),
            };
            assert_eq!(
                names.value(i),
                format!("n{}-{}", row.key, row.val),
                "columns misaligned"
            );
            assert!(
                rows.insert(ids.value(i), row).is_none(),
                "id {} twice",
                ids.value(i)
            );
        }
    }
    Ok(rows)
}

pub fn addr(fragment: u32, offset: u32) -> u64 {
    ((fragment as u64) << 32) | offset as u64
}

/// A predicate over the `key` column.
pub fn key_matches(
    f: impl Fn(i64) -> bool + Send + Sync + 'static,
) -> impl Fn(&RecordBatch) -> natal::Result<arrow::array::BooleanArray> + Send + Sync {
    move |batch: &RecordBatch| {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        Ok(keys.iter().map(|k| k.map(&f)).collect())
    }
}

/// `key mod modulus == rest` as a filter the scan evaluates as it reads (what a SQL DELETE's
/// WHERE becomes), reading only `key`.
#[derive(Debug)]
pub struct KeyModulo {
    pub modulus: i64,
    pub rest: i64,
    columns: Vec<String>,
}

impl KeyModulo {
    pub fn new(modulus: i64, rest: i64) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            modulus,
            rest,
            columns: vec!["key".to_string()],
        })
    }
}

impl std::fmt::Display for KeyModulo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "key % {} = {}", self.modulus, self.rest)
    }
}

impl natal::RowPredicate for KeyModulo {
    fn columns(&self) -> &[String] {
        &self.columns
    }
    fn needs_row_id(&self) -> bool {
        false
    }
    fn needs_row_addr(&self) -> bool {
        false
    }
    fn evaluate(&self, batch: &RecordBatch) -> natal::Result<arrow::array::BooleanArray> {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        Ok(keys
            .iter()
            .map(|k| k.map(|k| k.rem_euclid(self.modulus) == self.rest))
            .collect())
    }
}

/// An update that adds `delta` to `val`.
pub fn add_to_val(delta: i64) -> impl Fn(&RecordBatch) -> natal::Result<RecordBatch> + Send + Sync {
    move |batch: &RecordBatch| {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let vals = batch.column(1).as_primitive::<Int64Type>();
        let rows: Vec<(i64, i64)> = keys
            .values()
            .iter()
            .zip(vals.values())
            .map(|(k, v)| (*k, v + delta))
            .collect();
        Ok(self::batch(&rows))
    }
}

/// `sql`'s answer through natal's SQL, as the text DataFusion prints.
pub async fn answer(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<String> {
    let batches = natal::datafusion::sql(ctx, sql).await?.collect().await?;
    Ok(arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
}

/// The rows of `batches` as sorted lines: equal multisets of rows, in any order.
pub fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    let text = arrow::util::pretty::pretty_format_batches(batches)
        .unwrap()
        .to_string();
    let mut rows: Vec<String> = (text.lines())
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}

/// A table `t (k BIGINT, v BIGINT)` of `fragments` fragments of 1,000 rows (`k` from 0,
/// `v = k % 7`), one INSERT each: what to create it with.
pub fn fragmented_table(fragments: i64) -> Vec<String> {
    let mut statements = vec!["CREATE TABLE t (k BIGINT, v BIGINT)".to_string()];
    statements.extend((0..fragments).map(|part| {
        format!(
            "INSERT INTO t SELECT value, value % 7 FROM generate_series({}, {})",
            part * 1000,
            part * 1000 + 999
        )
    }));
    statements
}

/// Runs `sql` to completion, panicking with the statement on failure.
pub async fn run(ctx: &SessionContext, sql: &str) {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A session with a natal catalog over a fresh temporary directory (kept alive by the
/// returned guard).
pub fn catalog_session() -> (tempfile::TempDir, SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    (dir, ctx)
}

/// `sql`'s physical plan, and the plan as DataFusion prints it.
pub async fn physical_plan(ctx: &SessionContext, sql: &str) -> (Arc<dyn ExecutionPlan>, String) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let shown = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(false)
        .to_string();
    (plan, shown)
}

/// The sum of a metric over every node of `plan` named `node`.
pub fn metric(plan: &Arc<dyn ExecutionPlan>, node: &str, name: &str) -> usize {
    let own = (plan.name() == node)
        .then(|| plan.metrics())
        .flatten()
        .and_then(|m| m.sum_by_name(name))
        .map_or(0, |v| v.as_usize());
    own + plan
        .children()
        .into_iter()
        .map(|c| metric(c, node, name))
        .sum::<usize>()
}

/// The type of the model test's interval extras.
pub const INTERVAL: arrow::datatypes::DataType =
    arrow::datatypes::DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano);

/// How the model test's blob extras place values: inline below 40 bytes, dedicated from
/// 400, packs rolled at 1,000 bytes, so its values take every kind.
pub const MODEL_BLOB: natal::BlobColumn = natal::BlobColumn {
    inline_limit: 40,
    dedicated_threshold: 400,
    pack_file_size: 1000,
};

/// Keys below this have their external blob values in [`model_blob_stores`].
const EXTERNAL_KEYS: i64 = 100_000;

/// The bytes a blob extra holds for `key`: its 8 little-endian bytes, repeated to a size
/// that crosses [`MODEL_BLOB`]'s thresholds as keys grow.
pub fn blob_value(key: i64) -> Vec<u8> {
    let repeats = (key.rem_euclid(80) * 13 % 80 + 1) as usize;
    key.to_le_bytes().repeat(repeats)
}

/// The value a blob extra is written with for `key`: every fifth key an external reference
/// to its 8 bytes in `memory://model/keys.bin` (so reads fetch them from there), else its
/// [`blob_value`].
pub fn blob_written(key: i64) -> Vec<u8> {
    if key.rem_euclid(5) == 4 && (0..EXTERNAL_KEYS).contains(&key) {
        let at = key as u64 * 8;
        return natal::external_blob("memory://model/keys.bin", Some(at..at + 8)).expect("uri");
    }
    blob_value(key)
}

/// What [`blob_written`] reads back as.
fn blob_read(key: i64) -> Vec<u8> {
    if key.rem_euclid(5) == 4 && (0..EXTERNAL_KEYS).contains(&key) {
        return key.to_le_bytes().to_vec();
    }
    blob_value(key)
}

/// The stores the model test's tables read external blob values through.
pub fn model_blob_stores() -> Arc<dyn object_store::registry::ObjectStoreRegistry> {
    use object_store::registry::ObjectStoreRegistry;
    let keys: Vec<u8> = (0..EXTERNAL_KEYS).flat_map(|k| k.to_le_bytes()).collect();
    let bucket = InMemory::new();
    futures::executor::block_on(object_store::ObjectStoreExt::put(
        &bucket,
        &object_store::path::Path::from("keys.bin"),
        keys.into(),
    ))
    .expect("keys object");
    let stores = object_store::registry::DefaultObjectStoreRegistry::new();
    stores.register(
        url::Url::parse("memory://model/").expect("url"),
        Arc::new(bucket),
    );
    Arc::new(stores)
}

/// An extra's values as the keys they hold (an interval's nanoseconds, a blob value's
/// first 8 bytes — and a blob value must be exactly its key's, byte for byte).
pub fn as_keys(column: &arrow::array::ArrayRef) -> arrow::array::ArrayRef {
    if column.data_type() == &DataType::LargeBinary {
        let keys: arrow::array::Int64Array = column
            .as_binary::<i64>()
            .iter()
            .map(|v| {
                let v = v?;
                let key = i64::from_le_bytes(v.get(..8)?.try_into().ok()?);
                assert_eq!(v, blob_read(key).as_slice(), "key {key}'s blob value");
                Some(key)
            })
            .collect();
        return Arc::new(keys);
    }
    if column.data_type() == &INTERVAL {
        let intervals = column.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
        let keys: arrow::array::Int64Array =
            intervals.iter().map(|v| v.map(|v| v.nanoseconds)).collect();
        return Arc::new(keys);
    }
    arrow::compute::cast(column, &DataType::Int64).expect("cast")
}

/// The footer, with its page index, of the first data file of `table`'s latest version in
/// `store` (the store under any counting wrapper).
pub async fn first_file_footer(
    table: &Table,
    store: &Arc<dyn ObjectStore>,
) -> parquet::file::metadata::ParquetMetaData {
    use object_store::ObjectStoreExt;
    let snapshot = table.latest().await.unwrap();
    let file = &snapshot.manifest().fragments[0].files[0];
    let path = table.store().path(&file.path);
    let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
    let options = parquet::file::serialized_reader::ReadOptionsBuilder::new()
        .with_page_index()
        .build();
    let reader =
        parquet::file::serialized_reader::SerializedFileReader::new_with_options(bytes, options)
            .unwrap();
    parquet::file::reader::FileReader::metadata(&reader).clone()
}

/// A store over the local file system that counts what is read through it.
pub fn counted_local_store() -> Arc<natal::internals::io::InstrumentedStore> {
    Arc::new(natal::internals::io::InstrumentedStore::new(Arc::new(
        object_store::local::LocalFileSystem::new(),
    )))
}

/// A runtime whose local files (`file://`) are read through `store`.
pub fn runtime_reading_through(
    store: Arc<natal::internals::io::InstrumentedStore>,
) -> Arc<datafusion::execution::runtime_env::RuntimeEnv> {
    let runtime = datafusion::execution::runtime_env::RuntimeEnv::default();
    runtime.register_object_store(&url::Url::parse("file://").unwrap(), store);
    Arc::new(runtime)
}

/// A session with natal registered over the directory `root`, its files read through the
/// counting store it returns.
pub fn counted_session(
    root: &std::path::Path,
) -> (SessionContext, Arc<natal::internals::io::InstrumentedStore>) {
    let store = counted_local_store();
    let config = datafusion::prelude::SessionConfig::new();
    let ctx = SessionContext::new_with_config_rt(config, runtime_reading_through(store.clone()));
    natal::datafusion::register(&ctx, root.to_str().unwrap()).unwrap();
    (ctx, store)
}

/// How many of `snapshot`'s fragments carry row patches.
pub fn patched_fragments(snapshot: &Snapshot) -> usize {
    let fragments = &snapshot.manifest().fragments;
    fragments.iter().filter(|f| !f.patches.is_empty()).count()
}
