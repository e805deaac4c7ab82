//! Late materialization: a filtered scan of wide rows reads the filter's columns first and
//! the others only for the rows that pass. The answers (rows, ids, values of columns added
//! later, limits) must be those of a one-step read; the metrics and bytes read show the
//! other columns were skipped.

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type};
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;

use crate::common::{answer, catalog_session, metric, physical_plan, run};

/// Rows in the wide table: about 100 pages of its `doc` column.
const ROWS: i64 = 100_000;

/// `t (k, f, doc)`: `f` is a permutation of `0..ROWS` scattered over the keys (so `f < n`
/// keeps `n` rows spread over the table), `doc` 320 bytes from its key's hash (no two
/// neighbours share a prefix: Parquet stores it at its width).
async fn wide_table() -> (tempfile::TempDir, SessionContext) {
    let (dir, ctx) = catalog_session();
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, f BIGINT, doc VARCHAR)",
    )
    .await;
    run(
        &ctx,
        &format!(
            "INSERT INTO t SELECT value, (value * 7919) % {ROWS}, \
             {DOC} FROM generate_series(0, {})",
            ROWS - 1
        ),
    )
    .await;
    (dir, ctx)
}

/// `doc` of the row whose key is `value`.
const DOC: &str = "repeat(md5(CAST(value AS VARCHAR)), 10)";

/// The key the scattered column gives `f` (the inverse of `k * 7919 mod ROWS`).
fn keys_with_f_below(n: i64) -> Vec<i64> {
    let mut keys: Vec<i64> = (0..ROWS).filter(|k| (k * 7919) % ROWS < n).collect();
    keys.sort_unstable();
    keys
}

/// A string column as `Utf8`, whichever string type the table reads it as.
fn utf8(column: &arrow::array::ArrayRef) -> arrow::array::ArrayRef {
    arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8).unwrap()
}

