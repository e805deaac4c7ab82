//! Blob columns: values of every kind written and read back, in Rust and SQL; a read that
//! does not select the column touches no sidecar; damaged sidecars are `Corrupt`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, BinaryArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use futures::{StreamExt as _, TryStreamExt};
use natal::{BlobColumn, ScanRequest, Snapshot, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt as _};

/// Thresholds small enough that a test's values take every kind: inline below 100 bytes,
/// dedicated from 1,000, packed sidecars rolled at 2,500 bytes.
pub const SMALL: BlobColumn = BlobColumn {
    inline_limit: 100,
    dedicated_threshold: 1000,
    pack_file_size: 2500,
};

pub fn blob_schema(blob: BlobColumn) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("img", DataType::Binary, true).with_metadata(blob.to_metadata()),
    ]))
}

/// The value of `key`: `None` for every 11th key, else bytes derived from the key, of a size
/// that cycles through inline, packed and dedicated.
pub fn value_of(key: i64) -> Option<Vec<u8>> {
    if key % 11 == 10 {
        return None;
    }
    let size = [0usize, 7, 99, 100, 640, 999, 1000, 3100][key as usize % 8];
    Some((0..size).map(|i| (key as usize * 31 + i) as u8).collect())
}

pub fn blob_batch(keys: std::ops::Range<i64>) -> RecordBatch {
    let values: Vec<Option<Vec<u8>>> = keys.clone().map(value_of).collect();
    RecordBatch::try_new(
        blob_schema(SMALL),
        vec![
            Arc::new(Int64Array::from_iter_values(keys)),
            Arc::new(BinaryArray::from_iter(values.iter().map(|v| v.as_deref()))),
        ],
    )
    .unwrap()
}

/// The batches `request` reads of `snapshot`.
pub async fn scan(snapshot: &Snapshot, request: ScanRequest) -> natal::Result<Vec<RecordBatch>> {
    snapshot.scan(request).await?.try_collect().await
}

/// Every row of `snapshot` as key → value, checking each value is its key's.
pub async fn read_blobs(snapshot: &Snapshot) -> natal::Result<BTreeMap<i64, Option<Vec<u8>>>> {
    let batches = scan(snapshot, ScanRequest::new()).await?;
    let mut rows = BTreeMap::new();
    for batch in batches {
        assert_eq!(batch.column(1).data_type(), &DataType::Binary);
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let values = batch.column(1).as_binary::<i32>();
        for i in 0..batch.num_rows() {
            let value = (!values.is_null(i)).then(|| values.value(i).to_vec());
            assert_eq!(value, value_of(keys.value(i)), "key {}", keys.value(i));
            rows.insert(keys.value(i), value);
        }
    }
    Ok(rows)
}

pub async fn files_under(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    let mut files: Vec<String> = store
        .list(Some(&Path::from(prefix)))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    files.sort();
    files
}

