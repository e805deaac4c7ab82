//! Rewrites that keep blob values unchanged reuse them (seed 003): an UPDATE of other
//! columns and a MERGE read stored values as references and write descriptors and reuse
//! index entries only — no sidecar written, whether through Rust or SQL; a second rewrite maps
//! to the physical sidecar, never through the first; cleanup keeps what the indexes name and
//! a repack frees it. A reference carried into another table is refused; an update whose
//! sidecars a compaction repacked meanwhile is a conflict that leaves nothing behind.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use natal::{BlobReferences, CompactOptions, RowMatch, ScanRequest, Snapshot};
use object_store::ObjectStore;

use crate::blob::{blob_batch, blob_table, read_blobs, sidecars};
use crate::faults::keep_last;

/// Every row rewritten with the values it has.
fn keep_values(batch: &RecordBatch) -> natal::Result<RecordBatch> {
    Ok(batch.project(&[0, 1])?)
}

/// The rows `ids` name (every row if `None`), their blob values read as references.
fn carried(ids: Option<std::ops::RangeInclusive<u64>>) -> RowMatch {
    RowMatch {
        row_id_range: ids,
        blob_references: BlobReferences::Stored,
        ..Default::default()
    }
}

/// The stems (sidecar directories) of `snapshot`'s data files, and the directories their
/// reuse indexes name.
fn stems_and_sources(snapshot: &Snapshot) -> (BTreeSet<String>, BTreeSet<String>) {
    let files = snapshot.manifest().fragments.iter().flat_map(|f| &f.files);
    let mut stems = BTreeSet::new();
    let mut sources = BTreeSet::new();
    for file in files {
        stems.insert(file.path.as_str().trim_end_matches(".parquet").to_string());
        for source in file.blob_reuse_index.iter().flat_map(|i| i.sources()) {
            sources.insert(source.directory.as_str().to_string());
        }
    }
    (stems, sources)
}

/// Every file of the table `t` the tests make.
async fn all_files(store: &Arc<dyn ObjectStore>) -> Vec<String> {
    crate::blob::files_under(store, "t").await
}

#[tokio::test]
async fn an_update_of_other_columns_writes_no_payload_and_maps_to_the_physical_sidecar() {
    let (table, store) = blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    let first = table.latest().await.unwrap();
    let (original, _) = stems_and_sources(&first);
    let written = sidecars(&store).await;
    assert!(written.len() > 2, "{written:?}");

    table
        .update_matching(carried(None), &keep_values)
        .await
        .unwrap();
    assert_eq!(sidecars(&store).await, written, "no payload copied");
    // Again: the second file maps to the sidecars themselves, not through the first update.
    table
        .update_matching(carried(Some(0..=19)), &keep_values)
        .await
        .unwrap();
    assert_eq!(sidecars(&store).await, written);
    let latest = table.latest().await.unwrap();
    let (_, sources) = stems_and_sources(&latest);
    assert_eq!(
        sources, original,
        "indexes name the physical directory only"
    );
    assert_eq!(read_blobs(&latest).await.unwrap().len(), 40);

    // Compaction drops the original file (every row of it rewritten) and cleanup deletes
    // it; its sidecars stay, named by indexes.
    let reuse = CompactOptions {
        repack_below_live_fraction: 0.0,
        ..Default::default()
    };
    table.compact(reuse).await.unwrap();
    table.cleanup(keep_last(1)).await.unwrap();
    let latest = table.latest().await.unwrap();
    let files = all_files(&store).await;
    for stem in &original {
        assert!(!files.contains(&format!("t/{stem}.parquet")), "{files:?}");
    }
    assert_eq!(sidecars(&store).await, written);
    assert_eq!(read_blobs(&latest).await.unwrap().len(), 40);

    // A repack of everything copies the values out; then they are the only sidecars left.
    table.append(vec![blob_batch(40..44)]).await.unwrap();
    let repack = CompactOptions {
        reuse_blob_sidecars: false,
        max_deleted_fraction: 0.0,
        ..Default::default()
    };
    table.compact(repack).await.unwrap();
    table.cleanup(keep_last(1)).await.unwrap();
    let after = sidecars(&store).await;
    assert!(after.iter().all(|s| !written.contains(s)), "{after:?}");
    let latest = table.latest().await.unwrap();
    assert_eq!(stems_and_sources(&latest).1, BTreeSet::new());
    assert_eq!(read_blobs(&latest).await.unwrap().len(), 44);
}

