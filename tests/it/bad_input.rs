//! Bad input gets a typed error, never a panic, and loses nothing: damaged files of every
//! kind, paths escaping the table, unknown feature flags and format versions, wrong schemas.

use std::sync::Arc;

use bytes::Bytes;
use natal::internals::format::Manifest;
use natal::Error;
use natal::FlagKind;
use natal::RowId;
use natal::{Table, TableOptions};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::common::*;

async fn put(store: &Arc<dyn ObjectStore>, path: &Path, bytes: Vec<u8>) {
    store
        .put(path, PutPayload::from(Bytes::from(bytes)))
        .await
        .unwrap();
}

async fn get(store: &Arc<dyn ObjectStore>, path: &Path) -> Vec<u8> {
    store
        .get(path)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

/// A table with data, deletions and a checkpoint; returns it with its store.
async fn populated() -> (Table, Arc<dyn ObjectStore>) {
    let (table, store) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3)])])
        .await
        .unwrap();
    table
        .update_where(key_matches(|k| k == 1), &add_to_val(1))
        .await
        .unwrap();
    table.checkpoint().await.unwrap();
    (table, store)
}

#[tokio::test]
async fn damaged_manifests_are_corrupt_and_older_versions_still_read() {
    let (table, store) = populated().await;
    let latest = table.latest().await.unwrap().version();
    let path = table.store().manifest_path(latest);
    let good = get(&store, &path).await;
    let before = read_rows(&table.at_version(latest - 1).await.unwrap())
        .await
        .unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    for bad in [
        good[..good.len() / 2].to_vec(),
        good[..7].to_vec(),
        vec![],
        flipped,
    ] {
        put(&store, &path, bad).await;
        let table = reopen(&store);
        let err = table.latest().await.unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert_eq!(
            read_rows(&table.at_version(latest - 1).await.unwrap())
                .await
                .unwrap(),
            before
        );
    }
    put(&store, &path, good).await;
    let table = reopen(&store);
    assert_eq!(table.latest().await.unwrap().version(), latest);
}

/// A new handle on the table: a handle keeps the manifests it has read (they never change
/// once published), so a file damaged after that is seen by a new reader.
fn reopen(store: &Arc<dyn ObjectStore>) -> Table {
    Table::open(store.clone(), "t".into())
}

/// Rewrites the latest manifest through `edit` (a byte-level patch of the encoded form).
async fn patch_latest(table: &Table, store: &Arc<dyn ObjectStore>, edit: impl Fn(&mut Vec<u8>)) {
    // The version by listing, not by reading it: a handle keeps the manifests it read.
    let version = table.store().latest_version().await.unwrap().unwrap();
    let path = table.store().manifest_path(version);
    let bytes = get(store, &path).await;
    let mut body = bytes[8..bytes.len() - 4].to_vec();
    edit(&mut body);
    let mut out = bytes[..8].to_vec();
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    put(store, &path, out).await;
}

/// Replaces the first occurrence of `old` in the latest manifest's body with `new` (same
/// length, so the protobuf framing stays valid).
async fn swap_in_latest(table: &Table, store: &Arc<dyn ObjectStore>, old: &[u8], new: &[u8]) {
    assert_eq!(old.len(), new.len());
    patch_latest(table, store, |body| {
        let at = body
            .windows(old.len())
            .position(|w| w == old)
            .expect("bytes in manifest");
        body[at..at + old.len()].copy_from_slice(new);
    })
    .await;
}

#[tokio::test]
async fn a_path_escaping_the_table_is_refused() {
    let (table, store) = populated().await;
    let snapshot = table.latest().await.unwrap();
    let data = snapshot.manifest().fragments[0].files[0].path.to_string();
    let escape = format!("data/../{}", &data[8..]);
    swap_in_latest(&table, &store, data.as_bytes(), escape.as_bytes()).await;
    let table = reopen(&store);
    let err = table.latest().await.unwrap_err();
    assert!(matches!(err, Error::PathEscapesTable { .. }), "{err}");
}

#[tokio::test]
async fn unknown_feature_flags_refuse_reads_or_writes() {
    let (table, store) = populated().await;
    let version = table.latest().await.unwrap().version();
    let path = table.store().manifest_path(version);
    let original = Manifest::decode(path.as_ref(), &get(&store, &path).await)
        .and_then(|m| m.resolve(&Default::default()))
        .unwrap();

    let mut writer_flagged = original.clone();
    writer_flagged.claim_unknown_flags(0, 1 << 40);
    put(&store, &path, writer_flagged.encode()).await;
    let table = reopen(&store);
    let snapshot = table
        .latest()
        .await
        .expect("unknown writer flags still read");
    assert_eq!(read_rows(&snapshot).await.unwrap().len(), 3);
    let err = table.append(vec![batch(&[(9, 9)])]).await.unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedFeature { kind: FlagKind::Writer, flag, .. } if flag == 1 << 40),
        "{err}"
    );
    assert_eq!(
        table.latest().await.unwrap().version(),
        version,
        "nothing committed"
    );

    let mut reader_flagged = original.clone();
    reader_flagged.claim_unknown_flags(1 << 33, 0);
    put(&store, &path, reader_flagged.encode()).await;
    let table = reopen(&store);
    let err = table.latest().await.unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedFeature { kind: FlagKind::Reader, flag, .. } if flag == 1 << 33),
        "{err}"
    );
}