/// An empty table `t` of [`blob_schema`] with [`SMALL`] thresholds, in memory.
pub async fn blob_table() -> (Table, Arc<dyn ObjectStore>) {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let table = Table::create(
        store.clone(),
        "t".into(),
        &blob_schema(SMALL),
        // Updates rewrite rows, carrying their blob values (what these tests look at),
        // rather than patch their other columns.
        TableOptions {
            patch_max_share: Some(0.0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    (table, store)
}

#[tokio::test]
async fn values_of_every_kind_read_back_as_written() {
    let (table, store) = blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let rows = read_blobs(&snapshot).await.unwrap();
    assert_eq!(rows.len(), 40);
    let sidecars: Vec<String> = files_under(&store, "t/data")
        .await
        .into_iter()
        .filter(|f| f.ends_with(".blob"))
        .collect();
    // 5 dedicated values (sizes 1000 and 3100 among 40 keys, less the nulls), packed values
    // of 100..999 bytes rolled at 2,500 bytes: more than one pack.
    let dedicated = (0..40)
        .filter_map(value_of)
        .filter(|v| v.len() >= 1000)
        .count();
    let packed: usize = (0..40)
        .filter_map(value_of)
        .filter(|v| (100..1000).contains(&v.len()))
        .map(|v| v.len())
        .sum();
    assert!(
        sidecars.len() >= dedicated + packed.div_ceil(2500),
        "{sidecars:?}"
    );
    // The payload is in the sidecars, not the data file.
    let data_file: Vec<_> = snapshot.manifest().fragments[0].files.clone();
    let total: usize = (0..40).filter_map(value_of).map(|v| v.len()).sum();
    assert!((data_file[0].file_size_bytes as usize) < total / 2);
}

/// The sidecar files of the table at `t`.
pub async fn sidecars(store: &Arc<dyn ObjectStore>) -> Vec<String> {
    files_under(store, "t/data")
        .await
        .into_iter()
        .filter(|f| f.ends_with(".blob"))
        .collect()
}

/// Rows keep their values of every kind through updates, deletes, compaction and time
/// travel; cleanup removes the sidecars of the data files it removes, and only those.
#[tokio::test]
async fn blobs_stay_right_through_every_write_and_cleanup() {
    let (table, store) = blob_table().await;
    table.append(vec![blob_batch(0..30)]).await.unwrap();
    table.append(vec![blob_batch(30..60)]).await.unwrap();
    let first = table.latest().await.unwrap();
    // Every value kept as it is: the rows move, their payloads with them.
    let keep_values = |batch: &RecordBatch| Ok(batch.project(&[0, 1])?);
    table
        .update_where(crate::common::key_matches(|k| k % 3 == 0), &keep_values)
        .await
        .unwrap();
    table
        .delete_where(crate::common::key_matches(|k| k % 5 == 1))
        .await
        .unwrap();
    let live: Vec<i64> = (0..60).filter(|k| k % 5 != 1).collect();
    let rows = read_blobs(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), live);
    // Compaction moves rows, not payloads: it writes no sidecar (the Blob Reuse Index;
    // no pack repacked however dead).
    let before_compaction = sidecars(&store).await;
    let reuse_only = natal::CompactOptions {
        repack_below_live_fraction: 0.0,
        ..Default::default()
    };
    table.compact(reuse_only).await.unwrap();
    assert_eq!(sidecars(&store).await, before_compaction);
    let rows = read_blobs(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), live);
    // Time travel reads the first version's sidecars, still there.
    assert_eq!(read_blobs(&first).await.unwrap().len(), 60);
    let before = sidecars(&store).await;
    table.cleanup(crate::faults::keep_last(1)).await.unwrap();
    let after = sidecars(&store).await;
    assert!(after.len() < before.len(), "{before:?} -> {after:?}");
    let latest = table.latest().await.unwrap();
    // What is left is a live file's own, or named by a live file's reuse index.
    let files = latest.manifest().fragments.iter().flat_map(|f| &f.files);
    let mut owners = Vec::new();
    let mut reused = Vec::new();
    for file in files {
        owners.push(file.path.as_str().trim_end_matches(".parquet").to_string());
        let sources = file.blob_reuse_index.iter().flat_map(|i| i.sources());
        for local in sources.flat_map(|s| &s.local_ids) {
            reused.push(format!("t/{}", file.sidecar(*local).as_str()));
        }
    }
    assert!(!reused.is_empty(), "compaction reused the sidecars");
    for sidecar in &after {
        let owner = sidecar.trim_start_matches("t/").rsplit_once('/').unwrap().0;
        assert!(
            owners.iter().any(|f| f == owner) || reused.contains(sidecar),
            "{sidecar} outlived every file that names it"
        );
    }
    let rows = read_blobs(&latest).await.unwrap();
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), live);
}

