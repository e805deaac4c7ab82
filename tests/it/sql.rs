//! natal through DataFusion where a figure, not a printed plan, is the thing to check (the
//! sqllogictest suite covers statements and plans).

use std::sync::Arc;

use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;

use crate::common::{catalog_session, metric, physical_plan, run};

/// Table `t (k, v)` of keys `0..rows` (`v = 10 k`), keys below 100 deleted.
async fn keys_with_the_first_100_deleted(rows: u64) -> (tempfile::TempDir, SessionContext) {
    let (dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT)").await;
    let insert = format!(
        "INSERT INTO t SELECT value, value * 10 FROM generate_series(0, {})",
        rows - 1
    );
    run(&ctx, &insert).await;
    run(&ctx, "DELETE FROM t WHERE k < 100").await;
    (dir, ctx)
}

/// A scan stopped before its end (a LIMIT above it, a client that stops reading) still
/// reports what it read: EXPLAIN ANALYZE showed `bytes_read=0` for such scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_dropped_early_still_reports_its_metrics() {
    let (_dir, ctx) = keys_with_the_first_100_deleted(200_000).await;
    let (plan, _) = physical_plan(&ctx, "SELECT k, v FROM t").await;
    fn find_scan(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
        if plan.name() == "NatalScanExec" {
            return Some(plan.clone());
        }
        plan.children().into_iter().find_map(find_scan)
    }
    let scan = find_scan(&plan).expect("a natal scan");
    let mut stream = scan.execute(0, ctx.task_ctx()).unwrap();
    let first = futures::StreamExt::next(&mut stream)
        .await
        .unwrap()
        .unwrap();
    assert!(first.num_rows() > 0);
    drop(stream); // long before the partition's last batch
    assert!(metric(&scan, "NatalScanExec", "bytes_read") > 0);
    assert_eq!(metric(&scan, "NatalScanExec", "rows_masked"), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_metrics_count_masked_rows_and_bytes_read() {
    let (_dir, ctx) = keys_with_the_first_100_deleted(1_000).await;
    let (plan, _) = physical_plan(
        &ctx,
        r#"SELECT k FROM "t$rows" WHERE _rowid BETWEEN 0 AND 499"#,
    )
    .await;
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 400, "ids 100..=499 are live");
    // 1,000 physical rows: 100 deleted and 500 outside the range are never read.
    assert_eq!(metric(&plan, "NatalScanExec", "rows_masked"), 600);
    assert!(metric(&plan, "NatalScanExec", "bytes_read") > 0);

    let (plan, _) = physical_plan(&ctx, "SELECT k, v FROM t").await;
    collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    assert_eq!(
        metric(&plan, "NatalScanExec", "rows_masked"),
        100,
        "the deleted rows"
    );
}

/// One progress report: operation, rows done, rows in all, and whether it was `finish`.
type Report = (&'static str, u64, Option<u64>, bool);

/// Records every progress report.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<Report>>);

impl natal::Progress for Recorder {
    fn update(&self, operation: &'static str, done: u64, total: Option<u64>) {
        self.0.lock().unwrap().push((operation, done, total, false));
    }
    fn finish(&self, operation: &'static str) {
        self.0.lock().unwrap().push((operation, 0, None, true));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_and_compactions_report_progress() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let config = datafusion::prelude::SessionConfig::new()
        .with_extension(Arc::new(natal::datafusion::NatalProgress(recorder.clone())));
    let ctx = SessionContext::new_with_config(config);
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    run(&ctx, "CREATE TABLE t (k BIGINT NOT NULL)").await;
    for _ in 0..3 {
        run(
            &ctx,
            "INSERT INTO t SELECT value FROM generate_series(1, 5000)",
        )
        .await;
    }
    let loads: Vec<_> = recorder.0.lock().unwrap().drain(..).collect();
    let last_load = loads.iter().rev().find(|e| e.0 == "loading" && !e.3);
    assert_eq!(last_load.map(|e| e.1), Some(5000), "{loads:?}");
    assert_eq!(
        loads.iter().filter(|e| e.3 && e.0 == "loading").count(),
        3,
        "each load finishes"
    );

    run(&ctx, "SELECT * FROM natal_compact('t')").await;
    let events: Vec<_> = recorder.0.lock().unwrap().drain(..).collect();
    let updates: Vec<_> = events.iter().filter(|e| !e.3).collect();
    assert!(updates
        .iter()
        .all(|e| e.0 == "compacting" && e.2 == Some(15_000)));
    assert_eq!(updates.first().map(|e| e.1), Some(0));
    assert_eq!(updates.last().map(|e| e.1), Some(15_000));
    assert!(events.last().is_some_and(|e| e.3), "compaction finishes");
}

/// The `i64` values of the first column of `sql`'s result, sorted.
async fn column_values(ctx: &SessionContext, sql: &str) -> Vec<i64> {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut values: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            datafusion::arrow::compute::cast(
                b.column(0),
                &datafusion::arrow::datatypes::DataType::Int64,
            )
            .unwrap()
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .unwrap()
            .values()
            .to_vec()
        })
        .collect();
    values.sort_unstable();
    values
}

