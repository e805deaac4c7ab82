//! Concurrent writers: what rebases and what conflicts (DESIGN.md §4).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use natal::Error;
use natal::RowId;
use natal::{CleanupPolicy, CompactOptions, Table};
use object_store::ObjectStore;

use crate::common::*;
use crate::scripted_store::ScriptedStore;

fn data_paths(snapshot: &natal::Snapshot) -> HashSet<String> {
    snapshot
        .manifest()
        .fragments
        .iter()
        .flat_map(|f| f.files.iter().map(|d| d.path.to_string()))
        .collect()
}

#[tokio::test]
async fn concurrent_appends_both_land_without_rewriting_files() {
    let (table, _) = memory_table(100).await;
    table.append(vec![batch(&[(0, 0)])]).await.unwrap();
    let base = table.latest().await.unwrap().version();
    let a = table.planned_at(table.at_version(base).await.unwrap());
    let b = table.planned_at(table.at_version(base).await.unwrap());
    let first = a.append(vec![batch(&[(1, 1), (2, 2)])]).await.unwrap();
    let files_a = data_paths(&table.latest().await.unwrap());
    let second = b.append(vec![batch(&[(3, 3), (4, 4)])]).await.unwrap();
    assert_eq!((first.version, second.version), (base + 1, base + 2));
    let snapshot = table.latest().await.unwrap();
    let files = data_paths(&snapshot);
    assert!(
        files_a.is_subset(&files),
        "the first append's files are untouched"
    );
    assert_eq!(files.len(), 3);
    let rows = read_rows(&snapshot).await.unwrap();
    let keys: HashSet<i64> = rows.values().map(|r| r.key).collect();
    assert_eq!(keys, HashSet::from([0, 1, 2, 3, 4]));
    for (id, row) in &rows {
        assert_eq!(*id, row.addr, "appended rows are born where they are");
    }
}

#[tokio::test]
async fn parallel_appends_from_many_tasks_all_land() {
    let (table, _) = memory_table(100).await;
    let mut tasks = Vec::new();
    for t in 0..8i64 {
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            table
                .append(vec![batch(&[(t, t)])])
                .await
                .map(|c| c.version)
        }));
    }
    let mut versions = Vec::new();
    for task in tasks {
        versions.push(task.await.unwrap().unwrap());
    }
    versions.sort_unstable();
    assert_eq!(versions, (2..10).collect::<Vec<_>>());
    let rows = read_rows(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(rows.len(), 8);
    let fragments: HashSet<u32> = rows
        .keys()
        .map(|id| RowId::from_u64(*id).birth_fragment())
        .collect();
    assert_eq!(fragments.len(), 8, "each append took its own fragment id");
}

#[tokio::test]
async fn deletes_of_disjoint_rows_rebase_and_of_the_same_row_conflict() {
    let (table, _) = memory_table(100).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3)])])
        .await
        .unwrap();
    let base = table.latest().await.unwrap();
    let v = base.version();
    table
        .planned_at(base)
        .delete_where(key_matches(|k| k == 1))
        .await
        .unwrap();
    table
        .planned_at(table.at_version(v).await.unwrap())
        .delete_where(key_matches(|k| k == 2))
        .await
        .unwrap();
    let rows = read_rows(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(rows.values().map(|r| r.key).collect::<Vec<_>>(), vec![3]);

    let before = table.latest().await.unwrap().version();
    let err = table
        .planned_at(table.at_version(v).await.unwrap())
        .update_where(key_matches(|k| k == 1), &add_to_val(5))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    assert_eq!(
        table.latest().await.unwrap().version(),
        before,
        "nothing committed"
    );
}

