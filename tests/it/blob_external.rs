//! External blob values: references to objects natal never copies, made in Rust
//! (`natal::external_blob`) or SQL (`natal_external_blob`), read through the handle's (or
//! session's) stores; a payload shaped like a reference stays bytes; a store not registered
//! or an object missing is an error naming the URI.

use std::sync::Arc;

use arrow::array::{Array, AsArray, BinaryArray, Int64Array, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type, UInt8Type};
use futures::TryStreamExt;
use natal::{BlobKind, ScanRequest, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::registry::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use object_store::ObjectStore;

use crate::blob::{blob_schema, SMALL};

/// A local file of `size` bytes (byte `i` is `i * 7 % 251`) and its `file://` URI.
fn local_object(dir: &tempfile::TempDir, name: &str, size: usize) -> (Vec<u8>, String) {
    let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    let path = dir.path().join(name);
    std::fs::write(&path, &bytes).unwrap();
    (bytes, format!("file://{}", path.display()))
}

fn rows(keys: Vec<i64>, values: Vec<Option<Vec<u8>>>) -> RecordBatch {
    RecordBatch::try_new(
        blob_schema(SMALL),
        vec![
            Arc::new(Int64Array::from(keys)),
            Arc::new(BinaryArray::from_iter(values.iter().map(|v| v.as_deref()))),
        ],
    )
    .unwrap()
}

/// Key → value of every row `table` reads.
async fn values(table: &Table) -> natal::Result<Vec<(i64, Option<Vec<u8>>)>> {
    snapshot_values(&table.latest().await?).await
}

/// Key → value of every row of `snapshot`.
async fn snapshot_values(snapshot: &natal::Snapshot) -> natal::Result<Vec<(i64, Option<Vec<u8>>)>> {
    let batches: Vec<RecordBatch> = snapshot
        .scan(ScanRequest::new())
        .await?
        .try_collect()
        .await?;
    let mut out = Vec::new();
    for batch in &batches {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let values = batch.column(1).as_binary::<i32>();
        for i in 0..batch.num_rows() {
            out.push((
                keys.value(i),
                (!values.is_null(i)).then(|| values.value(i).to_vec()),
            ));
        }
    }
    out.sort();
    Ok(out)
}

#[tokio::test]
async fn external_values_are_read_where_they_are_and_never_copied() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, whole_uri) = local_object(&dir, "whole.bin", 5000);
    let (_, ranged_uri) = local_object(&dir, "ranged.bin", 3000);
    let reference = natal::external_blob(&whole_uri, None).unwrap();
    let ranged = natal::external_blob(&ranged_uri, Some(1000..1400)).unwrap();
    // A payload made to look like a reference (the marker, a guessed tag): bytes.
    let mut forged = reference.clone();
    forged[20] ^= 0xff;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let stores: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
    let options = TableOptions {
        external_stores: Some(stores),
        ..TableOptions::default()
    };
    let (table, _) = Table::create_from(
        store.clone(),
        Path::from("t"),
        &blob_schema(SMALL),
        options.clone(),
        futures::StreamExt::boxed(futures::stream::iter([Ok(rows(
            vec![1, 2, 3, 4],
            vec![
                Some(reference),
                Some(ranged),
                Some(forged.clone()),
                Some(vec![9; 10]),
            ],
        ))])),
    )
    .await
    .unwrap();
    let ranged_bytes = &std::fs::read(dir.path().join("ranged.bin")).unwrap()[1000..1400];
    assert_eq!(
        values(&table).await.unwrap(),
        [
            (1, Some(whole.clone())),
            (2, Some(ranged_bytes.to_vec())),
            (3, Some(forged)),
            (4, Some(vec![9; 10])),
        ]
    );
    // Nothing of the objects was copied: the table holds no sidecar for them.
    let listed: Vec<_> = store
        .list(Some(&Path::from("t/data")))
        .try_collect()
        .await
        .unwrap();
    assert!(
        listed
            .iter()
            .all(|m| !m.location.as_ref().ends_with(".blob")),
        "{listed:?}"
    );
    // Compaction moves the rows and keeps the references: a handle that cannot reach the
    // objects compacts (it never fetches them) and copies nothing.
    table
        .append(vec![rows(vec![5], vec![Some(vec![5; 10])])])
        .await
        .unwrap();
    let unreachable = Table::open(store.clone(), Path::from("t"));
    let compacted = unreachable
        .compact(natal::CompactOptions::default())
        .await
        .unwrap();
    assert!(compacted.published);
    assert_eq!(table.latest().await.unwrap().manifest().fragments.len(), 1);
    // Descriptors say External, with the range (size 0: the whole object).
    let snapshot = table.latest().await.unwrap();
    let request = ScanRequest {
        blob_descriptors: true,
        ..Default::default()
    };
    let batches: Vec<RecordBatch> = snapshot
        .scan(request)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let descriptors = batches[0].column(1).as_struct();
    let kinds = descriptors.column(0).as_primitive::<UInt8Type>();
    let positions = descriptors.column(1).as_primitive::<UInt64Type>();
    let sizes = descriptors.column(2).as_primitive::<UInt64Type>();
    let uris = descriptors.column(4).as_string::<i32>();
    let external = BlobKind::External.code();
    assert_eq!(
        (
            kinds.value(0),
            positions.value(0),
            sizes.value(0),
            uris.value(0)
        ),
        (external, 0, 0, whole_uri.as_str())
    );
    assert_eq!(
        (
            kinds.value(1),
            positions.value(1),
            sizes.value(1),
            uris.value(1)
        ),
        (external, 1000, 400, ranged_uri.as_str())
    );
    assert_ne!(kinds.value(2), external);

    // Ranges of external values, by row id: inside the referenced range only.
    // The table's first rows: ids 0 and 1.
    let (first, second) = (natal::RowId::from_u64(0), natal::RowId::from_u64(1));
    let read = snapshot
        .read_blob_ranges("img", &[(first, 4990..5000), (second, 0..10)])
        .await
        .unwrap();
    assert_eq!(&read[0][..], &whole[4990..]);
    assert_eq!(&read[1][..], &ranged_bytes[..10]);
    let past = snapshot
        .read_blob_ranges("img", &[(second, 390..401)])
        .await
        .unwrap_err();
    assert!(matches!(past, natal::Error::InvalidInput(_)), "{past}");
    let beyond = snapshot
        .read_blob_ranges("img", &[(first, 4990..5001)])
        .await
        .unwrap_err();
    assert!(
        matches!(&beyond, natal::Error::ExternalBlob { uri, .. } if *uri == whole_uri),
        "{beyond}"
    );

    // A handle without stores, or an object gone: an error naming the URI, never bytes.
    let bare = Table::open(store.clone(), Path::from("t"));
    let error = values(&bare).await.unwrap_err();
    assert!(
        matches!(&error, natal::Error::ExternalBlob { .. })
            && error.to_string().contains("file://"),
        "{error}"
    );
    std::fs::remove_file(dir.path().join("whole.bin")).unwrap();
    let error = values(&table).await.unwrap_err();
    assert!(
        matches!(&error, natal::Error::ExternalBlob { uri, .. } if *uri == whole_uri),
        "{error}"
    );
    // Rows that do not read the value do not need it.
    let keys: Vec<RecordBatch> = snapshot
        .scan(ScanRequest {
            columns: Some(vec!["key".into()]),
            ..Default::default()
        })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys.iter().map(|b| b.num_rows()).sum::<usize>(), 5);
}