/// Column filters run inside the scan: no `FilterExec`, rejected rows counted, deleted and
/// moved rows honoured, and neither `count(*)` nor `LIMIT` mistakes a filtered scan for a
/// whole one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_filters_are_evaluated_while_reading() {
    let (_dir, ctx) = catalog_session();
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT, s VARCHAR)",
    )
    .await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, value % 10, 'row' || value FROM generate_series(0, 1999)",
    )
    .await;
    run(&ctx, "DELETE FROM t WHERE k < 100").await;
    run(&ctx, "UPDATE t SET v = 3 WHERE k = 500").await;

    let (plan, shown) = physical_plan(&ctx, "SELECT k, s FROM t WHERE v = 3").await;
    assert!(!shown.contains("FilterExec"), "{shown}");
    assert!(shown.contains("filter=v@0 = 3"), "{shown}");
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    // k in 100..2000 with k % 10 == 3, and the moved row 500.
    assert_eq!(rows, 191);
    assert_eq!(metric(&plan, "NatalScanExec", "rows_filtered"), 1900 - 191);

    let expected: Vec<i64> = (100..2000).filter(|k| k % 10 == 3 || *k == 500).collect();
    assert_eq!(
        column_values(&ctx, "SELECT k FROM t WHERE v = 3").await,
        expected
    );
    assert_eq!(
        column_values(&ctx, "SELECT count(*) FROM t WHERE v = 3").await,
        vec![191]
    );
    assert_eq!(
        column_values(
            &ctx,
            "SELECT count(*) FROM t WHERE v = 3 AND s LIKE 'row5%'"
        )
        .await,
        vec![11] // 503, 513, …, 593, and 500
    );
    // A filter on the row id that is neither a set nor a range.
    assert_eq!(
        column_values(&ctx, r#"SELECT k FROM "t$rows" WHERE _rowid % 1000 = 7"#).await,
        vec![1007]
    );
    assert_eq!(
        column_values(&ctx, r#"SELECT k FROM "t$rows" WHERE _rowaddr % 1000 = 8"#).await,
        vec![1008]
    );
    let limited = column_values(&ctx, "SELECT v FROM t WHERE v = 3 LIMIT 5").await;
    assert_eq!(limited, vec![3; 5]);
    // A volatile filter stays with DataFusion, evaluated once per row.
    let (plan, shown) = physical_plan(&ctx, "SELECT k FROM t WHERE random() < 2.0").await;
    assert!(shown.contains("FilterExec"), "{shown}");
    assert_eq!(
        collect(plan, ctx.task_ctx())
            .await
            .unwrap()
            .iter()
            .map(|b| b.num_rows())
            .sum::<usize>(),
        1900
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_ruled_out_by_their_min_max_are_not_read() {
    let (_dir, ctx) = catalog_session();
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, f DOUBLE, s VARCHAR)",
    )
    .await;
    // One fragment of 20,000 rows in key order: pages of PAGE_ROWS rows, each a narrow key range.
    let page = natal::internals::io::PAGE_ROWS;
    assert!(5000 / page == 5010 / page, "the keys asked share a page");
    run(
        &ctx,
        "INSERT INTO t SELECT value, CASE WHEN value = 5003 THEN 'NaN'::double ELSE value END, \
         'row' || value FROM generate_series(0, 19999)",
    )
    .await;
    // Pruning that would leave most of a whole fragment to read is not worth a page-by-page
    // read (a fragment with deletions is read by row list anyway, and is pruned).
    let (plan, _) = physical_plan(&ctx, "SELECT count(*) FROM t WHERE k >= 1000").await;
    assert_eq!(
        collect(plan.clone(), ctx.task_ctx()).await.unwrap()[0].num_rows(),
        1
    );
    assert_eq!(metric(&plan, "NatalScanExec", "rows_page_pruned"), 0);
    assert_eq!(
        column_values(&ctx, "SELECT count(*) FROM t WHERE k >= 1000").await,
        vec![19_000]
    );
    run(&ctx, "DELETE FROM t WHERE k = 5001").await;
    run(&ctx, "UPDATE t SET s = 'moved' WHERE k = 5002").await;

    let query = "SELECT k FROM t WHERE k BETWEEN 5000 AND 5010";
    let (plan, _) = physical_plan(&ctx, query).await;
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 10);
    // One page of the first fragment holds the keys; every other page is ruled out (the
    // moved row's fragment has one page, which holds it).
    assert_eq!(
        metric(&plan, "NatalScanExec", "rows_page_pruned"),
        20_000 - page
    );
    assert_eq!(metric(&plan, "NatalScanExec", "rows_filtered"), page - 11);
    let expected: Vec<i64> = (5000..=5010).filter(|k| *k != 5001).collect();
    assert_eq!(column_values(&ctx, query).await, expected);

    // Page min/max skip NaN (greater than every number here): the page holding one stays.
    assert_eq!(
        column_values(&ctx, "SELECT k FROM t WHERE f > 19990").await,
        [5003].into_iter().chain(19991..20000).collect::<Vec<i64>>()
    );
    assert_eq!(
        column_values(&ctx, "SELECT k FROM t WHERE f = 'NaN'::double").await,
        vec![5003]
    );
    // Strings by prefix, and a filter no page can satisfy.
    assert_eq!(
        column_values(&ctx, "SELECT k FROM t WHERE s LIKE 'row1999%'").await,
        vec![1999, 19990, 19991, 19992, 19993, 19994, 19995, 19996, 19997, 19998, 19999]
    );
    let (plan, _) = physical_plan(&ctx, "SELECT k FROM t WHERE k > 1000000").await;
    assert!(collect(plan.clone(), ctx.task_ctx())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(metric(&plan, "NatalScanExec", "rows_filtered"), 0);
}

/// A table of one large fragment still scans on every partition: the fragment is split into
/// row ranges, each row read exactly once, deleted and moved rows honoured in every piece,
/// and `count(*)` still answered from the manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_large_fragment_is_shared_out_by_row_ranges() {
    let (_dir, ctx) = catalog_session();
    ctx.sql("SET datafusion.execution.target_partitions = 2")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    // 300k rows are a few MiB, below the size from which a scan is split by default.
    run(
        &ctx,
        "SET datafusion.optimizer.repartition_file_min_size = 0",
    )
    .await;
    run(&ctx, "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT)").await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, value % 7 FROM generate_series(0, 299999)",
    )
    .await;
    run(&ctx, "DELETE FROM t WHERE k % 1000 = 5").await;
    run(&ctx, "UPDATE t SET v = v + 100 WHERE k % 1000 = 6").await;

    let (plan, shown) = physical_plan(&ctx, "SELECT k FROM t WHERE v >= 0").await;
    assert!(
        shown.contains("partitions=2, fragments=2"),
        "the big fragment is split, the update's is whole: {shown}"
    );
    let partitions = plan.properties().output_partitioning().partition_count();
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(
        rows,
        300_000 - 300,
        "every live row once ({partitions} partitions)"
    );
    let keys = column_values(&ctx, "SELECT k FROM t").await;
    let expected: Vec<i64> = (0..300_000).filter(|k| k % 1000 != 5).collect();
    assert_eq!(keys, expected);
    let moved = column_values(&ctx, "SELECT k FROM t WHERE v >= 100").await;
    assert_eq!(
        moved,
        (0..300_000).filter(|k| k % 1000 == 6).collect::<Vec<_>>()
    );
    let ids = column_values(&ctx, r#"SELECT _rowid FROM "t$rows""#).await;
    assert_eq!(ids.len(), 300_000 - 300);
    assert_eq!(
        ids.iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        ids.len(),
        "no id twice"
    );
    assert_eq!(
        column_values(&ctx, "SELECT count(*) FROM t").await,
        vec![300_000 - 300]
    );
    // A limit pushed into the scan is exact, however the batches fall.
    for limit in [1, 1500, 70_000, 299_000] {
        let sql = format!("SELECT count(*) FROM (SELECT k FROM t WHERE v >= 0 LIMIT {limit})");
        assert_eq!(column_values(&ctx, &sql).await, vec![limit], "{sql}");
        let sql = format!("SELECT k FROM t LIMIT {limit}");
        assert_eq!(
            column_values(&ctx, &sql).await.len(),
            limit as usize,
            "{sql}"
        );
    }
}