/// Rows stream into their data file: sidecars are written as batches come, before the
/// fragment is full, and a stream that fails midway leaves none of them behind.
#[tokio::test]
async fn a_failed_streaming_write_leaves_no_sidecar() {
    let (table, store) = blob_table().await;
    let (sent, seen) = (
        Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        store.clone(),
    );
    let counter = sent.clone();
    let batches = futures::stream::iter(0..4).then(move |at| {
        let (counter, seen) = (counter.clone(), seen.clone());
        async move {
            if at == 3 {
                // The two batches before hold sidecars already: written, not held.
                assert!(
                    !sidecars(&seen).await.is_empty(),
                    "sidecars wait for the fragment"
                );
                return Err(natal::Error::InvalidInput("the input failed".into()));
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(blob_batch(at * 20..at * 20 + 20))
        }
    });
    let error = table
        .append_stream(futures::StreamExt::boxed(batches))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("the input failed"), "{error}");
    assert_eq!(sent.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(sidecars(&store).await, Vec::<String>::new());
    assert_eq!(files_under(&store, "t/data").await, Vec::<String>::new());
    assert_eq!(table.latest().await.unwrap().count_rows(), 0);
}

/// A scan that does not select the blob column reads no sidecar: with every sidecar gone it
/// still reads; one that selects it fails with `Corrupt` naming the missing sidecar, and a
/// truncated sidecar is `Corrupt` too, never a short value.
#[tokio::test]
async fn sidecars_are_read_only_when_asked_and_damage_is_corrupt() {
    let (table, store) = blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let all = sidecars(&store).await;
    let first = Path::from(all[0].as_str());
    let bytes = store.get(&first).await.unwrap().bytes().await.unwrap();
    store
        .put(&first, bytes.slice(..bytes.len() - 1).into())
        .await
        .unwrap();
    let error = read_blobs(&snapshot).await.unwrap_err();
    assert!(
        matches!(&error, natal::Error::Corrupt { path, .. } if all[0].ends_with(path.as_str())),
        "{error}"
    );
    for sidecar in &all {
        store.delete(&Path::from(sidecar.as_str())).await.unwrap();
    }
    let keys_only = ScanRequest {
        columns: Some(vec!["key".to_string()]),
        ..Default::default()
    };
    let batches = scan(&snapshot, keys_only).await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 40);
    let error = read_blobs(&snapshot).await.unwrap_err();
    assert!(
        matches!(&error, natal::Error::Corrupt { reason, .. } if reason.contains("missing")),
        "{error}"
    );
}

/// A blob declaration on a column that cannot hold bytes, or thresholds out of order, is
/// refused at create, with nothing written.
#[tokio::test]
async fn bad_blob_declarations_are_refused_at_create() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let on_text = Schema::new(vec![
        Field::new("s", DataType::Utf8, true).with_metadata(SMALL.to_metadata())
    ]);
    let disordered = BlobColumn {
        inline_limit: 5000,
        ..SMALL
    };
    for schema in [on_text, (*blob_schema(disordered)).clone()] {
        let error = Table::create(store.clone(), "t".into(), &schema, TableOptions::default())
            .await
            .expect_err("refused");
        assert!(matches!(error, natal::Error::InvalidInput(_)), "{error}");
    }
    assert!(files_under(&store, "t").await.is_empty());
}

/// A blob column sets the reader flag an older natal, which would read descriptors as the
/// values, refuses; SQL reads the bytes, and a table made from it is a blob column too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_columns_read_through_sql_and_need_an_aware_reader() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = crate::fixtures::local_store(dir.path());
    let table = Table::create(
        store,
        "t".into(),
        &blob_schema(SMALL),
        TableOptions::default(),
    )
    .await
    .unwrap();
    table.append(vec![blob_batch(0..16)]).await.unwrap();
    let latest = table.latest().await.unwrap();
    let flag = natal::internals::format::flags::BLOB_COLUMNS;
    assert_ne!(latest.manifest().reader_flags() & flag, 0);
    assert_ne!(latest.manifest().writer_flags() & flag, 0);
    let ctx = datafusion::prelude::SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    let batches = ctx
        .sql("SELECT key, img FROM t ORDER BY key")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut seen = 0;
    for batch in &batches {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let values = batch.column(1).as_binary::<i32>();
        for i in 0..batch.num_rows() {
            let value = (!values.is_null(i)).then(|| values.value(i).to_vec());
            assert_eq!(value, value_of(keys.value(i)));
            seen += 1;
        }
    }
    assert_eq!(seen, 16);
    ctx.sql("CREATE TABLE copy AS SELECT * FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let copy = Table::open(crate::fixtures::local_store(dir.path()), "copy".into());
    let copied = copy.latest().await.unwrap();
    assert_eq!(copied.schema().fields[1].blob, Some(SMALL));
    assert_eq!(read_blobs(&copied).await.unwrap().len(), 16);
}