#[tokio::test]
async fn an_unknown_format_version_refuses_both() {
    let (table, store) = memory_table(2).await;
    // format_version is field 10, varint: tag 0x50 followed by the value.
    patch_latest(&table, &store, |body| {
        let at = body
            .windows(2)
            .position(|w| w == [0x50, 0x01])
            .expect("format version");
        body[at + 1] = 0x07;
    })
    .await;
    let err = table.latest().await.unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedFormatVersion { found: 7, .. }),
        "{err}"
    );
    assert!(table.append(vec![batch(&[(1, 1)])]).await.is_err());
}

#[tokio::test]
async fn damaged_data_deletion_and_checkpoint_files_are_errors_not_panics() {
    let (table, store) = populated().await;
    let snapshot = table.latest().await.unwrap();
    let manifest = snapshot.manifest().clone();
    let data = table.store().path(&manifest.fragments[0].files[0].path);
    let deletion = table.store().path(
        &manifest.fragments[0]
            .deletion
            .clone()
            .expect("row 1 was updated")
            .first()
            .path,
    );
    let checkpoint = table.store().path(
        &manifest
            .relocation_checkpoint
            .clone()
            .expect("checkpointed")
            .path,
    );
    for path in [data, deletion, checkpoint] {
        let good = get(&store, &path).await;
        // Every kind of file ends in a checked trailer (checksum or Parquet magic).
        for bad in [good[..good.len() / 2].to_vec(), good[..3].to_vec(), {
            let mut b = good.clone();
            let at = b.len() - 2;
            b[at] ^= 0xFF;
            b
        }] {
            put(&store, &path, bad).await;
            // A fresh handle: files are immutable, so a handle may cache what it decoded.
            let fresh = Table::open(store.clone(), "t".into())
                .latest()
                .await
                .unwrap();
            let scanned = read_rows(&fresh).await;
            let resolved = fresh.resolve(RowId::from_u64(addr(0, 0))).await;
            assert!(
                scanned.is_err() || resolved.is_err(),
                "damage to {path} went unnoticed"
            );
            for err in [scanned.err(), resolved.err()].into_iter().flatten() {
                assert!(
                    matches!(err, Error::Corrupt { .. } | Error::Parquet(_)),
                    "{path}: {err}"
                );
            }
        }
        put(&store, &path, good).await;
    }
    assert_eq!(
        read_rows(&table.latest().await.unwrap())
            .await
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn schema_mismatches_and_bad_rows_commit_nothing() {
    let (table, _) = memory_table(10).await;
    table.append(vec![batch(&[(1, 1)])]).await.unwrap();
    use arrow::array::{Int32Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    let wrong_type = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("key", DataType::Int32, false),
            Field::new("val", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int32Array::from(vec![1])),
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(arrow::array::StringArray::from(vec!["x"])),
        ],
    )
    .unwrap();
    let missing = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("key", DataType::Int64, true)])),
        vec![Arc::new(Int64Array::from(vec![Some(1)]))],
    )
    .unwrap();
    let null_key = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("key", DataType::Int64, true),
            Field::new("val", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![None])),
            Arc::new(Int64Array::from(vec![Some(1)])),
            Arc::new(arrow::array::StringArray::from(vec![Some("x")])),
        ],
    )
    .unwrap();
    for bad in [wrong_type, missing, null_key] {
        let err = table.append(vec![bad]).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    }
    let err = table
        .delete_rows(&[RowId::from_u64(addr(5, 5))])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RowNotFound(_)), "{err}");
    let err = table
        .upsert("key", vec![batch(&[(3, 3), (3, 4)])])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    let err = table
        .upsert("nope", vec![batch(&[(3, 3)])])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(matches!(
        table.at_version(99).await,
        Err(Error::VersionNotFound { version: 99, .. })
    ));
    assert_eq!(
        table.latest().await.unwrap().version(),
        2,
        "nothing committed"
    );
    assert_eq!(
        read_rows(&table.latest().await.unwrap())
            .await
            .unwrap()
            .len(),
        1
    );

    let reserved = Schema::new(vec![Field::new("_rowid", DataType::UInt64, false)]);
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let err = Table::create(
        store.clone(),
        "r".into(),
        &reserved,
        TableOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(matches!(
        Table::open(store, "r".into()).latest().await,
        Err(Error::TableNotFound { .. })
    ));
}

