//! Change data: a table that records it captures, in every delete and update, the values of
//! the rows removed; change reads take deletes' and preimages' values there, densely, and
//! answer exactly as they do from the rows' old places. Ranges with a version that did not
//! capture read as before; cleanup keeps captures with their versions; a failed commit
//! leaves none; SQL starts and stops it.

use std::collections::HashSet;
use std::sync::Arc;

use futures::TryStreamExt;
use natal::internals::io::InstrumentedStore;
use natal::{CleanupPolicy, Table, TableOptions};
use object_store::ObjectStore;

use crate::common::*;

use crate::changes::{counted_table_recording as counted_table, report as reported};

/// Scattered updates and deletes over 20 fragments, in four commits (a row updated twice).
async fn scattered_history(table: &Table) -> (u64, u64) {
    let rows: Vec<(i64, i64)> = (0..20_000).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let from = table.latest().await.unwrap().version();
    let update = |m: i64, r: i64, d: i64| {
        let table = table.clone();
        async move {
            table
                .update_where(key_matches(move |k| k % m == r), &add_to_val(d))
                .await
                .unwrap()
        }
    };
    update(97, 3, 1_000_000).await;
    table
        .delete_where(key_matches(|k| k % 89 == 5))
        .await
        .unwrap();
    update(97, 3, 1).await;
    update(101, 7, 2_000_000).await;
    (from, table.latest().await.unwrap().version())
}

/// The same history with and without change data: the same report, and the one with it
/// reads fewer bytes, in fewer requests, for the old values of scattered rows.
#[tokio::test]
async fn captured_values_answer_as_the_rows_old_places_do_and_read_less() {
    let (with, with_counted) = counted_table(true).await;
    let (without, without_counted) = counted_table(false).await;
    let (from, to) = scattered_history(&with).await;
    assert_eq!(scattered_history(&without).await, (from, to));
    // Every update and delete listed its capture: the rows it removed.
    for version in from + 1..=to {
        let manifest = with.at_version(version).await.unwrap().manifest().clone();
        let captured = manifest.change_data.as_ref().expect("captured");
        let rows: u64 = captured.iter().map(|f| u64::from(f.physical_rows)).sum();
        assert_eq!(rows, manifest.transaction.rows_removed, "version {version}");
        let ids: Vec<u64> = (captured.iter())
            .flat_map(|f| {
                f.row_ids
                    .sequence()
                    .expect("ids")
                    .iter()
                    .collect::<Vec<_>>()
            })
            .map(|id| id.as_u64())
            .collect();
        // Each removed row once: a delete's by id, an update's as its scan met them.
        let unique: HashSet<u64> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "version {version}");
        if manifest.transaction.operation == natal::Operation::Delete {
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "version {version}");
        } else {
            // An update's capture has the ids of the fragment it wrote, stored once.
            let added = manifest.transaction.fragments_added[0];
            let written = manifest.fragment(added).expect("added").row_ids.sequence();
            let shared = captured[0].row_ids.sequence();
            assert!(
                shared.zip(written).is_some_and(|(a, b)| Arc::ptr_eq(a, b)),
                "version {version}"
            );
        }
        let plain = without.at_version(version).await.unwrap();
        assert!(plain.manifest().change_data.is_none());
    }
    // Each read cold: a fresh handle on the counted store.
    let read = |counted: &Arc<InstrumentedStore>, from, to| {
        let cold = Table::open(counted.clone(), "t".into());
        let counted = counted.clone();
        async move {
            counted.reset();
            let read = cold.changes(from, to).await.unwrap();
            (reported(&read.batches), counted.tally())
        }
    };
    let (captured, captured_tally) = read(&with_counted, from, to).await;
    let (plain, plain_tally) = read(&without_counted, from, to).await;
    assert_eq!(captured, plain);
    let kinds: HashSet<&str> = captured.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        kinds,
        HashSet::from(["update_preimage", "update_postimage", "delete"])
    );
    // The row updated twice shows its values at `from`, not after the first update.
    let twice = (captured.iter()).find(|c| c.0 == "update_preimage" && c.3 == 3);
    assert_eq!(twice.map(|c| c.4), Some(3));
    assert!(
        captured_tally.bytes_read < plain_tally.bytes_read,
        "with change data {captured_tally:?}, without {plain_tally:?}"
    );
    // Every sub-range answers alike too.
    for a in from..to {
        for b in a + 1..=to {
            let with_read = with.changes(a, b).await.unwrap();
            let without_read = without.changes(a, b).await.unwrap();
            assert_eq!(
                reported(&with_read.batches),
                reported(&without_read.batches),
                "{a}..{b}"
            );
        }
    }
}