/// Values read as references of one table are refused by another (whose sidecars they are
/// not), with nothing written; read as bytes, or with only external values as references,
/// they copy.
#[tokio::test]
async fn a_stored_reference_written_to_another_table_is_refused() {
    let (source, _) = blob_table().await;
    source.append(vec![blob_batch(0..24)]).await.unwrap();
    let (other, other_store) = blob_table().await;
    let read = |references| {
        let source = source.clone();
        async move {
            let snapshot = source.latest().await.unwrap();
            let request = ScanRequest {
                blob_references: references,
                ..Default::default()
            };
            crate::blob::scan(&snapshot, request).await.unwrap()
        }
    };
    let version = other.latest().await.unwrap().version();
    let error = other
        .append(read(BlobReferences::Stored).await)
        .await
        .unwrap_err();
    assert!(
        matches!(error, natal::Error::InvalidInput(_)) && error.to_string().contains("another"),
        "{error}"
    );
    assert_eq!(other.latest().await.unwrap().version(), version);
    assert_eq!(sidecars(&other_store).await, Vec::<String>::new());

    other
        .append(read(BlobReferences::External).await)
        .await
        .unwrap();
    assert_eq!(
        read_blobs(&other.latest().await.unwrap())
            .await
            .unwrap()
            .len(),
        24
    );
}

/// An update carrying stored values while a compaction runs: one that reused the sidecars
/// leaves them the table's and the update lands; one that repacked them (and a cleanup that
/// removed them) makes the update a typed conflict, its files deleted, every value intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_whose_sidecars_were_repacked_meanwhile_conflicts_and_leaves_nothing() {
    for reuse in [true, false] {
        let (table, store) = blob_table().await;
        table.append(vec![blob_batch(0..20)]).await.unwrap();
        table.append(vec![blob_batch(20..40)]).await.unwrap();
        let (handle, other) = (tokio::runtime::Handle::current(), table.clone());
        let compacted = AtomicBool::new(false);
        let before_commit = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (listing, listed) = (store.clone(), before_commit.clone());
        let update = move |batch: &RecordBatch| {
            if !compacted.swap(true, Ordering::SeqCst) {
                tokio::task::block_in_place(|| {
                    handle.block_on(async {
                        let options = CompactOptions {
                            reuse_blob_sidecars: reuse,
                            repack_below_live_fraction: 0.0,
                            ..Default::default()
                        };
                        assert!(other.compact(options).await.unwrap().published);
                        other.cleanup(keep_last(1)).await.unwrap();
                        *listed.lock().unwrap() = all_files(&listing).await;
                    })
                });
            }
            keep_values(batch)
        };
        let result = table.update_matching(carried(Some(0..=9)), &update).await;
        let latest = table.latest().await.unwrap();
        let rows = read_blobs(&latest).await.unwrap();
        assert_eq!(rows.len(), 40, "reuse {reuse}");
        if reuse {
            result.unwrap();
            continue;
        }
        let before_update = before_commit.lock().unwrap().clone();
        assert!(!before_update.is_empty());
        let error = result.unwrap_err();
        assert!(
            error.is_conflict() && error.to_string().contains("repacked meanwhile"),
            "{error}"
        );
        // (A deletion file its lost first attempt wrote may stay, for cleanup: a lost race's
        // derived file, as for any write.)
        let data = |files: Vec<String>| -> Vec<String> {
            files
                .into_iter()
                .filter(|f| f.starts_with("t/data/"))
                .collect()
        };
        assert_eq!(
            data(all_files(&store).await),
            data(before_update),
            "nothing left behind"
        );
        let (_, sources) = stems_and_sources(&latest);
        assert_eq!(sources, BTreeSet::new());
    }
}