#[tokio::test]
async fn opens_cost_one_list_and_one_get() {
    let inner: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let counted = Arc::new(natal::internals::io::InstrumentedStore::new(inner));
    let table = Table::create(
        counted.clone(),
        "t".into(),
        &schema(),
        TableOptions {
            max_rows_per_fragment: 2,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for k in 0..5 {
        table
            .append(vec![batch(&[(k, k), (k + 10, k)])])
            .await
            .unwrap();
    }
    counted.reset();
    let snapshot = table.latest().await.unwrap();
    let tally = counted.tally();
    assert_eq!((tally.list, tally.get, tally.total()), (1, 1, 2));
    counted.reset();
    table.at_version(3).await.unwrap();
    let tally = counted.tally();
    assert_eq!((tally.get, tally.total()), (1, 1));
    // count(*) needs no request beyond the open.
    counted.reset();
    assert_eq!(snapshot.count_rows(), 10);
    assert_eq!(counted.tally().total(), 0);
}

/// Deletion deltas of one fragment must be disjoint; a delta that repeats an older one's
/// offset is corruption, not a silently smaller table.
#[tokio::test]
async fn overlapping_deletion_deltas_are_corrupt() {
    let (table, store) = memory_table(1 << 20).await;
    let rows: Vec<(i64, i64)> = (0..100).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let ids: Vec<RowId> = (0..10).map(|o| RowId::from_u64(addr(0, o))).collect();
    table.delete_rows(&ids).await.unwrap();
    table
        .delete_rows(&[RowId::from_u64(addr(0, 50))])
        .await
        .unwrap();
    let latest = table.latest().await.unwrap();
    let files = latest.manifest().fragments[0]
        .deletion
        .clone()
        .unwrap()
        .into_files();
    assert_eq!(files.len(), 2, "a small delete does not fold a larger file");
    // Same count as the manifest records, but an offset the older file already deletes.
    let overlapping: roaring::RoaringBitmap = [3u32].into_iter().collect();
    let path = table.store().path(&files[1].path);
    put(
        &store,
        &path,
        natal::internals::io::encode_deletions(&overlapping),
    )
    .await;
    let err = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap()
        .take(&[RowId::from_u64(addr(0, 60))], Default::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
}

/// A deletion file that counts more moved rows than it deletes would let reads skip outright
/// deletions: the manifest is corrupt.
#[tokio::test]
async fn more_moves_than_deletions_is_corrupt() {
    let (table, store) = populated().await;
    let vector = table.latest().await.unwrap().manifest().fragments[0]
        .deletion
        .clone()
        .unwrap();
    assert_eq!(
        (vector.first().deleted_rows, vector.first().moved_rows),
        (1, 1)
    );
    // DeletionFile fields 2 (deleted_rows) and 3 (moved_rows), both 1, as protobuf varints.
    swap_in_latest(&table, &store, &[0x10, 1, 0x18, 1], &[0x10, 1, 0x18, 2]).await;
    let table = reopen(&store);
    let err = table.latest().await.unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { reason, .. } if reason.contains("moved")),
        "{err}"
    );
}

/// An index section that escapes the table, reuses a sequence number or holds an
/// undecodable fragment bitmap makes the manifest corrupt; a damaged index never reads as
/// an empty one.
#[tokio::test]
async fn damaged_index_sections_are_refused() {
    let (table, store) = populated().await;
    table.create_index("val_idx", "val").await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let segment = snapshot.manifest().indexes.segments[0].clone();
    let version = snapshot.version();
    let path = table.store().manifest_path(version);
    let original = get(&store, &path).await;

    let indexed = segment.path.to_string();
    let escape = format!("_indices/../{}", &indexed[12..]);
    swap_in_latest(&table, &store, indexed.as_bytes(), escape.as_bytes()).await;
    let table = reopen(&store);
    let err = table.latest().await.unwrap_err();
    assert!(matches!(err, Error::PathEscapesTable { .. }), "{err}");

    // A roaring bitmap starts with its cookie; without it the bitmap cannot be read.
    put(&store, &path, original.clone()).await;
    let table = reopen(&store);
    let mut bitmap = Vec::new();
    segment.fragments.serialize_into(&mut bitmap).unwrap();
    let mut damaged = bitmap.clone();
    damaged[..4].copy_from_slice(&[0xff; 4]);
    swap_in_latest(&table, &store, &bitmap, &damaged).await;
    let table = reopen(&store);
    let err = table.latest().await.unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { .. }) && err.to_string().contains("fragment bitmap"),
        "{err}"
    );

    let mut twice = Manifest::decode(path.as_ref(), &original)
        .and_then(|m| m.resolve(&Default::default()))
        .unwrap();
    let mut copy = segment.clone();
    copy.uuid = "another".into();
    twice.indexes.segments.push(copy);
    put(&store, &path, twice.encode()).await;
    let table = reopen(&store);
    let err = table.latest().await.unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { .. }) && err.to_string().contains("segment_seq 1 twice"),
        "{err}"
    );
}