#[tokio::test]
async fn a_delete_planned_before_compaction_lands_on_the_compacted_rows() {
    let (table, _) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)])])
        .await
        .unwrap();
    let planned = table.planned_at(table.latest().await.unwrap());
    let compacted = table
        .compact(CompactOptions {
            target_rows_per_fragment: Some(10),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(compacted.published);
    planned
        .delete_where(key_matches(|k| k == 2 || k == 5))
        .await
        .unwrap();
    planned
        .update_where(key_matches(|k| k == 3), &add_to_val(30))
        .await
        .unwrap();
    let rows = read_rows(&table.latest().await.unwrap()).await.unwrap();
    let got: Vec<(u64, i64, i64)> = rows.iter().map(|(id, r)| (*id, r.key, r.val)).collect();
    assert_eq!(
        got,
        vec![(addr(0, 0), 1, 1), (addr(1, 0), 3, 33), (addr(1, 1), 4, 4)]
    );
}

#[tokio::test]
async fn a_compaction_planned_before_a_delete_keeps_the_delete() {
    let (table, _) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3), (4, 4)])])
        .await
        .unwrap();
    let planned = table.planned_at(table.latest().await.unwrap());
    table.delete_where(key_matches(|k| k == 3)).await.unwrap();
    let report = planned
        .compact(CompactOptions {
            target_rows_per_fragment: Some(10),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(report.published);
    let rows = read_rows(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(
        rows.values().map(|r| r.key).collect::<Vec<_>>(),
        vec![1, 2, 4]
    );
}

#[tokio::test]
async fn a_compaction_planned_before_an_update_of_its_rows_conflicts() {
    let (table, _) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3), (4, 4)])])
        .await
        .unwrap();
    let planned = table.planned_at(table.latest().await.unwrap());
    table
        .update_where(key_matches(|k| k == 3), &add_to_val(1))
        .await
        .unwrap();
    let err = planned
        .compact(CompactOptions {
            target_rows_per_fragment: Some(10),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let rows = read_rows(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(
        rows.values().map(|r| (r.key, r.val)).collect::<Vec<_>>(),
        vec![(1, 1), (2, 2), (3, 4), (4, 4)]
    );
}

#[tokio::test]
async fn writes_planned_before_an_overwrite_conflict() {
    let (table, _) = memory_table(10).await;
    table.append(vec![batch(&[(1, 1)])]).await.unwrap();
    let planned = table.planned_at(table.latest().await.unwrap());
    table.overwrite(vec![batch(&[(9, 9)])]).await.unwrap();
    assert!(planned
        .append(vec![batch(&[(2, 2)])])
        .await
        .unwrap_err()
        .is_conflict());
    assert!(planned
        .delete_where(key_matches(|_| true))
        .await
        .unwrap_err()
        .is_conflict());
    let rows = read_rows(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(rows.values().map(|r| r.key).collect::<Vec<_>>(), vec![9]);
}

/// A restore of a version cleanup is removing, committed while cleanup runs (after cleanup
/// listed the versions, before it deleted any file): the restored version's files are kept.
#[tokio::test]
async fn cleanup_keeps_the_files_of_a_restore_committed_while_it_runs() {
    let (table, store) = memory_table(100).await; // version 1
    table.append(vec![batch(&[(1, 1), (2, 2)])]).await.unwrap(); // 2
    table.overwrite(vec![batch(&[(8, 8)])]).await.unwrap(); // 3
    table.overwrite(vec![batch(&[(9, 9)])]).await.unwrap(); // 4
    let restorer = Table::open(store.clone(), "t".into());
    let restore: BoxFuture<'static, ()> = async move {
        let restored = restorer.restore(2).await.expect("restore");
        assert_eq!(restored.version, 5);
    }
    .boxed();
    let hooked: Arc<dyn ObjectStore> =
        Arc::new(ScriptedStore::new(store.clone()).before_first_manifest_delete(restore));
    let policy = CleanupPolicy {
        keep_versions: 1,
        keep_newer_than: Duration::ZERO,
        min_file_age: Duration::ZERO,
    };
    let report = Table::open(hooked, "t".into())
        .cleanup(policy)
        .await
        .unwrap();
    assert_eq!(report.versions_removed, 3, "{report:?}");
    assert_eq!(report.files_removed, 1, "version 3's data file: {report:?}");
    let latest = Table::open(store, "t".into()).latest().await.unwrap();
    assert_eq!(latest.version(), 5);
    let keys: HashSet<i64> = read_rows(&latest)
        .await
        .unwrap()
        .values()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, HashSet::from([1, 2]));
}