/// Table `b` of the fixtures since 2026-12-03-blobs: a blob column with inline, packed and
/// dedicated values, updated, deleted from and compacted.
pub async fn write_fixture_table(store: Arc<dyn ObjectStore>) {
    let table = Table::create(
        store,
        "b".into(),
        &blob_schema(SMALL),
        TableOptions::default(),
    )
    .await
    .expect("create b");
    table.append(vec![blob_batch(0..40)]).await.expect("append");
    table
        .append(vec![blob_batch(40..60)])
        .await
        .expect("append");
    let keep_values = |batch: &RecordBatch| Ok(batch.project(&[0, 1])?);
    table
        .update_where(crate::common::key_matches(|k| k % 4 == 3), &keep_values)
        .await
        .expect("update");
    table
        .delete_where(crate::common::key_matches(|k| k % 7 == 2))
        .await
        .expect("delete");
    table
        .compact(natal::CompactOptions::default())
        .await
        .expect("compact");
}

/// Every version of `b`: its keys, each with its value's size and byte sum.
pub async fn describe_fixture_table(table: &Table) -> String {
    let mut out = String::new();
    for manifest in table.versions().await.expect("versions") {
        let snapshot = table.at_version(manifest.version).await.expect("version");
        out.push_str(&format!("version {}\n", manifest.version));
        for (key, value) in read_blobs(&snapshot).await.expect("blobs") {
            let shown = value.map(|v| {
                let sum: u64 = v.iter().map(|&b| u64::from(b)).sum();
                format!("{} {sum}", v.len())
            });
            out.push_str(&format!("  {key} {}\n", shown.as_deref().unwrap_or("NULL")));
        }
    }
    out
}

/// SQL's `BLOB` type makes a blob column: a value above the inline limit lands in a sidecar,
/// not the data file, and reads back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_blob_columns_keep_large_values_in_sidecars() {
    let (dir, ctx) = crate::common::catalog_session();
    for sql in [
        "CREATE TABLE docs (id INT, body BLOB)",
        "INSERT INTO docs VALUES (1, CAST(repeat('xy', 50000) AS BYTEA))",
    ] {
        natal::datafusion::sql(&ctx, sql)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
    }
    let blobs: Vec<_> = walk(&dir.path().join("docs/data"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "blob"))
        .collect();
    assert_eq!(blobs.len(), 1, "one packed sidecar");
    assert_eq!(std::fs::metadata(&blobs[0]).unwrap().len(), 100_000);
    let batches = ctx
        .sql("SELECT body FROM docs")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let body = batches[0].column(0).as_binary::<i64>().value(0).to_vec();
    assert_eq!(body, "xy".repeat(50_000).into_bytes());
    let error = natal::datafusion::sql(&ctx, "CREATE TABLE docs (id INT, body BLOB)")
        .await
        .expect_err("exists");
    assert!(error.to_string().contains("already exists"), "{error}");
}

pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A filtered scan selecting the blob column fetches payloads only for the rows its filter
/// keeps: with every sidecar gone, a filter keeping only rows of inline values still reads,
/// values whole; one keeping a row whose value is in a sidecar reports it missing.
#[tokio::test]
async fn a_filtered_scan_fetches_only_the_payloads_of_the_rows_it_keeps() {
    let (table, store) = blob_table().await;
    table.append(vec![blob_batch(0..80)]).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    for sidecar in sidecars(&store).await {
        store.delete(&Path::from(sidecar.as_str())).await.unwrap();
    }
    let filtered = |modulus: i64, rest: i64| ScanRequest {
        filter: Some(crate::common::KeyModulo::new(modulus, rest)),
        ..Default::default()
    };
    // key % 8 == 1: 7-byte values, inline.
    let batches = scan(&snapshot, filtered(8, 1)).await.unwrap();
    let mut kept = 0;
    for batch in &batches {
        assert_eq!(batch.num_columns(), 2);
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let values = batch.column(1).as_binary::<i32>();
        for i in 0..batch.num_rows() {
            assert_eq!(keys.value(i) % 8, 1);
            let value = (!values.is_null(i)).then(|| values.value(i).to_vec());
            assert_eq!(value, value_of(keys.value(i)));
            kept += 1;
        }
    }
    assert_eq!(kept, 10);
    // key % 8 == 7: 3,100-byte values, each in a dedicated sidecar now gone.
    let outcome = scan(&snapshot, filtered(8, 7)).await;
    assert!(
        matches!(&outcome, Err(natal::Error::Corrupt { reason, .. }) if reason.contains("missing")),
        "{outcome:?}"
    );
}

/// Parts of values by row id, from inline bytes and from packed and dedicated sidecars,
/// match the values' own bytes; descriptors alone give each value's kind and size.
#[tokio::test]
async fn ranges_of_values_read_by_row_id_and_descriptors_give_sizes() {
    let (table, _store) = blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let ids: BTreeMap<i64, natal::RowId> = {
        let request = ScanRequest {
            columns: Some(vec!["key".into()]),
            with_row_id: true,
            ..Default::default()
        };
        let batches = scan(&snapshot, request).await.unwrap();
        batches
            .iter()
            .flat_map(|b| {
                let keys = b.column(0).as_primitive::<Int64Type>().clone();
                let ids = b
                    .column(1)
                    .as_primitive::<arrow::datatypes::UInt64Type>()
                    .clone();
                (0..b.num_rows())
                    .map(move |i| (keys.value(i), natal::RowId::from_u64(ids.value(i))))
            })
            .collect()
    };
    // Keys 1 (7 B inline), 4 (640 B packed), 5 (999 B packed), 7 (3,100 B dedicated).
    let wanted: Vec<(natal::RowId, std::ops::Range<u64>)> = vec![
        (ids[&1], 2..5),
        (ids[&4], 100..300),
        (ids[&5], 0..999),
        (ids[&7], 3000..3100),
        (ids[&15], 1..2),
    ];
    let read = snapshot.read_blob_ranges("img", &wanted).await.unwrap();
    for ((key, (_, range)), bytes) in [1, 4, 5, 7, 15].iter().zip(&wanted).zip(&read) {
        let value = value_of(*key).unwrap();
        assert_eq!(
            &bytes[..],
            &value[range.start as usize..range.end as usize],
            "key {key}"
        );
    }
    let past = snapshot
        .read_blob_ranges("img", &[(ids[&4], 600..641)])
        .await
        .unwrap_err();
    assert!(matches!(past, natal::Error::InvalidInput(_)), "{past}");
    let not_blob = snapshot.read_blob_ranges("key", &[]).await.unwrap_err();
    assert!(
        matches!(not_blob, natal::Error::InvalidInput(_)),
        "{not_blob}"
    );
    // Descriptors: kind and size per row, no payload.
    let request = ScanRequest {
        blob_descriptors: true,
        ..Default::default()
    };
    let batches = scan(&snapshot, request).await.unwrap();
    for batch in &batches {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let descriptors = batch.column(1).as_struct();
        let kinds = descriptors
            .column(0)
            .as_primitive::<arrow::datatypes::UInt8Type>();
        let sizes = descriptors
            .column(2)
            .as_primitive::<arrow::datatypes::UInt64Type>();
        for i in 0..batch.num_rows() {
            let Some(value) = value_of(keys.value(i)) else {
                assert!(descriptors.is_null(i));
                continue;
            };
            assert_eq!(sizes.value(i), value.len() as u64);
            let kind = SMALL.kind_for(value.len() as u64).code();
            assert_eq!(kinds.value(i), kind, "key {}", keys.value(i));
        }
    }
}

