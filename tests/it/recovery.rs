//! A damaged latest version is recoverable: reads of the latest fail naming the file and
//! saying how to recover, older versions read, a restore publishes the version after the
//! damaged one, with marks that never hand out a fragment id or index segment number the
//! damaged version could hold, and the table can be dropped.

use std::sync::Arc;

use bytes::Bytes;
use datafusion::prelude::SessionContext;
use natal::{Error, RowId, Table};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::common::*;

/// Overwrites the latest manifest with bytes that are no manifest; returns its version.
async fn damage_latest(table: &Table, store: &Arc<dyn ObjectStore>) -> u64 {
    let version = table.store().latest_version().await.unwrap().unwrap();
    let path = table.store().manifest_path(version);
    let garbage = PutPayload::from(Bytes::from_static(b"not a manifest at all"));
    store.put(&path, garbage).await.unwrap();
    version
}

fn fragment_of(id: u64) -> u32 {
    RowId::from_u64(id).birth_fragment()
}

#[tokio::test]
async fn a_restore_over_a_damaged_append_never_reuses_its_fragment_ids() {
    let (table, store) = memory_table(4).await;
    let rows = |from: i64| (from..from + 10).map(|k| (k, k)).collect::<Vec<_>>();
    table.append(vec![batch(&rows(0))]).await.unwrap(); // v2: fragments 0..=2
    table.append(vec![batch(&rows(10))]).await.unwrap(); // v3: fragments 3..=5
    table.append(vec![batch(&rows(20))]).await.unwrap(); // v4: fragments 6..=8, damaged
    let damaged = damage_latest(&table, &store).await;
    assert_eq!(damaged, 4);

    let fresh = Table::open(store.clone(), "t".into());
    let err = fresh.latest().await.unwrap_err();
    let Error::Corrupt { path, reason } = &err else {
        panic!("{err}")
    };
    assert!(path.ends_with(".manifest"), "{path}");
    assert!(
        reason.contains("natal_restore") && reason.contains("(4)"),
        "{reason}"
    );
    let older = fresh.at_version(3).await.unwrap();
    let before = read_rows(&older).await.unwrap();
    assert_eq!(before.len(), 20);

    let restored = fresh.restore(3).await.unwrap();
    assert_eq!((restored.version, restored.published), (5, true));
    let latest = fresh.latest().await.unwrap();
    assert_eq!(
        read_rows(&latest).await.unwrap(),
        before,
        "rows and ids of version 3"
    );
    // The damaged version wrote three data files nothing readable references: ids 6..=8
    // stay taken.
    assert_eq!(latest.manifest().max_fragment_id, Some(8));
    fresh.append(vec![batch(&rows(30))]).await.unwrap();
    let after = read_rows(&fresh.latest().await.unwrap()).await.unwrap();
    let new_fragments: Vec<u32> = after
        .keys()
        .filter(|id| !before.contains_key(id))
        .map(|&id| fragment_of(id))
        .collect();
    assert_eq!(new_fragments.len(), 10);
    assert!(new_fragments.iter().all(|&f| f >= 9), "{new_fragments:?}");

    // Cleanup keeps refusing to guess what the damaged version needs while it is kept,
    // and removes it when the policy lets it go.
    let keep_all = natal::CleanupPolicy {
        keep_versions: 10,
        keep_newer_than: std::time::Duration::ZERO,
        min_file_age: std::time::Duration::ZERO,
    };
    let refused = fresh.cleanup(keep_all.clone()).await.unwrap_err();
    assert!(
        refused.to_string().contains("keep fewer versions"),
        "{refused}"
    );
    let report = fresh
        .cleanup(natal::CleanupPolicy {
            keep_versions: 1,
            ..keep_all
        })
        .await
        .unwrap();
    assert_eq!(report.versions_removed, 5);
    assert_eq!(
        read_rows(&fresh.latest().await.unwrap()).await.unwrap(),
        after
    );
}

#[tokio::test]
async fn a_restore_over_a_damaged_index_build_never_reuses_its_segment_numbers() {
    let (table, store) = memory_table(4).await;
    let rows: Vec<(i64, i64)> = (0..8).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let first = table.create_index("by_val", "val").await.unwrap();
    assert_eq!(first.figures.segment_seq, Some(1));
    table.append(vec![batch(&[(100, 100)])]).await.unwrap();
    let second = table.create_index("by_val", "val").await.unwrap();
    assert_eq!(second.figures.segment_seq, Some(2));
    damage_latest(&table, &store).await;

    let fresh = Table::open(store.clone(), "t".into());
    fresh.restore(4).await.unwrap();
    let again = fresh.create_index("by_val", "val").await.unwrap();
    assert!(
        again.figures.segment_seq > Some(2),
        "{:?} may be the damaged version's",
        again.figures.segment_seq
    );
}

/// The newest manifest file under `versions` (names count down, so it sorts first).
pub fn newest_manifest(versions: &std::path::Path) -> std::path::PathBuf {
    let mut manifests: Vec<_> = std::fs::read_dir(versions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    manifests.sort();
    manifests.remove(0)
}

/// A session over `root` with no handle cached from before.
fn session(root: &std::path::Path) -> SessionContext {
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, root.to_str().unwrap()).unwrap();
    ctx
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_table_recovers_and_drops_through_sql() {
    let (dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE t (k BIGINT, v VARCHAR)").await;
    run(&ctx, "INSERT INTO t VALUES (1, 'a'), (2, 'b')").await;
    run(&ctx, "INSERT INTO t VALUES (3, 'c')").await;
    let versions = dir.path().join("t/_versions");
    std::fs::write(newest_manifest(&versions), b"damaged").unwrap();

    let fresh = session(dir.path());
    for sql in [
        "SELECT * FROM t",
        "SELECT k FROM t",
        "INSERT INTO t VALUES (9, 'z')",
    ] {
        let err = sql_error(&fresh, sql).await;
        assert!(
            err.contains("natal_restore") && err.contains(".manifest"),
            "{sql}: {err}"
        );
    }
    assert_eq!(count(&fresh, "SELECT * FROM \"t@v2\"").await, 2);
    run(&fresh, "SELECT * FROM natal_restore('t', 2)").await;
    assert_eq!(count(&fresh, "SELECT * FROM t").await, 2);

    // A table whose latest version is damaged drops, every file of it.
    std::fs::write(newest_manifest(&versions), b"damaged").unwrap();
    let fresh = session(dir.path());
    run(&fresh, "DROP TABLE t").await;
    let left: Vec<_> = walk(&dir.path().join("t"));
    assert!(left.is_empty(), "{left:?}");
    run(&fresh, "DROP TABLE IF EXISTS t").await;
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flat_map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// The error `sql` fails with, at planning or while it runs.
async fn sql_error(ctx: &SessionContext, sql: &str) -> String {
    match ctx.sql(sql).await {
        Err(e) => e.to_string(),
        Ok(frame) => frame.collect().await.expect_err(sql).to_string(),
    }
}

async fn count(ctx: &SessionContext, sql: &str) -> usize {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum()
}
