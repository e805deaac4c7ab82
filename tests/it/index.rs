//! Index segments: equality filters answered through an index read only the rows it finds
//! in the fragments it covers, stay right across updates, deletes, appends and compaction;
//! segment numbers follow seed 002 (per name, never reused, recomputed on rebase); bad
//! input and damaged segment files get typed errors.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type};
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use natal::{CleanupPolicy, Table};
use object_store::path::Path;
use object_store::ObjectStoreExt;

use crate::common::*;

/// The sorted `k`s a query returns, and how many rows its natal scans left unread.
async fn keys_and_masked(ctx: &SessionContext, sql: &str) -> (Vec<i64>, usize) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .create_physical_plan()
        .await
        .unwrap();
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    (
        sorted_keys(&batches),
        metric(&plan, "NatalScanExec", "rows_masked"),
    )
}

/// The first column's values (`k` / `key`), sorted.
fn sorted_keys(batches: &[RecordBatch]) -> Vec<i64> {
    let mut keys: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    keys.sort_unstable();
    keys
}

/// A scan of every column narrowed by `lookup` on index `val_idx`.
fn probe_request(lookup: natal::IndexLookup) -> natal::ScanRequest {
    natal::ScanRequest {
        index: Some(Arc::new(natal::IndexProbe::new("val_idx", lookup))),
        ..Default::default()
    }
}

async fn figures(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    batches.into_iter().next().unwrap()
}