/// `ALTER TABLE ... ADD COLUMN ... BLOB` adds a blob column: old rows read NULL, new values
/// land in sidecars by size, compaction keeps them; options it cannot honour are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_table_adds_blob_columns() {
    let (_dir, ctx) = crate::common::catalog_session();
    let sql = |q: &str| {
        let (ctx, q) = (ctx.clone(), q.to_string());
        async move { natal::datafusion::sql(&ctx, &q).await?.collect().await }
    };
    for q in [
        "CREATE TABLE t (id INT)",
        "INSERT INTO t VALUES (1), (2)",
        "ALTER TABLE t ADD COLUMN body BLOB",
        "INSERT INTO t VALUES (3, CAST(repeat('z', 200000) AS BYTEA)), (4, X'0A0B')",
        "SELECT * FROM natal_compact('t')",
    ] {
        sql(q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    let batches = sql("SELECT id, octet_length(body), body = X'0A0B' FROM t ORDER BY id")
        .await
        .unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    for row in ["| 1  |", "| 3  | 200000", "| 4  | 2 "] {
        assert!(shown.contains(row), "{row}\n{shown}");
    }
    let places = sql("SELECT kind FROM \"t$blobs\" WHERE kind IS NOT NULL ORDER BY _rowid")
        .await
        .unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&places)
        .unwrap()
        .to_string();
    assert!(
        shown.contains("packed") && shown.contains("inline"),
        "{shown}"
    );
    let schema = sql("SELECT name, blob FROM \"t$schema\" WHERE name = 'body'")
        .await
        .unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&schema)
        .unwrap()
        .to_string();
    assert!(shown.contains("inline_limit"), "{shown}");
    for (bad, says) in [
        ("ALTER TABLE t ADD COLUMN b2 BLOB NOT NULL", "nullable"),
        ("ALTER TABLE t ADD COLUMN b2 BLOB DEFAULT X'00'", "DEFAULT"),
        ("ALTER TABLE t ADD COLUMN body BLOB", "exists"),
    ] {
        let error = sql(bad).await.unwrap_err().to_string();
        assert!(error.contains(says), "{bad}: {error}");
    }
}