/// SQL: `natal_external_blob(uri [, offset, length])` into a `BLOB` column reads back the
/// object's bytes through the session's stores; a URI whose store the session lacks is
/// stored, and reading it names the URI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_external_blobs_read_through_the_sessions_stores() {
    let (dir, ctx) = crate::common::catalog_session();
    let (bytes, uri) = local_object(&dir, "object.bin", 300);
    let run = |sql: String| {
        let ctx = ctx.clone();
        async move { natal::datafusion::sql(&ctx, &sql).await?.collect().await }
    };
    run("CREATE TABLE docs (id INT, body BLOB)".into())
        .await
        .unwrap();
    run(format!(
        "INSERT INTO docs VALUES (1, natal_external_blob('{uri}')), \
         (2, natal_external_blob('{uri}', 100, 50)), (3, X'0102'), (4, NULL)"
    ))
    .await
    .unwrap();
    let batches = run("SELECT id, body FROM docs ORDER BY id".into())
        .await
        .unwrap();
    let body = batches[0].column(1).as_binary::<i64>();
    assert_eq!(body.value(0), &bytes[..]);
    assert_eq!(body.value(1), &bytes[100..150]);
    assert_eq!(body.value(2), &[1, 2]);
    assert!(body.is_null(3));
    // An UPDATE of other columns keeps the values external; one that reads them stores
    // the bytes it computed.
    run("UPDATE docs SET id = id + 10 WHERE id < 3".into())
        .await
        .unwrap();
    run("UPDATE docs SET body = CASE WHEN id > 0 THEN body END WHERE id = 12".into())
        .await
        .unwrap();
    let path = dir.path().join("docs");
    let by_id = kinds_by_id(&ctx, path.to_str().unwrap()).await;
    let external = Some(BlobKind::External.code());
    assert_eq!(by_id[&11], external, "{by_id:?}");
    assert_ne!(by_id[&12], external, "{by_id:?}");
    // So does a MERGE: one that only carries the values keeps them external, one whose
    // condition reads them stores the bytes.
    run("CREATE TABLE moves (k INT, v INT)".into())
        .await
        .unwrap();
    run("INSERT INTO moves VALUES (11, 21), (3, 13)".into())
        .await
        .unwrap();
    run("MERGE INTO docs USING moves ON docs.id = moves.k \
         WHEN MATCHED THEN UPDATE SET id = moves.v"
        .into())
    .await
    .unwrap();
    let by_id = kinds_by_id(&ctx, path.to_str().unwrap()).await;
    assert_eq!(by_id[&21], external, "{by_id:?}");
    // (A rewrite: as a row patch of `id`, the value would stay where it is, external.)
    run("SET natal.patch_max_share = 0".into()).await.unwrap();
    run("MERGE INTO docs USING moves ON docs.id = moves.v \
         WHEN MATCHED AND octet_length(docs.body) = 300 THEN UPDATE SET id = 31"
        .into())
    .await
    .unwrap();
    let by_id = kinds_by_id(&ctx, path.to_str().unwrap()).await;
    assert_ne!(by_id[&31], external, "{by_id:?}");
    assert_eq!(by_id[&13], Some(BlobKind::Inline.code()), "{by_id:?}");
    let batches = run("SELECT body FROM docs WHERE id IN (12, 13, 31) ORDER BY id".into())
        .await
        .unwrap();
    let body = batches[0].column(0).as_binary::<i64>();
    assert_eq!(body.value(0), &bytes[100..150]);
    assert_eq!(body.value(1), &[1, 2]);
    assert_eq!(body.value(2), &bytes[..]);

    let error = run("SELECT natal_external_blob('not a uri')".into())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("not a uri"), "{error}");
    let error = run(format!("SELECT natal_external_blob('{uri}', -1, 5)"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("negative"), "{error}");

    // Only a blob column takes a reference; a plain binary column refuses it whole.
    run("CREATE TABLE plain (id INT, body BYTEA)".into())
        .await
        .unwrap();
    let error = run(format!(
        "INSERT INTO plain VALUES (1, X'01'), (2, natal_external_blob('{uri}'))"
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("not a blob column"), "{error}");
    let count = run("SELECT count(*) FROM plain".into()).await.unwrap();
    assert_eq!(count[0].column(0).as_primitive::<Int64Type>().value(0), 0);

    run("INSERT INTO docs VALUES (5, natal_external_blob('s3://no-such-bucket/x.jpg'))".into())
        .await
        .unwrap();
    let error = run("SELECT body FROM docs WHERE id = 5".into())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("s3://no-such-bucket/x.jpg"), "{error}");
    let ids = run("SELECT count(*) FROM docs".into()).await.unwrap();
    assert_eq!(
        ids[0].column(0).as_primitive::<Int64Type>().value(0),
        5,
        "a query without the column reads no external object"
    );
}