/// `(k, doc, _rowid)` of `batches`, by key.
fn by_key(batches: &[RecordBatch]) -> BTreeMap<i64, (Option<String>, u64)> {
    let mut rows = BTreeMap::new();
    for batch in batches {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let docs = utf8(batch.column(1));
        let docs = docs.as_string::<i32>();
        let ids = batch.column(2).as_primitive::<UInt64Type>();
        for row in 0..batch.num_rows() {
            let doc = (!docs.is_null(row)).then(|| docs.value(row).to_string());
            rows.insert(keys.value(row), (doc, ids.value(row)));
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_filter_reads_wide_columns_only_for_passing_rows() {
    let (_dir, ctx) = wide_table().await;
    // Deleted and moved rows: the first step must see only live rows, at their addresses.
    run(&ctx, "DELETE FROM t WHERE k = 7 OR k % 1000 = 3").await;
    run(&ctx, "UPDATE t SET doc = 'moved ' || k WHERE k % 5000 = 11").await;
    let ids: BTreeMap<i64, u64> = {
        let all = ctx.sql(r#"SELECT k, _rowid FROM "t$rows""#).await.unwrap();
        let batches = all.collect().await.unwrap();
        let mut ids = BTreeMap::new();
        for b in &batches {
            let (k, id) = (b.column(0).as_primitive::<Int64Type>(), b.column(1));
            for (k, id) in k
                .values()
                .iter()
                .zip(id.as_primitive::<UInt64Type>().values())
            {
                ids.insert(*k, *id);
            }
        }
        ids
    };
    let all_docs = format!("SELECT value, {DOC} FROM generate_series(0, {})", ROWS - 1);
    let docs = ctx.sql(&all_docs);
    let docs: BTreeMap<i64, String> = (docs.await.unwrap().collect().await.unwrap().iter())
        .flat_map(|b| {
            let keys = b.column(0).as_primitive::<Int64Type>().values().to_vec();
            let docs = utf8(b.column(1));
            let docs: Vec<String> = (0..keys.len())
                .map(|r| docs.as_string::<i32>().value(r).to_string())
                .collect();
            keys.into_iter().zip(docs)
        })
        .collect();
    let doc_of = |k: i64| match k % 5000 == 11 {
        true => format!("moved {k}"),
        false => docs[&k].clone(),
    };
    let query = r#"SELECT k, doc, _rowid FROM "t$rows" WHERE f < 40"#;
    let (plan, _) = physical_plan(&ctx, query).await;
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let expected: BTreeMap<i64, (Option<String>, u64)> = keys_with_f_below(40)
        .into_iter()
        .filter(|k| *k != 7 && k % 1000 != 3)
        .map(|k| (k, (Some(doc_of(k)), ids[&k])))
        .collect();
    assert!(expected.len() > 30);
    assert_eq!(by_key(&batches), expected);
    let skipped = metric(&plan, "NatalScanExec", "rows_late_skipped");
    let filtered = metric(&plan, "NatalScanExec", "rows_filtered");
    assert!(skipped > 20_000, "{skipped} rows skipped the wide column");
    assert_eq!(
        skipped, filtered,
        "every rejected row was rejected before `doc` was read"
    );
    assert!(metric(&plan, "NatalScanExec", "bytes_late_skipped") as f64 > skipped as f64 * 200.0);
    assert!(
        metric(&plan, "NatalScanExec", "rows_page_pruned") + skipped > 99_000,
        "every row is pruned by its page or rejected before `doc` is read"
    );

    // The same columns for every row: the wide column's pages are all read. Most of each
    // fragment's rows are live, and rows this wide are read by selection, not as a run
    // with the deleted ones dropped after: the same rows and ids either way.
    let every_row = r#"SELECT k, doc, _rowid FROM "t$rows" WHERE f >= 0"#;
    let (all, _) = physical_plan(&ctx, every_row).await;
    let every_live_row: BTreeMap<i64, (Option<String>, u64)> = (ids.iter())
        .map(|(k, id)| (*k, (Some(doc_of(*k)), *id)))
        .collect();
    let batches = collect(all.clone(), ctx.task_ctx()).await.unwrap();
    assert_eq!(by_key(&batches), every_live_row);
    let (few, every) = (
        metric(&plan, "NatalScanExec", "bytes_read"),
        metric(&all, "NatalScanExec", "bytes_read"),
    );
    // The 40 rows lie on at most 40 of the ~100 pages of `doc` (on about a third: where the
    // pages break depends on how the insert's partitions interleaved), so the two-step read
    // reads at most ~40% of its bytes; the one-step read would read them all.
    assert!(
        few * 2 < every,
        "{few} bytes read for 40 rows, {every} for all of them"
    );

    // The session can turn two steps off: the same answer, read in one.
    run(&ctx, "SET natal.late_materialization = false").await;
    let (plan, _) = physical_plan(&ctx, query).await;
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    assert_eq!(by_key(&batches), expected);
    assert_eq!(metric(&plan, "NatalScanExec", "rows_late_skipped"), 0);
    assert_eq!(metric(&plan, "NatalScanExec", "rows_filtered"), filtered);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_and_columns_added_later_read_as_in_one_step() {
    let (_dir, ctx) = wide_table().await;
    answer(&ctx, "ALTER TABLE t ADD COLUMN note VARCHAR")
        .await
        .unwrap();
    run(
        &ctx,
        &format!(
            "INSERT INTO t SELECT value, value - {ROWS}, 'late ' || value, 'noted' \
             FROM generate_series({ROWS}, {})",
            ROWS + 20_000 - 1
        ),
    )
    .await;
    // The filter passes rows of both fragments; `note` is null in the first.
    let query = "SELECT k, note FROM t WHERE f < 10 OR f BETWEEN 100 AND 104";
    let batches = ctx.sql(query).await.unwrap().collect().await.unwrap();
    let mut got: Vec<(i64, Option<String>)> = batches
        .iter()
        .flat_map(|b| {
            let notes = utf8(b.column(1));
            let notes = notes.as_string::<i32>();
            let keys = b.column(0).as_primitive::<Int64Type>();
            (0..b.num_rows())
                .map(|r| {
                    (
                        keys.value(r),
                        (!notes.is_null(r)).then(|| notes.value(r).into()),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    got.sort();
    let first = keys_with_f_below(10)
        .into_iter()
        .chain((0..ROWS).filter(|k| (100..105).contains(&((k * 7919) % ROWS))))
        .map(|k| (k, None));
    let second = (0..10)
        .chain(100..105)
        .map(|f| (ROWS + f, Some("noted".to_string())));
    let mut expected: Vec<(i64, Option<String>)> = first.chain(second).collect();
    expected.sort();
    assert_eq!(got, expected);

    // A filter on the added column: the first fragment's nulls never pass.
    let notes = ctx.sql("SELECT count(*) FROM t WHERE note = 'noted' AND f < 5000");
    let notes = notes.await.unwrap().collect().await.unwrap();
    assert_eq!(
        notes[0].column(0).as_primitive::<Int64Type>().value(0),
        5000
    );

    // A limit: as many rows as asked, each passing.
    let limited = "SELECT k, f, doc FROM t WHERE f < 50000 LIMIT 7";
    let (plan, _) = physical_plan(&ctx, limited).await;
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let rows: Vec<(i64, i64)> = batches
        .iter()
        .flat_map(|b| {
            let k = b.column(0).as_primitive::<Int64Type>().values().to_vec();
            let f = b.column(1).as_primitive::<Int64Type>().values().to_vec();
            k.into_iter().zip(f)
        })
        .collect();
    assert_eq!(rows.len(), 7);
    let f_of = |k: i64| {
        if k < ROWS {
            (k * 7919) % ROWS
        } else {
            k - ROWS
        }
    };
    assert!(
        rows.iter().all(|(k, f)| *f < 50000 && f_of(*k) == *f),
        "{rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrow_rows_and_takes_read_in_one_step() {
    let (_dir, ctx) = wide_table().await;
    // The output is no wider than the filter: nothing to spare.
    let (plan, _) = physical_plan(&ctx, "SELECT k FROM t WHERE f < 40").await;
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 40);
    assert_eq!(metric(&plan, "NatalScanExec", "rows_late_skipped"), 0);
    let pruned = metric(&plan, "NatalScanExec", "rows_page_pruned");
    assert!(metric(&plan, "NatalScanExec", "rows_filtered") + pruned > 99_000);
    // A take of a few ids with a filter: the rows are few already.
    let ids = ctx.sql(r#"SELECT _rowid FROM "t$rows" WHERE k BETWEEN 1 AND 4"#);
    let ids = ids.await.unwrap().collect().await.unwrap();
    let ids: Vec<String> = (ids.iter())
        .flat_map(|b| b.column(0).as_primitive::<UInt64Type>().values().to_vec())
        .map(|id| id.to_string())
        .collect();
    assert_eq!(ids.len(), 4);
    let take = format!(
        r#"SELECT k, doc FROM "t$rows" WHERE _rowid IN ({}) AND f > 0"#,
        ids.join(", ")
    );
    let (plan, _) = physical_plan(&ctx, &take).await;
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 4);
    assert_eq!(metric(&plan, "NatalScanExec", "rows_late_skipped"), 0);
}

/// A selective filter's rows come in batches of about the session's batch size, as
/// DataFusion's own filter yields them, not as one small batch per batch read: each batch
/// costs every operator above it a poll, and a thread's wake where partitions merge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_filter_yields_batches_of_the_batch_size() {
    let (_dir, ctx) = wide_table().await;
    let sql = "SELECT k, f FROM t WHERE f % 40 = 3";
    let (plan, text) = physical_plan(&ctx, sql).await;
    assert!(text.contains("filter="), "the scan filters: {text}");
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    // 2,500 rows of 100,000, read in 13 batches of 8,192: two partitions, a batch each.
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, (ROWS / 40) as usize);
    let partitions = plan.properties().output_partitioning().partition_count();
    assert!(
        batches.len() <= partitions.max(2),
        "{} batches",
        batches.len()
    );
    let keys: Vec<i64> = (batches.iter())
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let want: Vec<i64> = (0..ROWS).filter(|k| (k * 7919) % ROWS % 40 == 3).collect();
    assert_eq!(sorted, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_passing_most_rows_reads_every_fragment_in_two_steps() {
    let (_dir, ctx) = catalog_session();
    run(&ctx, "SET datafusion.execution.target_partitions = 1").await;
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, f BIGINT, doc VARCHAR)",
    )
    .await;
    // Four fragments of 25,000 rows, each with `f` spread over 0..ROWS.
    for part in 0..4 {
        let (from, to) = (part * 25_000, part * 25_000 + 24_999);
        run(
            &ctx,
            &format!(
                "INSERT INTO t SELECT value, (value * 7919) % {ROWS}, {DOC} \
                 FROM generate_series({from}, {to})"
            ),
        )
        .await;
    }
    // Two steps skip the wide column's rejected values at every share passing: over four
    // fragments read in turn, a filter passing 60% (or 90%) has each of its rejected rows
    // skipped as a 1% filter does.
    for below in [60_000, 90_000, 1_000] {
        let query = format!("SELECT k, doc FROM t WHERE f < {below}");
        let (plan, _) = physical_plan(&ctx, &query).await;
        let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
        let mut keys: Vec<i64> = (batches.iter())
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, keys_with_f_below(below), "f < {below}");
        let skipped = metric(&plan, "NatalScanExec", "rows_late_skipped");
        let filtered = metric(&plan, "NatalScanExec", "rows_filtered");
        assert_eq!(filtered as i64, ROWS - below, "f < {below}");
        assert_eq!(skipped, filtered, "f < {below}");
    }
}
