//! `MERGE INTO` (issue 20.4): every clause kind in one statement, one version; updated rows
//! keep their ids, inserted rows are native, deleted rows are gone; a target row matched
//! twice is an error naming its key; `EXPLAIN MERGE` changes nothing; and the commit
//! underneath (`Table::commit_changes`) rebases as an update does.

use arrow::array::AsArray;
use arrow::datatypes::{Int64Type, UInt64Type};
use datafusion::prelude::SessionContext;
use natal::{Error, RowChangeSet, RowId};

use crate::common::{batch, catalog_session, key_matches, memory_table, read_rows};
use crate::schema::{data_files, fails, fails_with, query};

/// A target `t (id, val, note)` of ids 1..=6 and a source `s (id, val, op)`.
async fn target_and_source(ctx: &SessionContext) {
    query(
        ctx,
        "CREATE TABLE t (id BIGINT NOT NULL, val BIGINT, note VARCHAR)",
    )
    .await;
    query(
        ctx,
        "INSERT INTO t VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c'), (4, 40, 'd'), \
         (5, 50, 'e'), (6, 60, 'f')",
    )
    .await;
    query(ctx, "CREATE TABLE s (id BIGINT, val BIGINT, op VARCHAR)").await;
    query(
        ctx,
        "INSERT INTO s VALUES (2, 200, 'u'), (3, 0, 'd'), (4, 400, 'u'), (7, 700, 'i'), \
         (8, 800, 'i')",
    )
    .await;
}

async fn ids_by_key(ctx: &SessionContext) -> Vec<(i64, u64)> {
    let frame = natal::datafusion::sql(ctx, "SELECT id, _rowid FROM \"t$rows\" ORDER BY id")
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in frame.collect().await.unwrap() {
        let (ids, rowids) = (
            b.column(0).as_primitive::<Int64Type>(),
            b.column(1).as_primitive::<UInt64Type>(),
        );
        out.extend((0..b.num_rows()).map(|i| (ids.value(i), rowids.value(i))));
    }
    out
}