/// The stores the fixture table `e` reads its external values through: `memory://fixture/`
/// holding `photo.bin` (2,000 bytes, byte `i` is `i * 13 % 256`).
/// The kind of each row's `body` in the table at `path`, by its `id`.
async fn kinds_by_id(
    ctx: &datafusion::prelude::SessionContext,
    path: &str,
) -> std::collections::BTreeMap<i32, Option<u8>> {
    let kinds = natal::datafusion::open_table(ctx, path)
        .unwrap()
        .latest()
        .await
        .unwrap()
        .scan(ScanRequest {
            columns: Some(vec!["id".into(), "body".into()]),
            blob_descriptors: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .try_collect::<Vec<RecordBatch>>()
        .await
        .unwrap();
    let mut by_id = std::collections::BTreeMap::new();
    for batch in &kinds {
        let ids = batch
            .column(0)
            .as_primitive::<arrow::datatypes::Int32Type>();
        let descriptors = batch.column(1).as_struct();
        let kind = descriptors.column(0).as_primitive::<UInt8Type>();
        for i in 0..batch.num_rows() {
            by_id.insert(
                ids.value(i),
                (!descriptors.is_null(i)).then(|| kind.value(i)),
            );
        }
    }
    by_id
}

pub async fn fixture_stores() -> Arc<dyn ObjectStoreRegistry> {
    let bucket = Arc::new(InMemory::new());
    let photo: Vec<u8> = (0..2000).map(|i| (i * 13 % 256) as u8).collect();
    object_store::ObjectStoreExt::put(bucket.as_ref(), &Path::from("photo.bin"), photo.into())
        .await
        .unwrap();
    let stores = DefaultObjectStoreRegistry::new();
    stores.register(url::Url::parse("memory://fixture/").unwrap(), bucket);
    Arc::new(stores)
}

fn fixture_schema() -> arrow::datatypes::SchemaRef {
    use arrow::datatypes::{DataType, Field, Schema};
    let with = |key: &str, value: &str| {
        std::collections::HashMap::from([(key.to_string(), value.to_string())])
    };
    let point = DataType::Struct(
        vec![Field::new("x", DataType::Int32, true).with_metadata(with("unit", "px"))].into(),
    );
    let item = Field::new("item", point, true).with_metadata(with("role", "vertex"));
    let mut fields: Vec<Field> = blob_schema(SMALL)
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("shape", DataType::List(Arc::new(item)), true));
    Arc::new(Schema::new(fields))
}

fn fixture_rows(keys: std::ops::Range<i64>) -> RecordBatch {
    use arrow::array::{Int32Array, ListArray, StructArray};
    let schema = fixture_schema();
    let values: Vec<Option<Vec<u8>>> = keys
        .clone()
        .map(|key| match key % 6 {
            0 => Some(vec![key as u8; 7]),
            1 => Some(vec![key as u8; 640]),
            2 => Some(vec![key as u8; 3100]),
            3 => Some(natal::external_blob("memory://fixture/photo.bin", None).unwrap()),
            4 => Some(natal::external_blob("memory://fixture/photo.bin", Some(100..400)).unwrap()),
            _ => None,
        })
        .collect();
    let arrow::datatypes::DataType::List(item) = schema.field(2).data_type().clone() else {
        unreachable!()
    };
    let arrow::datatypes::DataType::Struct(point) = item.data_type().clone() else {
        unreachable!()
    };
    let rows = keys.end - keys.start;
    let xs = Int32Array::from_iter_values(keys.clone().map(|k| k as i32));
    let points = StructArray::new(point, vec![Arc::new(xs)], None);
    let shapes = ListArray::new(
        item,
        arrow::buffer::OffsetBuffer::from_lengths(std::iter::repeat_n(1, rows as usize)),
        Arc::new(points),
        None,
    );
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(keys)),
            Arc::new(BinaryArray::from_iter(values.iter().map(|v| v.as_deref()))),
            Arc::new(shapes),
        ],
    )
    .unwrap()
}