/// Thresholds in SQL: `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS NATAL` declare blob
/// columns, `natal_blob_options` changes an existing one's for later values; bad ones are
/// refused with the reason and create or change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_thresholds_are_set_in_sql() {
    let (dir, ctx) = crate::common::catalog_session();
    let sql = |q: String| {
        let ctx = ctx.clone();
        async move { natal::datafusion::sql(&ctx, &q).await?.collect().await }
    };
    let location = dir.path().join("e");
    let location = location.to_str().unwrap();
    let kinds = |q: &'static str| async move {
        let batches = sql(q.into()).await.unwrap();
        arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string()
    };
    for (options, says) in [
        ("'blob.nope.inline_limit' '5'", "names no column"),
        (
            "'blob.body.inline_limit' '500', 'blob.body.dedicated_threshold' '100'",
            "inline_limit",
        ),
        ("'blob.body.pack_file_size' 'lots'", "not a number"),
        ("'blob.id' 'true'", "Int32"),
    ] {
        let error = sql(format!(
            "CREATE EXTERNAL TABLE bad (id INT, body BYTEA) STORED AS NATAL LOCATION '{location}' \
             OPTIONS ({options})"
        ))
        .await
        .unwrap_err()
        .to_string();
        assert!(error.contains(says), "{options}: {error}");
        assert!(
            !std::path::Path::new(location).exists(),
            "{options} left a table"
        );
    }
    sql(format!(
        "CREATE EXTERNAL TABLE e (id INT, body BYTEA) STORED AS NATAL LOCATION '{location}' \
         OPTIONS ('blob.body.inline_limit' '10', 'blob.body.dedicated_threshold' '100', \
         'blob.body.pack_file_size' '1000')"
    ))
    .await
    .unwrap();
    sql(
        "INSERT INTO e VALUES (1, X'0102'), (2, CAST(repeat('a', 15) AS BYTEA)), \
         (3, CAST(repeat('b', 500) AS BYTEA))"
            .into(),
    )
    .await
    .unwrap();
    let shown = kinds("SELECT kind FROM \"e$blobs\" ORDER BY _rowid").await;
    let listed: Vec<&str> = ["inline", "packed", "dedicated"].into();
    for (line, kind) in shown.lines().skip(3).zip(&listed) {
        assert!(line.contains(kind), "{shown}");
    }
    sql("SELECT * FROM natal_blob_options('e', 'body', 20, 200, 2000)".into())
        .await
        .unwrap();
    sql("INSERT INTO e VALUES (4, CAST(repeat('c', 15) AS BYTEA))".into())
        .await
        .unwrap();
    let shown = kinds("SELECT kind FROM \"e$blobs\" ORDER BY _rowid").await;
    assert_eq!(shown.matches("inline").count(), 2, "{shown}");
    assert_eq!(
        shown.matches("packed").count(),
        1,
        "earlier values stay: {shown}"
    );
    let schema = kinds("SELECT blob FROM \"e$schema\" WHERE name = 'body'").await;
    assert!(schema.contains("20") && schema.contains("2000"), "{schema}");
    for (bad, says) in [
        (
            "SELECT * FROM natal_blob_options('e', 'id', 20, 200, 2000)",
            "not a blob column",
        ),
        (
            "SELECT * FROM natal_blob_options('e', 'body', 20, 200, 0)",
            "pack_file_size",
        ),
        (
            "SELECT * FROM natal_blob_options('e', 'body', 300, 200, 2000)",
            "inline_limit",
        ),
    ] {
        let error = sql(bad.into()).await.unwrap_err().to_string();
        assert!(error.contains(says), "{bad}: {error}");
    }
    let error = sql(format!(
        "CREATE EXTERNAL TABLE again STORED AS NATAL LOCATION '{location}' \
         OPTIONS ('blob.body.inline_limit' '5')"
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("natal_blob_options"), "{error}");
}

/// A limited scan fetches payloads only for the rows it returns: with every sidecar gone,
/// `LIMIT 3` over rows whose first three values are inline still reads (in Rust and SQL),
/// while reading further reports the sidecar missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_scan_fetches_only_the_payloads_it_returns() {
    let (dir, ctx) = crate::common::catalog_session();
    let store = crate::fixtures::local_store(dir.path());
    let (table, _) = Table::create_from(
        store.clone(),
        "t".into(),
        &blob_schema(SMALL),
        TableOptions::default(),
        futures::StreamExt::boxed(futures::stream::iter([Ok(blob_batch(0..40))])),
    )
    .await
    .unwrap();
    for sidecar in walk(dir.path()) {
        if sidecar.extension().is_some_and(|e| e == "blob") {
            std::fs::remove_file(sidecar).unwrap();
        }
    }
    // Keys 0, 1, 2: 0, 7 and 99 bytes, inline below SMALL's 100.
    let snapshot = table.latest().await.unwrap();
    let limited = ScanRequest {
        limit: Some(3),
        ..Default::default()
    };
    let batches = scan(&snapshot, limited).await.unwrap();
    let keys: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(keys, [0, 1, 2]);
    let sql = |q: &'static str| {
        let ctx = ctx.clone();
        async move { natal::datafusion::sql(&ctx, q).await?.collect().await }
    };
    let rows = sql("SELECT key, img FROM t LIMIT 3").await.unwrap();
    assert_eq!(rows.iter().map(RecordBatch::num_rows).sum::<usize>(), 3);
    let error = sql("SELECT key, img FROM t LIMIT 5")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("missing"), "{error}");
    let error = scan(&snapshot, ScanRequest::new()).await.unwrap_err();
    assert!(matches!(error, natal::Error::Corrupt { .. }), "{error}");
}