/// The index answer equals the same filter without the index (`v + 0` hides the column).
async fn same_as_unindexed(ctx: &SessionContext, value: i64) -> Vec<i64> {
    let (indexed, _) = keys_and_masked(ctx, &format!("SELECT k FROM t WHERE v = {value}")).await;
    let (plain, _) = keys_and_masked(ctx, &format!("SELECT k FROM t WHERE v + 0 = {value}")).await;
    assert_eq!(indexed, plain, "v = {value}");
    indexed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equality_through_an_index_reads_only_what_it_finds() {
    let (_dir, ctx) = catalog_session();
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT, s VARCHAR)",
    )
    .await;
    // Three fragments of 1,000 rows; v takes 100 values.
    for part in 0..3 {
        run(
            &ctx,
            &format!(
                "INSERT INTO t SELECT value, value % 100, 'row ' || value \
                 FROM generate_series({}, {})",
                part * 1000,
                part * 1000 + 999
            ),
        )
        .await;
    }
    let created = figures(&ctx, "SELECT * FROM natal_create_index('t', 'v')").await;
    let column = |name: &str| {
        created
            .column_by_name(name)
            .unwrap()
            .as_primitive::<UInt64Type>()
            .value(0)
    };
    assert_eq!(column("segment_seq"), 1);
    assert_eq!(column("fragments_indexed"), 3);
    assert_eq!(column("rows_indexed"), 3000);

    let (keys, masked) = keys_and_masked(&ctx, "SELECT k FROM t WHERE v = 7").await;
    assert_eq!(keys.len(), 30);
    assert!(keys.iter().all(|k| k % 100 == 7));
    assert_eq!(masked, 3000 - 30, "only the index's rows are read");
    let (keys, masked) = keys_and_masked(&ctx, "SELECT k FROM t WHERE v IN (7, 8, 1000)").await;
    assert_eq!((keys.len(), masked), (60, 3000 - 60));
    let (keys, _) = keys_and_masked(&ctx, "SELECT k FROM t WHERE v = 7 AND k < 1000").await;
    assert_eq!(keys, vec![7, 107, 207, 307, 407, 507, 607, 707, 807, 907]);
    // Ranges on the indexed column, alone or narrowing each other.
    for (filter, values) in [
        ("v BETWEEN 10 AND 12", 3),
        ("v > 97", 2),
        ("v >= 98 AND v < 99", 1),
        ("v < 2 AND v > 0 AND v <= 5", 1),
        ("50 <= v AND v < 50", 0),
    ] {
        let sql = format!("SELECT k FROM t WHERE {filter}");
        let (keys, masked) = keys_and_masked(&ctx, &sql).await;
        assert_eq!(keys.len(), 30 * values, "{filter}");
        assert_eq!(
            masked,
            3000 - 30 * values,
            "{filter}: only the index's rows are read"
        );
    }

    // An update writes the row anew (an uncovered fragment, read in full); a delete hides it.
    run(&ctx, "UPDATE t SET v = 7 WHERE k = 5").await;
    run(&ctx, "DELETE FROM t WHERE k = 107").await;
    let keys = same_as_unindexed(&ctx, 7).await;
    assert!(keys.contains(&5) && !keys.contains(&107));
    assert!(!same_as_unindexed(&ctx, 5).await.contains(&5));

    // Compaction moves rows, not values: coverage follows them. It does not merge the
    // covered fragments with the uncovered update fragment (that would lose coverage).
    run(&ctx, "SELECT * FROM natal_compact('t')").await;
    let (_, masked) = keys_and_masked(&ctx, "SELECT k FROM t WHERE v = 9").await;
    let live = 3000 - 1;
    assert_eq!(same_as_unindexed(&ctx, 9).await.len(), 30);
    let compacted = live - 1;
    assert_eq!(
        masked,
        compacted - 30,
        "the compacted fragment is covered; the 1-row update fragment is read in full"
    );

    // New rows are found before they are indexed, and indexed by the next segment.
    run(&ctx, "INSERT INTO t VALUES (5000, 7, 'new')").await;
    assert!(same_as_unindexed(&ctx, 7).await.contains(&5000));
    let created = figures(&ctx, "SELECT * FROM natal_create_index('t', 'v')").await;
    assert_eq!(
        created
            .column_by_name("segment_seq")
            .unwrap()
            .as_primitive::<UInt64Type>()
            .value(0),
        2
    );
    let (keys, masked) = keys_and_masked(&ctx, "SELECT k FROM t WHERE v = 7").await;
    assert_eq!(keys, same_as_unindexed(&ctx, 7).await);
    assert_eq!(masked, live + 1 - keys.len(), "everything is covered again");
    // Nothing left to cover: no new version, no segment.
    let again = figures(&ctx, "SELECT * FROM natal_create_index('t', 'v')").await;
    assert!(again.column_by_name("version").unwrap().is_null(0));

    // `EXPLAIN` shows the index, and planning changed nothing.
    let explain = figures(&ctx, "EXPLAIN SELECT k FROM t WHERE v = 7").await;
    let text = format!("{:?}", explain.column(1));
    assert!(text.contains("index=v_idx (1 values)"), "{text}");
    // Segment 1 covers the compacted fragment, segment 2 the update's and the insert's.
    let segments = figures(
        &ctx,
        r#"SELECT segment_seq, max_segment_seq, fragments FROM "t$indexes" ORDER BY 1"#,
    )
    .await;
    let rows: Vec<Vec<u64>> = (0..segments.num_rows())
        .map(|r| {
            (0..3)
                .map(|c| segments.column(c).as_primitive::<UInt64Type>().value(r))
                .collect()
        })
        .collect();
    assert_eq!(rows, vec![vec![1, 2, 1], vec![2, 2, 2]]);
}