/// SQL: an UPDATE of other columns and a MERGE that only carries the values write no
/// sidecar; statements that read the values still store the bytes they computed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_updates_and_merges_of_other_columns_write_no_payload() {
    let (dir, ctx) = crate::common::catalog_session();
    let run = |sql: &str| {
        let (ctx, sql) = (ctx.clone(), sql.to_string());
        async move { natal::datafusion::sql(&ctx, &sql).await?.collect().await }
    };
    let path = dir.path().join("docs");
    let blob_files = || {
        let data = path.join("data");
        let mut found = Vec::new();
        for entry in walk(&data) {
            if entry.extension().is_some_and(|e| e == "blob") {
                found.push(entry.display().to_string());
            }
        }
        found.sort();
        found
    };
    run("CREATE TABLE docs (id BIGINT, body BLOB)")
        .await
        .unwrap();
    // The updates rewrite their rows (this test's subject), rather than patch `id`.
    run("SET natal.patch_max_share = 0").await.unwrap();
    // Packed (70,000 bytes) and dedicated (5 MB) values, and one inline.
    run("INSERT INTO docs VALUES \
         (1, CAST(repeat('ab', 35000) AS BYTEA)), \
         (2, CAST(repeat('cd', 35000) AS BYTEA)), \
         (3, CAST(repeat('ef', 2500000) AS BYTEA)), \
         (4, X'0102')")
    .await
    .unwrap();
    let expected = |id: i64| -> Vec<u8> {
        match id % 10 {
            1 => b"ab".repeat(35_000),
            2 => b"cd".repeat(35_000),
            3 => b"ef".repeat(2_500_000),
            _ => vec![1, 2],
        }
    };
    let written = blob_files();
    assert_eq!(written.len(), 2, "one pack and one dedicated: {written:?}");
    run("UPDATE docs SET id = id + 10").await.unwrap();
    assert_eq!(blob_files(), written);
    run("CREATE TABLE moves (k BIGINT, v BIGINT)")
        .await
        .unwrap();
    run("INSERT INTO moves VALUES (11, 21), (13, 23)")
        .await
        .unwrap();
    run("MERGE INTO docs USING moves ON docs.id = moves.k \
         WHEN MATCHED THEN UPDATE SET id = moves.v")
    .await
    .unwrap();
    assert_eq!(blob_files(), written);
    let values = run("SELECT id, body FROM docs ORDER BY id").await.unwrap();
    let mut seen = Vec::new();
    for batch in &values {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let bodies = batch.column(1).as_binary::<i64>();
        for row in 0..batch.num_rows() {
            assert_eq!(bodies.value(row), &expected(ids.value(row))[..]);
            seen.push(ids.value(row));
        }
    }
    assert_eq!(seen, vec![12, 14, 21, 23]);
    let table = natal::datafusion::open_table(&ctx, path.to_str().unwrap()).unwrap();
    let latest = table.latest().await.unwrap();
    let (_, sources) = stems_and_sources(&latest);
    assert_eq!(
        sources.len(),
        1,
        "every rewrite maps to the first file: {sources:?}"
    );

    // An UPDATE whose filter reads the values computes with their bytes.
    run("UPDATE docs SET id = id + 100 WHERE octet_length(body) = 70000")
        .await
        .unwrap();
    let ids = run("SELECT id FROM docs WHERE octet_length(body) = 70000 ORDER BY id")
        .await
        .unwrap();
    let ids: Vec<i64> = (ids.iter())
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(ids, vec![112, 121]);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match path.is_dir() {
            true => out.extend(walk(&path)),
            false => out.push(path),
        }
    }
    out
}