/// A range holding a version that changed rows without capturing them (before the feed was
/// started) reads old values at their places; one after it reads captures; both answer as a
/// table without change data does. Starting the feed twice publishes once.
#[tokio::test]
async fn ranges_before_the_feed_started_read_the_rows_old_places() {
    let (with, _) = counted_table(false).await;
    let (without, _) = counted_table(false).await;
    for table in [&with, &without] {
        let rows: Vec<(i64, i64)> = (0..3_000).map(|k| (k, 0)).collect();
        table.append(vec![batch(&rows)]).await.unwrap(); // v2
        table
            .update_where(key_matches(|k| k % 10 == 1), &add_to_val(5))
            .await
            .unwrap(); // v3
    }
    let started = with.set_change_data_feed(true).await.unwrap();
    assert!(started.published);
    assert!(!with.set_change_data_feed(true).await.unwrap().published);
    without.checkpoint().await.unwrap(); // v4 on both: no row changes
    for table in [&with, &without] {
        table
            .update_where(key_matches(|k| k % 10 == 1), &add_to_val(5))
            .await
            .unwrap(); // v5
        table
            .delete_where(key_matches(|k| k % 7 == 0))
            .await
            .unwrap(); // v6
    }
    let latest = with.latest().await.unwrap();
    assert!(latest.manifest().change_data_feed);
    assert!(latest.manifest().change_data.is_some());
    for (a, b) in [(2, 6), (3, 6), (4, 6), (5, 6), (2, 3)] {
        assert_eq!(
            reported(&with.changes(a, b).await.unwrap().batches),
            reported(&without.changes(a, b).await.unwrap().batches),
            "{a}..{b}"
        );
    }
    // Stopped: later deletes capture nothing, and still read right.
    assert!(with.set_change_data_feed(false).await.unwrap().published);
    without.checkpoint().await.unwrap();
    for table in [&with, &without] {
        table
            .delete_where(key_matches(|k| k % 11 == 0))
            .await
            .unwrap(); // v8
    }
    let latest = with.latest().await.unwrap();
    assert!(!latest.manifest().change_data_feed);
    assert!(latest.manifest().change_data.is_none());
    assert_eq!(
        reported(&with.changes(4, 8).await.unwrap().batches),
        reported(&without.changes(4, 8).await.unwrap().batches)
    );
}

/// The data files under the table's root.
async fn data_files(store: &Arc<dyn ObjectStore>) -> HashSet<String> {
    let prefix = object_store::path::Path::from("t/data");
    let listed: Vec<_> = store.list(Some(&prefix)).try_collect().await.unwrap();
    listed.into_iter().map(|m| m.location.to_string()).collect()
}

/// The captured files versions list.
fn captured_files(manifests: &[natal::internals::format::Manifest]) -> HashSet<String> {
    (manifests.iter())
        .flat_map(|m| m.change_data.iter().flatten())
        .flat_map(|f| &f.files)
        .map(|file| format!("t/{}", file.path))
        .collect()
}