/// A SQL DELETE or UPDATE finds its rows as a SELECT would: `_rowid` filters as a mask (only
/// the named rows are read), column filters inside the scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dml_names_rows_by_mask_and_filter() {
    let (_dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT)").await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, value * 10 FROM generate_series(0, 999)",
    )
    .await;
    let (_, shown) = physical_plan(&ctx, r#"DELETE FROM "t$rows" WHERE _rowid IN (3, 4, 5)"#).await;
    assert!(
        shown.contains("NatalDeleteExec: row_ids=exact mask of 3 ids"),
        "{shown}"
    );
    run(&ctx, r#"DELETE FROM "t$rows" WHERE _rowid IN (3, 4, 5)"#).await;
    run(
        &ctx,
        r#"UPDATE "t$rows" SET v = -1 WHERE _rowid = 7 AND k = 7"#,
    )
    .await;
    run(&ctx, "UPDATE t SET v = v + 1 WHERE k > 990").await;
    let values = column_values(&ctx, "SELECT v FROM t WHERE k IN (2, 3, 7, 995)").await;
    assert_eq!(values, vec![-1, 20, 9951]);
    assert_eq!(
        column_values(&ctx, "SELECT count(*) FROM t").await,
        vec![997]
    );
}

/// The scan node of `plan` (the first found, depth first).
fn scan_node(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    if plan.name() == "NatalScanExec" {
        return Some(plan.clone());
    }
    plan.children().into_iter().find_map(scan_node)
}

/// The planner learns each column's range, nulls and size from the manifest (so it sizes
/// joins as it does over Parquet), exact only where they are the answer: DataFusion answers
/// `min`/`max`/`count` from exact figures without reading a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_report_column_statistics_exact_only_when_they_are_the_answer() {
    use datafusion::common::stats::Precision;
    use datafusion::common::ScalarValue;

    let (_dir, ctx) = catalog_session();
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT, s VARCHAR)",
    )
    .await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, CASE WHEN value % 10 = 0 THEN NULL ELSE value * 2 END, \
         'name ' || value FROM generate_series(1, 1000)",
    )
    .await;
    let statistics = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let (plan, _) = physical_plan(&ctx, sql).await;
            let scan = scan_node(&plan).expect("a natal scan");
            datafusion::physical_plan::statistics::StatisticsContext::new()
                .compute(
                    scan.as_ref(),
                    &datafusion::physical_plan::statistics::StatisticsArgs::new(),
                )
                .unwrap()
        }
    };

    let fresh = statistics("SELECT k, v, s FROM t").await;
    assert_eq!(fresh.num_rows, Precision::Exact(1000));
    let k = &fresh.column_statistics[0];
    assert_eq!(k.min_value, Precision::Exact(ScalarValue::Int64(Some(1))));
    assert_eq!(
        k.max_value,
        Precision::Exact(ScalarValue::Int64(Some(1000)))
    );
    assert_eq!(k.null_count, Precision::Exact(0));
    assert_eq!(k.byte_size, Precision::Exact(8000));
    let v = &fresh.column_statistics[1];
    assert_eq!(v.null_count, Precision::Exact(100));
    assert_eq!(
        v.max_value,
        Precision::Exact(ScalarValue::Int64(Some(1998)))
    );
    let s = &fresh.column_statistics[2];
    assert!(
        matches!(s.byte_size, Precision::Inexact(n) if n > 0),
        "{s:?}"
    );
    assert!(
        matches!(fresh.total_byte_size, Precision::Inexact(n) if n > 16_000),
        "{fresh:?}"
    );

    // A filter keeps the bounds as bounds and the counts as estimates.
    let filtered = statistics("SELECT k FROM t WHERE v > 100").await;
    assert!(matches!(filtered.num_rows, Precision::Inexact(n) if n < 1000));
    assert_eq!(
        filtered.column_statistics[0].max_value,
        Precision::Inexact(ScalarValue::Int64(Some(1000)))
    );

    // The deleted maximum may still be the file's: a bound, and the query reads the rows.
    run(&ctx, "DELETE FROM t WHERE k = 1000").await;
    let after = statistics("SELECT k FROM t").await;
    assert_eq!(after.num_rows, Precision::Exact(999));
    assert_eq!(
        after.column_statistics[0].max_value,
        Precision::Inexact(ScalarValue::Int64(Some(1000)))
    );
    assert_eq!(column_values(&ctx, "SELECT max(k) FROM t").await, vec![999]);
    assert_eq!(column_values(&ctx, "SELECT min(k) FROM t").await, vec![1]);
    assert_eq!(
        column_values(&ctx, "SELECT count(*) FROM t").await,
        vec![999]
    );

    // An update moves rows into a file of their own: every file's statistics count.
    run(&ctx, "UPDATE t SET k = k + 5000 WHERE k = 7").await;
    assert_eq!(
        column_values(&ctx, "SELECT max(k) FROM t").await,
        vec![5007]
    );
    run(&ctx, "SELECT * FROM natal_compact('t')").await;
    let compacted = statistics("SELECT k FROM t").await;
    assert_eq!(
        compacted.column_statistics[0].max_value,
        Precision::Exact(ScalarValue::Int64(Some(5007)))
    );
    assert_eq!(
        column_values(&ctx, "SELECT max(k) FROM t").await,
        vec![5007]
    );
}