/// Table `e` of the fixtures since 2026-12-03-external: a blob column with values of all
/// four kinds (two external, in `memory://fixture/`), and a list of structs whose nested
/// fields keep Arrow metadata; appended to and compacted.
pub async fn write_fixture_table(store: Arc<dyn ObjectStore>) {
    let options = TableOptions {
        external_stores: Some(fixture_stores().await),
        ..TableOptions::default()
    };
    let (table, _) = Table::create_from(
        store,
        "e".into(),
        &fixture_schema(),
        options,
        futures::StreamExt::boxed(futures::stream::iter([Ok(fixture_rows(0..12))])),
    )
    .await
    .expect("create e");
    table
        .append(vec![fixture_rows(12..18)])
        .await
        .expect("append");
    table
        .compact(natal::CompactOptions::default())
        .await
        .expect("compact");
}

/// Every version of `e`: its keys, each with its value's kind, size and byte sum, and the
/// nested fields' metadata.
pub async fn describe_fixture_table(table: &Table) -> String {
    let mut out = String::new();
    for manifest in table.versions().await.expect("versions") {
        let snapshot = table.at_version(manifest.version).await.expect("version");
        let shape = snapshot.schema().to_arrow().field(2).data_type().clone();
        out.push_str(&format!("version {} {shape}\n", manifest.version));
        let described: Vec<RecordBatch> = snapshot
            .scan(ScanRequest {
                blob_descriptors: true,
                ..Default::default()
            })
            .await
            .expect("descriptors")
            .try_collect()
            .await
            .expect("descriptors");
        let mut kinds = std::collections::BTreeMap::new();
        for batch in &described {
            let keys = batch.column(0).as_primitive::<Int64Type>();
            let descriptors = batch.column(1).as_struct();
            let kind = descriptors.column(0).as_primitive::<UInt8Type>();
            for i in 0..batch.num_rows() {
                kinds.insert(
                    keys.value(i),
                    (!descriptors.is_null(i)).then(|| kind.value(i)),
                );
            }
        }
        for (key, value) in snapshot_values(&snapshot).await.expect("values") {
            let shown = value.map(|v| {
                let sum: u64 = v.iter().map(|&b| u64::from(b)).sum();
                format!("{} {sum}", v.len())
            });
            out.push_str(&format!(
                "  {key} kind {:?} {}\n",
                kinds[&key],
                shown.as_deref().unwrap_or("NULL")
            ));
        }
    }
    out
}