#[tokio::test]
async fn segment_numbers_are_per_name_never_reused_and_recomputed_on_rebase() {
    let (table, _) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 10), (2, 20)])])
        .await
        .unwrap();
    let v_one_fragment = table.latest().await.unwrap();
    table.append(vec![batch(&[(3, 30)])]).await.unwrap();
    let v_two_fragments = table.latest().await.unwrap();
    // Two writers index concurrently; the second read a version without the first's segment.
    let old = table.planned_at(v_one_fragment);
    let new = table.planned_at(v_two_fragments);
    let first = old.create_index("val_idx", "val").await.unwrap();
    assert_eq!(
        (first.figures.segment_seq, first.figures.fragments_indexed),
        (Some(1), 1)
    );
    let second = new.create_index("val_idx", "val").await.unwrap();
    // Rebased: numbered after the first, covering only what the first did not.
    assert_eq!(
        (second.figures.segment_seq, second.figures.fragments_indexed),
        (Some(2), 1)
    );
    // A third writer that read the same version has nothing left to cover: a conflict.
    let late = table.planned_at(table.at_version(3).await.unwrap());
    let err = late.create_index("val_idx", "val").await.unwrap_err();
    assert!(err.is_conflict(), "{err}");

    let other = table.create_index("key_idx", "key").await.unwrap();
    assert_eq!(other.figures.segment_seq, Some(1), "numbers are per name");
    table.drop_index("val_idx").await.unwrap();
    let dropped = table.latest().await.unwrap();
    assert!(dropped.manifest().indexes.field_of("val_idx").is_none());
    let again = table.create_index("val_idx", "val").await.unwrap();
    assert_eq!(
        again.figures.segment_seq,
        Some(3),
        "a dropped index's numbers stay taken"
    );
    let flags = table.latest().await.unwrap().manifest().writer_flags();
    assert_ne!(
        flags & natal::internals::format::flags::INDEX_SEGMENT_SEQ,
        0
    );
    // One name, one column.
    let err = table.create_index("val_idx", "key").await.unwrap_err();
    assert!(err.to_string().contains("another column"), "{err}");
}

#[tokio::test]
async fn cleanup_keeps_live_segments_and_removes_dropped_ones() {
    let (table, store) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 10), (2, 20)])])
        .await
        .unwrap();
    table.create_index("a", "val").await.unwrap();
    table.create_index("b", "key").await.unwrap();
    let paths = |name: &str, snapshot: &natal::Snapshot| -> Vec<String> {
        snapshot
            .manifest()
            .indexes
            .segments_named(name)
            .map(|s| s.path.to_string())
            .collect()
    };
    let before = table.latest().await.unwrap();
    let (a, b) = (paths("a", &before), paths("b", &before));
    table.drop_index("a").await.unwrap();
    let policy = CleanupPolicy {
        keep_versions: 1,
        keep_newer_than: std::time::Duration::ZERO,
        min_file_age: std::time::Duration::ZERO,
    };
    table.cleanup(policy).await.unwrap();
    let exists = |path: &str| {
        let store = store.clone();
        let path = Path::from(format!("t/{path}"));
        async move { store.head(&path).await.is_ok() }
    };
    assert!(!exists(&a[0]).await, "the dropped index's file is removed");
    assert!(exists(&b[0]).await, "the live index's file is kept");
    let found = table.latest().await.unwrap();
    assert_eq!(found.manifest().indexes.field_of("b"), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_index_requests_and_damaged_segments_are_clear_errors() {
    let (dir, ctx) = catalog_session();
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT, f DOUBLE)",
    )
    .await;
    run(&ctx, "INSERT INTO t VALUES (1, 10, 0.5), (2, 20, 1.5)").await;
    for (sql, expected) in [
        (
            "SELECT * FROM natal_create_index('t', 'nope')",
            "no column nope",
        ),
        (
            "SELECT * FROM natal_create_index('t', 'f')",
            "cannot be indexed",
        ),
        (
            "SELECT * FROM natal_create_index('t', 'v', '')",
            "index name is empty",
        ),
        (
            "SELECT * FROM natal_create_index('t', 3)",
            "must be a string literal",
        ),
        ("SELECT * FROM natal_create_index('nope', 'v')", "nope"),
        (
            "SELECT * FROM natal_drop_index('t', 'v_idx')",
            "no index named v_idx",
        ),
    ] {
        let result = match ctx.sql(sql).await {
            Ok(frame) => frame.collect().await.map(|_| ()),
            Err(e) => Err(e),
        };
        let err = result.expect_err(sql).to_string();
        assert!(err.contains(expected), "{sql}: {err}");
    }
    run(&ctx, "SELECT * FROM natal_create_index('t', 'v')").await;
    let table = Table::open(
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap()),
        Path::from("t"),
    );
    let snapshot = table.latest().await.unwrap();
    let segment = snapshot.manifest().indexes.segments[0].clone();
    let file = dir.path().join("t").join(segment.path.as_str());
    let bytes = std::fs::read(&file).unwrap();
    // Garbage of the same length: the footer no longer parses.
    std::fs::write(&file, vec![7u8; bytes.len()]).unwrap();
    let err = ctx
        .sql("SELECT k FROM t WHERE v = 10")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(segment.path.as_str()), "{err}");
    // The rows are still there for a read that does not use the index.
    let rows = ctx
        .sql("SELECT k FROM t WHERE v + 0 = 10")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(rows.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
}

