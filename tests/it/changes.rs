//! Change reads: `Table::changes` and `natal_changes` — net changes by row id, what each
//! operation reports, bad ranges, and the reads a change read makes.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type};
use natal::internals::io::InstrumentedStore;
use natal::{CleanupPolicy, CompactOptions, Error, Table, TableOptions};
use object_store::memory::InMemory;

use crate::common::*;

/// (kind, version, id, key, val) of every reported change, in report order.
pub(crate) fn report(batches: &[RecordBatch]) -> Vec<(String, u64, u64, i64, i64)> {
    let mut out = Vec::new();
    for b in batches {
        let column = |name: &str| b.column_by_name(name).expect(name).clone();
        for i in 0..b.num_rows() {
            out.push((
                column(natal::CHANGE_TYPE)
                    .as_string::<i32>()
                    .value(i)
                    .to_string(),
                column(natal::COMMIT_VERSION)
                    .as_primitive::<UInt64Type>()
                    .value(i),
                column(natal::ROW_ID).as_primitive::<UInt64Type>().value(i),
                column("key").as_primitive::<Int64Type>().value(i),
                column("val").as_primitive::<Int64Type>().value(i),
            ));
        }
    }
    out
}

fn change(kind: &str, version: u64, id: u64, key: i64, val: i64) -> (String, u64, u64, i64, i64) {
    (kind.to_string(), version, id, key, val)
}

/// Appends, an update, a delete, an insert and a compaction: each range reports each row's
/// net change with the version of its last change; the compaction reports nothing.
#[tokio::test]
async fn a_change_read_reports_each_rows_net_change_by_id() {
    let (table, _) = memory_table_with(TableOptions {
        max_rows_per_fragment: 4,
        merge: None,
        ..Default::default()
    })
    .await;
    let rows: Vec<(i64, i64)> = (0..6).map(|k| (k, 0)).collect();
    assert_eq!(table.append(vec![batch(&rows)]).await.unwrap().version, 2);
    // v3: key 1 and 4 get val 10.
    let v3 = table
        .update_where(key_matches(|k| k % 3 == 1), &add_to_val(10))
        .await
        .unwrap();
    assert_eq!(v3.version, 3);
    // v4: key 2 deleted; v5: key 4 updated again; v6: two rows inserted.
    table.delete_where(key_matches(|k| k == 2)).await.unwrap();
    table
        .update_where(key_matches(|k| k == 4), &add_to_val(1))
        .await
        .unwrap();
    table.append(vec![batch(&[(6, 0), (7, 0)])]).await.unwrap();
    let compacted = table.compact(CompactOptions::default()).await.unwrap();
    assert!(compacted.published);
    assert_eq!(compacted.version, 7);
    // Fragments 0 and 1 hold keys 0-3 and 4-5; the updates write 2 and 3, the append 4.
    let (f1, f2) = (|o| addr(0, o), |o| addr(1, o));
    let new = |o| addr(4, o);

    let all = table.changes(2, 7).await.unwrap();
    assert_eq!(
        report(&all.batches),
        vec![
            change("update_preimage", 3, f1(1), 1, 0),
            change("update_postimage", 3, f1(1), 1, 10),
            change("delete", 4, f1(2), 2, 0),
            change("update_preimage", 5, f2(0), 4, 0),
            change("update_postimage", 5, f2(0), 4, 11),
            change("insert", 6, new(0), 6, 0),
            change("insert", 6, new(1), 7, 0),
        ]
    );
    assert_eq!((all.inserted, all.updated, all.deleted), (2, 2, 1));
    // As a stream: the same rows, read as they are asked for.
    let stream = table
        .change_stream(2, 7, natal::ChangeRequest::default())
        .await
        .unwrap();
    assert_eq!((stream.inserted, stream.updated, stream.deleted), (2, 2, 1));
    let streamed: Vec<RecordBatch> = futures::TryStreamExt::try_collect(stream.batches)
        .await
        .unwrap();
    assert_eq!(report(&streamed), report(&all.batches));
    assert_eq!(all.versions_diffed, 4, "the compaction is not diffed");
    // The compaction alone moved rows and changed none.
    assert!(report(&table.changes(6, 7).await.unwrap().batches).is_empty());
    assert!(report(&table.changes(7, 7).await.unwrap().batches).is_empty());
    // From v4: key 4's preimage is its value at v4 (after the first update).
    assert_eq!(
        report(&table.changes(4, 5).await.unwrap().batches),
        vec![
            change("update_preimage", 5, f2(0), 4, 10),
            change("update_postimage", 5, f2(0), 4, 11),
        ]
    );
    // The schema: the table's columns, then the change's.
    let names: Vec<String> = all
        .schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        [
            "key",
            "val",
            "name",
            "_rowid",
            "_change_type",
            "_commit_version",
            "_commit_timestamp"
        ]
    );
}