/// The scan shows itself in every format DataFusion prints plans in: its line, its pieces
/// when verbose, `key=value` lines in the tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scan_shows_itself_in_every_explain_format() {
    let (_dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE t (k BIGINT NOT NULL, v BIGINT)").await;
    run(&ctx, "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)").await;
    let explain = |sql: String| {
        let ctx = ctx.clone();
        async move {
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            arrow::util::pretty::pretty_format_batches(&batches)
                .unwrap()
                .to_string()
        }
    };
    let query = "SELECT k FROM t WHERE v > 10";
    let default = explain(format!("EXPLAIN {query}")).await;
    assert!(
        default.contains("NatalScanExec: version=2, partitions=1, fragments=1 (pruned 0), filter="),
        "{default}"
    );
    let verbose = explain(format!("EXPLAIN VERBOSE {query}")).await;
    assert!(verbose.contains("pieces=[[0]]"), "{verbose}");
    let tree = explain(format!("EXPLAIN FORMAT TREE {query}")).await;
    assert!(tree.contains("NatalScanExec"), "{tree}");
    assert!(tree.contains("version: 2"), "{tree}");
    assert!(tree.contains("fragments: 1"), "{tree}");

    let limited = explain("EXPLAIN SELECT k FROM t LIMIT 2".into()).await;
    assert!(limited.contains("limit=2"), "{limited}");
    assert_eq!(
        column_values(&ctx, "SELECT k FROM t LIMIT 2").await.len(),
        2
    );
}