const MERGE: &str = "MERGE INTO t USING s ON t.id = s.id \
     WHEN MATCHED AND s.op = 'd' THEN DELETE \
     WHEN MATCHED THEN UPDATE SET val = s.val, note = 'updated' \
     WHEN NOT MATCHED THEN INSERT (id, val, note) VALUES (s.id, s.val, 'new') \
     WHEN NOT MATCHED BY SOURCE AND t.id > 5 THEN DELETE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_applies_every_clause_in_one_version_keeping_updated_ids() {
    let (_dir, ctx) = catalog_session();
    target_and_source(&ctx).await;
    let before = ids_by_key(&ctx).await;
    let versions = query(&ctx, "SELECT count(*) AS n FROM \"t$versions\"").await;
    let count = query(&ctx, MERGE).await;
    // 2 updated, 1 deleted (matched), 2 inserted, 1 deleted (not matched by source: 6).
    assert!(count.contains("| 6     |"), "{count}");
    assert_eq!(
        query(&ctx, "SELECT * FROM t ORDER BY id").await,
        "+----+-----+---------+\n\
         | id | val | note    |\n\
         +----+-----+---------+\n\
         | 1  | 10  | a       |\n\
         | 2  | 200 | updated |\n\
         | 4  | 400 | updated |\n\
         | 5  | 50  | e       |\n\
         | 7  | 700 | new     |\n\
         | 8  | 800 | new     |\n\
         +----+-----+---------+"
    );
    let after = ids_by_key(&ctx).await;
    for (key, id) in &after {
        match before.iter().find(|(k, _)| k == key) {
            Some((_, was)) => assert_eq!(id, was, "row {key} keeps its id"),
            None => assert!(before.iter().all(|(_, old)| old != id), "new id for {key}"),
        }
    }
    let versions_after = query(&ctx, "SELECT count(*) AS n FROM \"t$versions\"").await;
    assert_ne!(versions, versions_after);
    let last = query(
        &ctx,
        "SELECT operation, rows_added, rows_removed FROM \"t$versions\" ORDER BY version DESC LIMIT 1",
    )
    .await;
    assert!(last.contains("update"), "one commit: {last}");
    // A merge that matches and fires nothing publishes nothing.
    query(&ctx, "CREATE TABLE empty (id BIGINT, val BIGINT)").await;
    let version = query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await;
    query(
        &ctx,
        "MERGE INTO t USING empty e ON t.id = e.id WHEN MATCHED THEN DELETE",
    )
    .await;
    assert_eq!(
        query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await,
        version
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_row_matched_twice_is_an_error_naming_its_key() {
    let (dir, ctx) = catalog_session();
    target_and_source(&ctx).await;
    query(&ctx, "INSERT INTO s VALUES (4, 4000, 'u')").await;
    let files = data_files(dir.path());
    let version = query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await;
    let error = fails(&ctx, MERGE).await;
    assert!(
        error.contains("id = 4") && error.contains("more than one"),
        "{error}"
    );
    assert_eq!(data_files(dir.path()), files, "nothing written");
    assert_eq!(
        query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await,
        version
    );
    // Matched twice but changed by no clause: allowed.
    query(
        &ctx,
        "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED AND s.id = 2 THEN UPDATE SET val = 1",
    )
    .await;
    assert!(query(&ctx, "SELECT val FROM t WHERE id = 2")
        .await
        .contains("| 1   |"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_merge_changes_nothing_and_bad_merges_commit_nothing() {
    let (_dir, ctx) = catalog_session();
    target_and_source(&ctx).await;
    let version = query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await;
    let plan = query(&ctx, &format!("EXPLAIN {MERGE}")).await;
    assert!(plan.contains("NatalMergeExec"), "{plan}");
    fails_with(
        &ctx,
        &[
        (
            "MERGE INTO \"t@v1\" USING s ON \"t@v1\".id = s.id WHEN MATCHED THEN DELETE",
            "read-only",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET val = s.op",
            "Cannot cast",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET nope = 1",
            "nope",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, val) VALUES (NULL, 1)",
            "null",
        ),
        ],
    )
    .await;
    assert_eq!(
        query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await,
        version
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_rebase_over_other_rows_and_conflict_on_the_same_rows() {
    let rows: Vec<(i64, i64)> = (0..10).map(|k| (k, k)).collect();
    let (table, _store) = memory_table(4).await;
    table.append(vec![batch(&rows)]).await.unwrap();
    let read = table.latest().await.unwrap();
    let live = read_rows(&read).await.unwrap();
    let id_of = |key: i64| {
        let (id, row) = live.iter().find(|(_, r)| r.key == key).unwrap();
        (RowId::from_u64(*id), natal::RowAddress::from_u64(row.addr))
    };
    let planned = table.planned_at(table.at_version(read.version()).await.unwrap());
    // Another writer deletes key 9 meanwhile; changes to keys 1 and 2 still land.
    table.delete_where(key_matches(|k| k == 9)).await.unwrap();
    let changes = RowChangeSet {
        deleted: vec![id_of(1)],
        updated: vec![(batch(&[(2, 200)]), vec![id_of(2)])],
        inserted: vec![batch(&[(100, 100)])],
    };
    planned.commit_changes(changes).await.unwrap();
    let now = read_rows(&table.latest().await.unwrap()).await.unwrap();
    let keys: Vec<(i64, i64)> = now.values().map(|r| (r.key, r.val)).collect();
    assert!(!keys.contains(&(1, 1)) && !keys.contains(&(9, 9)));
    assert!(keys.contains(&(2, 200)) && keys.contains(&(100, 100)));
    assert_eq!(now.len(), 9);
    assert!(now.contains_key(&id_of(2).0.as_u64()), "key 2 keeps its id");
    // Changing a row deleted meanwhile is a conflict, and nothing lands.
    let planned = table.planned_at(read);
    let changes = RowChangeSet {
        updated: vec![(batch(&[(9, 90)]), vec![id_of(9)])],
        ..Default::default()
    };
    let error = planned.commit_changes(changes).await.unwrap_err();
    assert!(matches!(error, Error::Conflict { .. }), "{error}");
    // A row named twice is refused.
    let twice = RowChangeSet {
        deleted: vec![id_of(3)],
        updated: vec![(batch(&[(3, 30)]), vec![id_of(3)])],
        ..Default::default()
    };
    assert!(table.commit_changes(twice).await.is_err());
}