/// A table `t` recording change data, in memory, of fragments of 100 rows never merged,
/// holding keys `0..rows` (val 0).
async fn recording_table(rows: i64) -> (Table, Arc<dyn ObjectStore>) {
    let (table, store) = memory_table_with(TableOptions {
        max_rows_per_fragment: 100,
        merge: None,
        change_data_feed: true,
        ..Default::default()
    })
    .await;
    let rows: Vec<(i64, i64)> = (0..rows).map(|k| (k, 0)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    (table, store)
}

/// Cleanup removes the captures of the versions it removes and keeps those of the versions
/// it keeps; a commit that fails (a conflict) leaves no capture behind.
#[tokio::test]
async fn captures_live_and_go_with_their_versions() {
    let (table, store) = recording_table(500).await;
    for r in 0..4 {
        table
            .update_where(key_matches(move |k| k % 4 == r), &add_to_val(1))
            .await
            .unwrap();
    }
    let all = table.versions().await.unwrap();
    let every_capture = captured_files(&all);
    // Each update's 125 rows, in captures of at most 100.
    assert_eq!(every_capture.len(), 8);
    assert!(every_capture.is_subset(&data_files(&store).await));
    // Two handles planned on one version update the same row: the second conflicts, and
    // what it wrote (its rows and its capture) is gone.
    let before = data_files(&store).await;
    let (a, b) = (
        table.planned_at(table.latest().await.unwrap()),
        table.planned_at(table.latest().await.unwrap()),
    );
    a.update_where(key_matches(|k| k == 7), &add_to_val(1))
        .await
        .unwrap();
    let e = b
        .update_where(key_matches(|k| k == 7), &add_to_val(1))
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");
    let after = data_files(&store).await;
    assert_eq!(
        after.difference(&before).count(),
        2,
        "a's fragment and capture"
    );
    let policy = CleanupPolicy {
        keep_versions: 2,
        keep_newer_than: std::time::Duration::ZERO,
        min_file_age: std::time::Duration::ZERO,
    };
    table.cleanup(policy).await.unwrap();
    let kept = table.versions().await.unwrap();
    let kept_captures = captured_files(&kept);
    let files = data_files(&store).await;
    assert!(kept_captures.is_subset(&files));
    for gone in every_capture.difference(&kept_captures) {
        assert!(!files.contains(gone), "{gone} outlived its version");
    }
    let (first, last) = (kept[0].version, kept[1].version);
    let read = table.changes(first, last).await.unwrap();
    assert_eq!((read.updated, read.deleted), (1, 0));
}

/// SQL: `OPTIONS ('change_data_feed' 'true')` creates a table recording change data,
/// `ALTER TABLE … SET TBLPROPERTIES (change_data_feed = …)` starts or stops it; bad values
/// and unknown properties are refused and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_data_is_started_and_stopped_in_sql() {
    let (dir, ctx) = catalog_session();
    let sql = |q: String| {
        let ctx = ctx.clone();
        async move { natal::datafusion::sql(&ctx, &q).await?.collect().await }
    };
    let location = dir.path().join("f");
    let location = location.to_str().unwrap().to_string();
    let create = |name: &str, options: &str| {
        format!(
            "CREATE EXTERNAL TABLE {name} (k BIGINT, v VARCHAR) STORED AS NATAL LOCATION \
             '{location}' OPTIONS ({options})"
        )
    };
    let e = sql(create("f", "'change_data_feed' 'perhaps'"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("'true' or 'false'"), "{e}");
    assert!(
        !std::path::Path::new(&location).exists(),
        "a table was left"
    );
    sql(create("f", "'change_data_feed' 'true'")).await.unwrap();
    let table = Table::open(crate::fixtures::local_store(dir.path()), "f".into());
    assert!(table.latest().await.unwrap().manifest().change_data_feed);
    sql("INSERT INTO f VALUES (1, 'a'), (2, 'b'), (3, 'c')".into())
        .await
        .unwrap();
    sql("UPDATE f SET v = 'B' WHERE k = 2".into())
        .await
        .unwrap();
    sql("DELETE FROM f WHERE k = 3".into()).await.unwrap();
    let latest = table.latest().await.unwrap();
    assert!(latest.manifest().change_data.is_some());
    let shown =
        "SELECT version, operation, change_data_feed, change_data_rows FROM \"f$versions\" \
                 WHERE version > 1 ORDER BY version";
    let expected = [
        "+---------+-----------+------------------+------------------+",
        "| version | operation | change_data_feed | change_data_rows |",
        "+---------+-----------+------------------+------------------+",
        "| 2       | append    | true             |                  |",
        "| 3       | update    | true             | 1                |",
        "| 4       | delete    | true             | 1                |",
        "+---------+-----------+------------------+------------------+",
    ];
    assert_eq!(answer(&ctx, shown).await.unwrap(), expected.join("\n"));
    let changes = "SELECT k, v, _change_type FROM natal_changes('f', 2) ORDER BY k, _change_type";
    let expected = [
        "+---+---+------------------+",
        "| k | v | _change_type     |",
        "+---+---+------------------+",
        "| 2 | B | update_postimage |",
        "| 2 | b | update_preimage  |",
        "| 3 | c | delete           |",
        "+---+---+------------------+",
    ];
    assert_eq!(answer(&ctx, changes).await.unwrap(), expected.join("\n"));
    let version = latest.version();
    for (bad, says) in [
        (
            "ALTER TABLE f SET TBLPROPERTIES (change_data_feed = 'sometimes')",
            "true or false",
        ),
        (
            "ALTER TABLE f SET TBLPROPERTIES (colour = 'blue')",
            "no table property 'colour'",
        ),
    ] {
        let e = sql(bad.into()).await.unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    assert_eq!(table.latest().await.unwrap().version(), version);
    sql("ALTER TABLE f SET TBLPROPERTIES (change_data_feed = false)".into())
        .await
        .unwrap();
    let stopped = table.latest().await.unwrap();
    assert_eq!(stopped.version(), version + 1);
    assert!(!stopped.manifest().change_data_feed);
    // Asked again for what it is: nothing published.
    sql("ALTER TABLE f SET TBLPROPERTIES (change_data_feed = false)".into())
        .await
        .unwrap();
    assert_eq!(table.latest().await.unwrap().version(), version + 1);
    sql("DELETE FROM f WHERE k = 1".into()).await.unwrap();
    assert!(table
        .latest()
        .await
        .unwrap()
        .manifest()
        .change_data
        .is_none());
    // Re-declaring the table with another setting is refused; with its own, it opens.
    let e = sql(create("f2", "'change_data_feed' 'true'"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("SET TBLPROPERTIES"), "{e}");
    sql(create("f3", "'change_data_feed' 'false'"))
        .await
        .unwrap();
}

/// An update rebased over a schema change publishes without its capture (it holds the rows
/// as the old schema read them), leaves no file of it behind, and change reads over it
/// read the rows' old places.
#[tokio::test]
async fn an_update_rebased_over_a_schema_change_drops_its_capture() {
    let (table, store) = recording_table(300).await;
    let from = table.latest().await.unwrap().version();
    let planned = table.planned_at(table.latest().await.unwrap());
    let add = natal::SchemaChange::AddColumn {
        name: "note".into(),
        data_type: arrow::datatypes::DataType::Utf8,
    };
    table.alter(vec![add]).await.unwrap();
    planned
        .update_where(key_matches(|k| k % 10 == 3), &add_to_val(1))
        .await
        .unwrap();
    let latest = table.latest().await.unwrap();
    assert_eq!(
        latest.manifest().transaction.operation,
        natal::Operation::Update
    );
    assert!(latest.manifest().change_data.is_none());
    let referenced: HashSet<String> = (latest.manifest().fragments.iter())
        .flat_map(|f| &f.files)
        .map(|file| format!("t/{}", file.path))
        .collect();
    assert_eq!(
        data_files(&store).await,
        referenced,
        "no capture left behind"
    );
    let read = table.changes(from, latest.version()).await.unwrap();
    assert_eq!((read.updated, read.deleted), (30, 0));
    let preimages = crate::changes::report(&read.batches);
    assert!(preimages
        .iter()
        .filter(|c| c.0 == "update_preimage")
        .all(|c| c.4 == 0));
}

/// On a table recording change data, an `UPDATE` written as row patches captures the values
/// it replaces: change reads report the patched rows as updates, their old values from the
/// capture.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_captures_the_values_it_replaces() {
    let (dir, ctx) = catalog_session();
    let location = dir.path().join("p");
    let location = location.to_str().unwrap().to_string();
    let create = |name: &str, share: &str| {
        format!(
            "CREATE EXTERNAL TABLE {name} (k BIGINT, v VARCHAR, doc VARCHAR) STORED AS NATAL \
             LOCATION '{location}' OPTIONS ('change_data_feed' 'true', 'patch_max_share' '{share}')"
        )
    };
    // A share that is not one creates nothing.
    let error = answer(&ctx, &create("p", "2")).await.unwrap_err();
    assert!(error.to_string().contains("patch_max_share"), "{error}");
    assert!(
        !std::path::Path::new(&location).exists(),
        "a table was left"
    );
    answer(&ctx, &create("p", "0.5")).await.unwrap();
    let insert = "INSERT INTO p SELECT value, concat('v', CAST(value AS VARCHAR)), \
                  repeat('d', 200) FROM generate_series(1, 3)";
    answer(&ctx, insert).await.unwrap();
    // Opened again with another share: refused (ALTER TABLE changes it).
    let error = answer(&ctx, &create("again", "0.1")).await.unwrap_err();
    assert!(
        error.to_string().contains("another patch_max_share"),
        "{error}"
    );
    let update = "UPDATE p SET v = 'B' WHERE k = 2";
    let plan = answer(&ctx, &format!("EXPLAIN {update}")).await.unwrap();
    assert!(plan.contains("as row patches"), "{plan}");
    answer(&ctx, update).await.unwrap();
    let table = Table::open(crate::fixtures::local_store(dir.path()), "p".into());
    let latest = table.latest().await.unwrap();
    assert!(crate::common::patched_fragments(&latest) > 0);
    let captured = latest.manifest().change_data.as_ref().expect("a capture");
    assert_eq!(captured.iter().map(|f| f.physical_rows).sum::<u32>(), 1);
    let changes = "SELECT k, v, _change_type FROM natal_changes('p', 2) ORDER BY k, _change_type";
    let expected = [
        "+---+----+------------------+",
        "| k | v  | _change_type     |",
        "+---+----+------------------+",
        "| 2 | B  | update_postimage |",
        "| 2 | v2 | update_preimage  |",
        "+---+----+------------------+",
    ];
    assert_eq!(answer(&ctx, changes).await.unwrap(), expected.join("\n"));
}