/// Every long operation reports its progress to the session's reporter (what the CLI draws):
/// CTAS, UPDATE, DELETE, compaction and cleanup, each ending with a finish; UPDATE and DELETE count the
/// rows examined of all the table's rows.
#[tokio::test(flavor = "multi_thread")]
async fn long_operations_report_their_progress() {
    let recorded = Arc::new(Recorder::default());
    let config = datafusion::prelude::SessionConfig::new()
        .with_extension(Arc::new(natal::datafusion::NatalProgress(recorded.clone())));
    let ctx = SessionContext::new_with_config(config);
    let dir = tempfile::tempdir().unwrap();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    run(
        &ctx,
        "CREATE TABLE p AS SELECT value AS k FROM generate_series(1, 5000)",
    )
    .await;
    run(&ctx, "UPDATE p SET k = k + 1 WHERE k % 2 = 0").await;
    run(&ctx, "DELETE FROM p WHERE k % 3 = 0").await;
    run(&ctx, "SELECT * FROM natal_compact('p')").await; // leaves files to clean up
    run(&ctx, "SELECT * FROM natal_cleanup('p', 1, 0, 0)").await;
    let events = recorded.0.lock().unwrap().clone();
    for operation in [
        "creating",
        "updating",
        "deleting",
        "compacting",
        "cleaning up",
    ] {
        let of: Vec<_> = events.iter().filter(|e| e.0 == operation).collect();
        assert!(
            of.last().is_some_and(|e| e.3),
            "{operation} finished: {of:?}"
        );
        let most = of.iter().filter(|e| !e.3).map(|e| e.1).max();
        assert!(
            most.is_some_and(|done| done > 0),
            "{operation} counted: {of:?}"
        );
    }
    for operation in ["updating", "deleting"] {
        let last = events.iter().rfind(|e| e.0 == operation && !e.3).unwrap();
        assert_eq!(
            Some(last.1),
            last.2,
            "{operation} examined every row: {last:?}"
        );
    }
}