/// A row inserted and deleted inside the range reports nothing; an overwrite reports every
/// old row deleted and every new row inserted; a restore reports what it put back, and
/// nothing for rows it only moved back.
#[tokio::test]
async fn overwrites_restores_and_short_lived_rows() {
    let (table, _) = memory_table(4).await;
    table.append(vec![batch(&[(1, 0), (2, 0)])]).await.unwrap(); // v2
    table.append(vec![batch(&[(3, 0)])]).await.unwrap(); // v3 (merged after: v4)
    let v = table.latest().await.unwrap().version();
    table.delete_where(key_matches(|k| k == 3)).await.unwrap();
    let after_delete = table.latest().await.unwrap().version();
    let deleted = report(&table.changes(v, after_delete).await.unwrap().batches);
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!((deleted[0].0.as_str(), deleted[0].3), ("delete", 3));
    // Restore the version before the delete: key 3 comes back, as it was.
    table.restore(v).await.unwrap();
    let restored = table.latest().await.unwrap().version();
    let back = report(&table.changes(after_delete, restored).await.unwrap().batches);
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!((back[0].0.as_str(), back[0].3), ("insert", 3));
    // Over the delete and its restore, nothing changed.
    assert!(report(&table.changes(v, restored).await.unwrap().batches).is_empty());
    table.overwrite(vec![batch(&[(9, 9)])]).await.unwrap();
    let over = table.changes(restored, restored + 1).await.unwrap();
    let mut kinds: Vec<(String, i64)> = report(&over.batches)
        .into_iter()
        .map(|c| (c.0, c.3))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("delete".to_string(), 1),
            ("delete".to_string(), 2),
            ("delete".to_string(), 3),
            ("insert".to_string(), 9)
        ]
    );
}

/// `from` after `to`, a version not yet written, and versions cleanup removed are typed
/// errors; the last names the oldest version still readable.
#[tokio::test]
async fn bad_ranges_are_typed_errors() {
    let (table, _) = memory_table(4).await;
    for i in 0..4 {
        table.append(vec![batch(&[(i, 0)])]).await.unwrap();
    }
    let latest = table.latest().await.unwrap().version();
    let e = table.changes(3, 2).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    let e = table.changes(2, latest + 1).await.unwrap_err();
    assert!(
        matches!(e, Error::VersionNotFound { version, .. } if version == latest + 1),
        "{e}"
    );
    table
        .cleanup(CleanupPolicy {
            keep_versions: 2,
            keep_newer_than: std::time::Duration::ZERO,
            min_file_age: std::time::Duration::ZERO,
        })
        .await
        .unwrap();
    let e = table.changes(1, latest).await.unwrap_err();
    assert!(
        matches!(e, Error::VersionRemoved { version: 1, oldest, .. } if oldest == latest - 1),
        "{e}"
    );
    assert!(e
        .to_string()
        .contains(&format!("oldest version still readable is {}", latest - 1)));
    assert!(table.changes(latest - 1, latest).await.is_ok());
}

/// A table `t` of fragments of 1,000 rows, never merged, over an in-memory store whose
/// requests are counted.
async fn counted_table() -> (Table, Arc<InstrumentedStore>) {
    counted_table_recording(false).await
}

/// [`counted_table`], recording change data if `feed`.
pub(crate) async fn counted_table_recording(feed: bool) -> (Table, Arc<InstrumentedStore>) {
    let counted = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let options = TableOptions {
        max_rows_per_fragment: 1000,
        merge: None,
        change_data_feed: feed,
        ..Default::default()
    };
    let table = Table::create(counted.clone(), "t".into(), &schema(), options)
        .await
        .unwrap();
    (table, counted)
}