/// A large build is split into segments of bounded rows (each sorted in memory on its own),
/// committed together and numbered in order; probes union them.
#[tokio::test]
async fn large_builds_split_into_bounded_segments() {
    let (table, _) = memory_table(2).await;
    let rows: Vec<(i64, i64)> = (0..7).map(|k| (k, k % 3)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let options = natal::IndexOptions {
        max_rows_per_segment: 3,
        ..Default::default()
    };
    let report = table
        .create_index_with("val_idx", "val", options)
        .await
        .unwrap();
    // Fragments of 2, 2, 2 and 1 rows: segments of 2, 2 and 2 + 1 rows.
    assert_eq!(
        (
            report.figures.segments_added,
            report.figures.segment_seq,
            report.figures.rows_indexed
        ),
        (3, Some(3), 7)
    );
    let snapshot = table.latest().await.unwrap();
    let seqs: Vec<Option<u64>> = snapshot
        .manifest()
        .indexes
        .segments
        .iter()
        .map(|s| s.segment_seq)
        .collect();
    assert_eq!(seqs, vec![Some(1), Some(2), Some(3)]);
    let values = Arc::new(arrow::array::Int64Array::from(vec![1])) as _;
    let request = probe_request(natal::IndexLookup::Values(values));
    let batches: Vec<RecordBatch> =
        futures::TryStreamExt::try_collect(snapshot.scan(request).await.unwrap())
            .await
            .unwrap();
    let keys = sorted_keys(&batches);
    // Every fragment is covered: only the rows the segments hold for 1 are read.
    assert_eq!(keys, vec![1, 4]);
    // A range must be bounded somewhere: an open one is an error, not every row.
    let open = probe_request(natal::IndexLookup::Range {
        low: None,
        high: None,
    });
    let err = match snapshot.scan(open).await {
        Ok(_) => panic!("an open range was accepted"),
        Err(e) => e,
    };
    assert!(err.to_string().contains("at least one bound"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segment_placement_follows_the_sequence_from_the_anchor() {
    let (dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE t (k BIGINT, v BIGINT)").await;
    for i in 0..3 {
        run(&ctx, &format!("INSERT INTO t VALUES ({i}, {i})")).await;
        run(&ctx, "SELECT * FROM natal_create_index('t', 'v')").await;
    }
    let placed = figures(
        &ctx,
        "SELECT segment_seq, node FROM natal_segment_placement('t', 'v_idx', 4) \
         ORDER BY segment_seq",
    )
    .await;
    let column = |c: usize| {
        placed
            .column(c)
            .as_primitive::<UInt64Type>()
            .values()
            .to_vec()
    };
    let (seqs, nodes) = (column(0), column(1));
    assert_eq!(seqs, [1, 2, 3]);
    // Seats follow the sequence from the anchor (seed 002), as natal's own function says.
    let store =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let table = Table::open(store, "t".into());
    let uuid = table.latest().await.unwrap().manifest().table_uuid.clone();
    for (seq, node) in seqs.iter().zip(&nodes) {
        let seat = natal::internals::format::cache_node(&uuid, "v_idx", *seq, 4);
        assert_eq!(seat, Some(*node as usize));
    }
    assert_eq!(nodes[1], (nodes[0] + 1) % 4);
    assert_eq!(nodes[2], (nodes[0] + 2) % 4);
    crate::schema::fails_with(
        &ctx,
        &[
            (
                "SELECT * FROM natal_segment_placement('t', 'nope', 4)",
                "no index named 'nope'",
            ),
            (
                "SELECT * FROM natal_segment_placement('t', 'v_idx', 0)",
                "must be at least 1",
            ),
            (
                "SELECT * FROM natal_segment_placement('t', 'v_idx')",
                "must be at least 1",
            ),
        ],
    )
    .await;
}