/// `count(*)`, `min` and `max` are answered from the manifest where its figures are exact:
/// the plan holds no scan, so no data file is read. Where they are only bounds (a long
/// string's truncated maximum, a file with deletions) the rows are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_counts_and_bounds_answer_without_reading_data() {
    let (_dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE t (k BIGINT NOT NULL, s VARCHAR)").await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, 'name ' || value FROM generate_series(1, 1000)",
    )
    .await;
    let scans = |sql: &'static str| {
        let ctx = ctx.clone();
        async move { physical_plan(&ctx, sql).await.1.contains("NatalScanExec") }
    };
    let answer_of = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            let row: Vec<String> = (batches[0].columns().iter())
                .map(|c| arrow::util::display::array_value_to_string(c, 0).unwrap())
                .collect();
            row
        }
    };
    let aggregates = "SELECT count(*), min(k), max(k), max(s) FROM t";
    assert!(!scans(aggregates).await, "answered from statistics");
    assert_eq!(
        answer_of(aggregates).await,
        ["1000", "1", "1000", "name 999"]
    );

    // A maximum longer than a bound keeps is truncated in the manifest: read, not trusted.
    let long = "z".repeat(200);
    run(&ctx, &format!("INSERT INTO t VALUES (2000, '{long}')")).await;
    assert!(scans("SELECT max(s) FROM t").await);
    assert_eq!(answer_of("SELECT max(s) FROM t").await, [long]);
    assert!(!scans("SELECT count(*), max(k) FROM t").await);

    // A deleted maximum may still be the file's bound: the count stays exact, the bound not.
    run(&ctx, "DELETE FROM t WHERE k = 2000").await;
    assert!(!scans("SELECT count(*) FROM t").await);
    assert!(scans("SELECT max(k) FROM t").await);
    assert_eq!(
        answer_of("SELECT count(*), max(k) FROM t").await,
        ["1000", "1000"]
    );
}