/// A change read after updates to a few rows reads no data file of the fragments they
/// left untouched: its GETs are the range's manifests, the deletion files added, and the
/// pages of the changed rows.
#[tokio::test]
async fn a_change_read_reads_only_what_changed() {
    let (table, counted) = counted_table().await;
    let rows: Vec<(i64, i64)> = (0..10_000).map(|k| (k, 0)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let from = table.latest().await.unwrap().version();
    // Key 5 (fragment 1) updated, key 9,995 (fragment 10) deleted.
    table
        .update_where(key_matches(|k| k == 5), &add_to_val(1))
        .await
        .unwrap();
    table
        .delete_where(key_matches(|k| k == 9_995))
        .await
        .unwrap();
    let to = table.latest().await.unwrap().version();
    let cold = Table::open(counted.clone(), "t".into());
    counted.reset();
    let read = cold.changes(from, to).await.unwrap();
    assert_eq!((read.inserted, read.updated, read.deleted), (0, 1, 1));
    let tally = counted.tally();
    // 3 manifests, 2 deletion files, and the data of fragments 0, 9 and the update's new
    // one (a GET or two each), never the 8 others' (a GET each at least).
    assert!(tally.get <= 3 + 2 + 3 * 2, "{tally:?}");
    assert_eq!(tally.list, 0, "{tally:?}");

    // Asking no column reads no data at all: the manifests and deletion files say it all.
    let cold = Table::open(counted.clone(), "t".into());
    counted.reset();
    let ids_only = natal::ChangeRequest {
        columns: Some(vec![]),
        ..Default::default()
    };
    let read = cold.changes_with(from, to, ids_only).await.unwrap();
    assert_eq!(
        read.batches[0].num_columns(),
        4,
        "_rowid and the change's columns"
    );
    assert_eq!(
        report_kinds(&read.batches),
        ["update_preimage", "update_postimage", "delete"]
    );
    assert_eq!(counted.tally().get, 3 + 2, "{:?}", counted.tally());
    // New values only (what Lance's delta gives): nothing read at `from`.
    let cold = Table::open(counted.clone(), "t".into());
    counted.reset();
    let new_values = natal::ChangeRequest {
        columns: None,
        kinds: Some(vec![
            natal::ChangeType::Insert,
            natal::ChangeType::UpdatePostimage,
        ]),
        ..Default::default()
    };
    let read = cold.changes_with(from, to, new_values).await.unwrap();
    assert_eq!(report_kinds(&read.batches), ["update_postimage"]);
    assert_eq!((read.inserted, read.updated, read.deleted), (0, 1, 1));
    assert!(counted.tally().get <= 3 + 2 + 2, "{:?}", counted.tally());
}

/// Over many versions, the change is read from its two ends: each version's deletion files
/// are read only to date the deletes, and not when the versions of deletes are not asked.
#[tokio::test]
async fn deletes_are_dated_only_when_asked() {
    let (table, counted) = counted_table().await;
    let rows: Vec<(i64, i64)> = (0..2_000).map(|k| (k, 0)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let from = table.latest().await.unwrap().version();
    // Eight versions, each deleting a key of each fragment and updating another.
    for round in 0..8 {
        let deleted = move |k: i64| k % 1000 == round;
        table.delete_where(key_matches(deleted)).await.unwrap();
        let updated = move |k: i64| k % 1000 == 500 + round;
        table
            .update_where(key_matches(updated), &add_to_val(1))
            .await
            .unwrap();
    }
    let to = table.latest().await.unwrap().version();
    let read = |undated_deletes| {
        let (counted, cold) = (counted.clone(), Table::open(counted.clone(), "t".into()));
        async move {
            counted.reset();
            let request = natal::ChangeRequest {
                columns: Some(vec![]),
                undated_deletes,
                ..Default::default()
            };
            let read = cold.changes_with(from, to, request).await.unwrap();
            (read, counted.tally().get)
        }
    };
    let (dated, dated_gets) = read(false).await;
    let (undated, undated_gets) = read(true).await;
    assert_eq!((dated.inserted, dated.updated, dated.deleted), (0, 16, 16));
    let deletes = |read: &natal::ChangedRows| -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for batch in &read.batches {
            let column = |name: &str| batch.column_by_name(name).unwrap().clone();
            let (ids, kinds, versions) = (
                column(natal::ROW_ID),
                column(natal::CHANGE_TYPE),
                column(natal::COMMIT_VERSION),
            );
            let (ids, kinds, versions) = (
                ids.as_primitive::<arrow::datatypes::UInt64Type>(),
                kinds.as_string::<i32>(),
                versions.as_primitive::<arrow::datatypes::UInt64Type>(),
            );
            for i in 0..batch.num_rows() {
                if kinds.value(i) == "delete" {
                    out.push((ids.value(i), versions.value(i)));
                }
            }
        }
        out.sort();
        out
    };
    // Dated: key k % 1000 == r went in round r's DELETE, version from + 1 + 2r.
    for (id, version) in deletes(&dated) {
        let round = id % (1 << 32) % 1000;
        assert_eq!(version, from + 1 + 2 * round, "row {id}");
    }
    let undated_deletes: Vec<(u64, u64)> = (deletes(&dated).into_iter())
        .map(|(id, _)| (id, to))
        .collect();
    assert_eq!(deletes(&undated), undated_deletes);
    assert!(
        undated_gets < dated_gets,
        "undated {undated_gets} GETs, dated {dated_gets}"
    );
}

fn report_kinds(batches: &[RecordBatch]) -> Vec<String> {
    (batches.iter())
        .flat_map(|b| {
            let kinds = b
                .column_by_name(natal::CHANGE_TYPE)
                .unwrap()
                .as_string::<i32>();
            kinds
                .iter()
                .map(|k| k.unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `natal_changes` in SQL: the range pinned when planned, the table's columns and the
/// change's, and clear errors for bad arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natal_changes_answers_in_sql() {
    let (_dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE t (k BIGINT, v VARCHAR)").await; // v1
    run(&ctx, "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')").await; // v2
    run(&ctx, "UPDATE t SET v = 'B' WHERE k = 2").await; // v3
    run(&ctx, "DELETE FROM t WHERE k = 3").await; // v4
    run(&ctx, "INSERT INTO t VALUES (4, 'd')").await; // v5
    let query = "SELECT k, v, _change_type, _commit_version FROM natal_changes('t', 2) \
                 ORDER BY _commit_version, k, _change_type";
    let expected = [
        "+---+---+------------------+-----------------+",
        "| k | v | _change_type     | _commit_version |",
        "+---+---+------------------+-----------------+",
        "| 2 | B | update_postimage | 3               |",
        "| 2 | b | update_preimage  | 3               |",
        "| 3 | c | delete           | 4               |",
        "| 4 | d | insert           | 5               |",
        "+---+---+------------------+-----------------+",
    ];
    assert_eq!(answer(&ctx, query).await.unwrap(), expected.join("\n"));
    // Filters on `_change_type` are the read's own: it reads only what they keep.
    let kept = "SELECT k, _change_type FROM natal_changes('t', 2) \
                WHERE _change_type IN ('insert', 'update_postimage') ORDER BY k";
    let expected = [
        "+---+------------------+",
        "| k | _change_type     |",
        "+---+------------------+",
        "| 2 | update_postimage |",
        "| 4 | insert           |",
        "+---+------------------+",
    ];
    assert_eq!(answer(&ctx, kept).await.unwrap(), expected.join("\n"));
    let plan = answer(&ctx, &format!("EXPLAIN {kept}")).await.unwrap();
    assert!(plan.contains("kinds=[insert, update_postimage]"), "{plan}");
    assert!(!plan.contains("FilterExec"), "{plan}");
    let other = "SELECT count(*) AS n FROM natal_changes('t', 2) WHERE k > 2";
    assert!(answer(&ctx, other).await.unwrap().contains("| 2 |"));
    let count = "SELECT count(*) AS n FROM natal_changes('t', 3, 4)";
    assert!(answer(&ctx, count).await.unwrap().contains("| 1 |"));
    // The same version at both ends: nothing changed.
    let none = "SELECT count(*) AS n FROM natal_changes('t', 5, 5)";
    assert!(answer(&ctx, none).await.unwrap().contains("| 0 |"));
    for (bad, says) in [
        (
            "SELECT * FROM natal_changes('t', 4, 2)",
            "must not be after",
        ),
        (
            "SELECT * FROM natal_changes('t', 9)",
            "after the latest version (5)",
        ),
        ("SELECT * FROM natal_changes('t', 1, 9)", "version 9"),
        ("SELECT * FROM natal_changes('t')", "missing argument 2"),
        (
            "SELECT * FROM natal_changes('t', 'x')",
            "must be a non-negative integer",
        ),
        (
            "SELECT * FROM natal_changes('t', -1)",
            "must be a non-negative integer",
        ),
        (
            "SELECT * FROM natal_changes('t', 1, 2, 3)",
            "got 4 arguments",
        ),
        ("SELECT * FROM natal_changes('nope', 1)", "no natal table"),
    ] {
        let e = answer(&ctx, bad).await.unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}