/// A value as a file: `Snapshot::blob` reads inline, packed, dedicated and external values
/// with one ranged request per read call (never the whole sidecar of a packed value), seeks
/// anywhere; `t$blobs` says where each value lives, and `natal_blob_read` reads one in SQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_readers_places_and_sql_reads() {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let dir = tempfile::tempdir().unwrap();
    let (object, uri) = local_object(&dir, "object.bin", 2000);
    let counted = Arc::new(natal::internals::io::InstrumentedStore::new(Arc::new(
        object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap(),
    )));
    let store: Arc<dyn ObjectStore> = counted.clone();
    let options = TableOptions {
        external_stores: Some(Arc::new(DefaultObjectStoreRegistry::new())),
        ..TableOptions::default()
    };
    // Keys 0..4: inline (7 B), packed (640 B), packed (999 B), dedicated (3,100 B);
    // key 4: bytes 500..1500 of the external object.
    let values: Vec<Option<Vec<u8>>> = vec![
        Some((0..7).collect()),
        Some((0..640).map(|i| (i % 97) as u8).collect()),
        Some((0..999).map(|i| (i % 89) as u8).collect()),
        Some((0..3100).map(|i| (i % 83) as u8).collect()),
        Some(natal::external_blob(&uri, Some(500..1500)).unwrap()),
    ];
    let (table, _) = Table::create_from(
        store.clone(),
        Path::from("t"),
        &blob_schema(SMALL),
        options,
        futures::StreamExt::boxed(futures::stream::iter([Ok(rows(
            vec![0, 1, 2, 3, 4],
            values.clone(),
        ))])),
    )
    .await
    .unwrap();
    let snapshot = table.latest().await.unwrap();
    let mut expected: Vec<Vec<u8>> = values.iter().take(4).map(|v| v.clone().unwrap()).collect();
    expected.push(object[500..1500].to_vec());
    for (id, want) in expected.iter().enumerate() {
        let mut reader = snapshot
            .blob("img", natal::RowId::from_u64(id as u64))
            .await
            .unwrap();
        assert_eq!(reader.size(), want.len() as u64, "row {id}");
        let mut whole = Vec::new();
        reader.read_to_end(&mut whole).await.unwrap();
        assert_eq!(&whole, want, "row {id}");
        // A part from the middle: one request for one read call.
        reader.seek(std::io::SeekFrom::Start(3)).await.unwrap();
        counted.reset();
        let mut part = [0u8; 4];
        reader.read_exact(&mut part).await.unwrap();
        assert_eq!(&part, &want[3..7], "row {id}");
        let gets = counted.tally().get;
        let expected_gets = match id {
            0 => 0, // inline: the bytes came with the descriptor
            4 => 0, // external: through the registry's own store, not the table's
            _ => 1,
        };
        assert_eq!(gets, expected_gets, "row {id}");
        // Reading at the end gives nothing; seeking before the start is refused.
        reader.seek(std::io::SeekFrom::End(0)).await.unwrap();
        let mut rest = Vec::new();
        assert_eq!(reader.read_to_end(&mut rest).await.unwrap(), 0);
        assert!(reader
            .seek(std::io::SeekFrom::Current(-10_000))
            .await
            .is_err());
    }
    let missing = snapshot.blob("img", natal::RowId::from_u64(99)).await;
    assert!(matches!(missing, Err(natal::Error::InvalidInput(_))));
    let not_blob = snapshot.blob("key", natal::RowId::from_u64(0)).await;
    assert!(matches!(not_blob, Err(natal::Error::InvalidInput(_))));

    // Where each value lives.
    let places = snapshot.blob_places("img").await.unwrap();
    let kinds: Vec<_> = places.iter().map(|(_, p)| p.kind).collect();
    assert_eq!(
        kinds,
        [
            Some(BlobKind::Inline),
            Some(BlobKind::Packed),
            Some(BlobKind::Packed),
            Some(BlobKind::Dedicated),
            Some(BlobKind::External)
        ]
    );
    assert_eq!(places[1].1.range, Some(0..640));
    assert_eq!(places[2].1.range, Some(640..1639));
    assert_eq!(
        places[1].1.object, places[2].1.object,
        "one pack holds both"
    );
    assert!(places[3].1.object.as_deref().unwrap().ends_with(".blob"));
    assert_eq!(places[4].1.object.as_deref(), Some(uri.as_str()));
    assert_eq!(places[4].1.range, Some(500..1500));
    assert_eq!(places[0].1.size, Some(7));

    // SQL: t$blobs and natal_blob_read, through a session over the same directory.
    let ctx = datafusion::prelude::SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    let sql = |q: &str| {
        let (ctx, q) = (ctx.clone(), q.to_string());
        async move { natal::datafusion::sql(&ctx, &q).await?.collect().await }
    };
    let listed = sql("SELECT _rowid, kind, size, range_start FROM \"t$blobs\" ORDER BY _rowid")
        .await
        .unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&listed)
        .unwrap()
        .to_string();
    for expected in [
        "| 0      | inline    | 7    |",
        "| 2      | packed    | 999  | 640",
        "| 4      | external  | 1000 | 500",
    ] {
        assert!(shown.contains(expected), "{expected}\n{shown}");
    }
    let read = sql("SELECT data, size FROM natal_blob_read('t', 'img', 3, 100, 5)")
        .await
        .unwrap();
    assert_eq!(
        read[0].column(0).as_binary::<i64>().value(0),
        &expected[3][100..105]
    );
    assert_eq!(
        read[0].column(1).as_primitive::<UInt64Type>().value(0),
        3100
    );
    let whole = sql("SELECT data FROM natal_blob_read('t', 'img', 4)")
        .await
        .unwrap();
    assert_eq!(
        whole[0].column(0).as_binary::<i64>().value(0),
        &expected[4][..]
    );
    for (bad, says) in [
        (
            "SELECT * FROM natal_blob_read('t', 'img', 3, 3000, 101)",
            "past the end",
        ),
        (
            "SELECT * FROM natal_blob_read('t', 'key', 3)",
            "not a blob column",
        ),
        (
            "SELECT * FROM natal_blob_read('t', 'img', 42)",
            "no live row",
        ),
        (
            "SELECT * FROM natal_blob_read('t', 'img', 3, 1)",
            "arguments",
        ),
    ] {
        let error = sql(bad).await.unwrap_err().to_string();
        assert!(error.contains(says), "{bad}: {error}");
    }
}

/// `octet_length` of a blob column comes from descriptors: with every sidecar deleted it
/// still answers (packed, dedicated, inline and external values), while reading the bytes
/// reports the sidecar missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octet_length_of_a_blob_column_reads_no_payload() {
    let (dir, ctx) = crate::common::catalog_session();
    let (_, uri) = local_object(&dir, "object.bin", 300);
    let sql = |q: String| {
        let ctx = ctx.clone();
        async move { natal::datafusion::sql(&ctx, &q).await?.collect().await }
    };
    sql("CREATE TABLE docs (id INT, body BLOB)".into())
        .await
        .unwrap();
    sql(format!(
        "INSERT INTO docs VALUES (1, X'0102030405'), \
         (2, CAST(repeat('x', 100000) AS BYTEA)), (3, CAST(repeat('y', 5000000) AS BYTEA)), \
         (4, natal_external_blob('{uri}')), (5, natal_external_blob('{uri}', 10, 50)), \
         (6, NULL)"
    ))
    .await
    .unwrap();
    let mut removed = 0;
    for file in crate::blob::walk(dir.path()) {
        if file.extension().is_some_and(|e| e == "blob") {
            std::fs::remove_file(file).unwrap();
            removed += 1;
        }
    }
    assert_eq!(removed, 2, "one pack, one dedicated sidecar");
    let query = "SELECT id, octet_length(body) AS n FROM docs WHERE id > 0 ORDER BY id";
    let batches = sql(query.into()).await.unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    for row in [
        "| 1  | 5       |",
        "| 2  | 100000  |",
        "| 3  | 5000000 |",
        "| 4  | 300     |",
        "| 5  | 50      |",
        "| 6  |         |",
    ] {
        assert!(shown.contains(row), "{row}\n{shown}");
    }
    // With a filter, and without one (the scan then sits under DataFusion's cooperative
    // scheduling wrapper), under a sort, and inside an expression.
    for query in [
        query,
        "SELECT id, octet_length(body) FROM docs",
        "SELECT octet_length(body) AS n FROM docs ORDER BY n",
        "SELECT id + 1, octet_length(body) * 2 FROM docs WHERE id > 1",
    ] {
        let plan = sql(format!("EXPLAIN {query}")).await.unwrap();
        let plan = arrow::util::pretty::pretty_format_batches(&plan)
            .unwrap()
            .to_string();
        assert!(plan.contains("blob_sizes=body"), "{query}: {plan}");
        sql(query.to_string()).await.unwrap();
    }
    // A filter that reads the column needs its bytes: sizes are not read for it, and with
    // the sidecars gone it reports them missing (rather than filtering descriptors).
    let filtered = "SELECT id, octet_length(body) FROM docs WHERE octet_length(body) > 1000";
    let error = sql(filtered.into()).await.unwrap_err().to_string();
    assert!(error.contains("missing"), "{error}");
    let error = sql("SELECT body FROM docs WHERE id = 2".into())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("missing"), "{error}");
    // Strings are DataFusion's as before; binary values are measured too.
    let lengths = sql("SELECT octet_length('héllo'), octet_length(X'010203')".into())
        .await
        .unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&lengths)
        .unwrap()
        .to_string();
    assert!(shown.contains("| 6 ") && shown.contains("| 3 "), "{shown}");
}
