//! Filters pushed into a scan as the query runs: a hash join's build keys and a top-k's bound
//! reach `NatalScanExec`, which drops the rows they reject (and the pages their bounds rule
//! out) before the join or the sort sees them. The answers must be those of the same query
//! with dynamic filters off, rows deleted, moved and filtered by the scan's own filter.

use arrow::array::RecordBatch;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;

use crate::common::{catalog_session, metric, physical_plan, run, sorted_rows};

/// Rows in `big`, written by five inserts in key order (fragments of sorted keys).
const ROWS: i64 = 100_000;

/// `big (k, v)` with `v = k % 100`, and `small (k)` holding `keys`.
async fn tables(keys: &str) -> (tempfile::TempDir, SessionContext) {
    let (dir, ctx) = catalog_session();
    run(&ctx, "CREATE TABLE big (k BIGINT NOT NULL, v BIGINT)").await;
    for part in 0..5 {
        let (from, to) = (part * ROWS / 5, (part + 1) * ROWS / 5 - 1);
        let insert =
            format!("INSERT INTO big SELECT value, value % 100 FROM generate_series({from}, {to})");
        run(&ctx, &insert).await;
    }
    run(&ctx, "CREATE TABLE small (k BIGINT NOT NULL)").await;
    run(&ctx, &format!("INSERT INTO small {keys}")).await;
    (dir, ctx)
}

/// `sql`'s rows (sorted) with dynamic filters on, the plan that answered, and its rows with
/// them off.
async fn both_ways(
    ctx: &SessionContext,
    sql: &str,
) -> (
    Vec<String>,
    std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    String,
    Vec<String>,
) {
    let (plan, shown) = physical_plan(ctx, sql).await;
    let with: Vec<RecordBatch> = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    run(
        ctx,
        "SET datafusion.optimizer.enable_dynamic_filter_pushdown = false",
    )
    .await;
    let (plain, plain_shown) = physical_plan(ctx, sql).await;
    assert!(!plain_shown.contains("pushed="), "{plain_shown}");
    let without = collect(plain, ctx.task_ctx()).await.unwrap();
    run(
        ctx,
        "SET datafusion.optimizer.enable_dynamic_filter_pushdown = true",
    )
    .await;
    (sorted_rows(&with), plan, shown, sorted_rows(&without))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_drops_the_probe_rows_its_build_keys_rule_out_in_the_scan() {
    let keys = "SELECT value * 3 + 50000 FROM generate_series(0, 19)";
    let (_dir, ctx) = tables(keys).await;
    let sql = "SELECT b.k, b.v FROM small s JOIN big b ON s.k = b.k";
    let (with, plan, shown, without) = both_ways(&ctx, sql).await;
    assert!(shown.contains("pushed=DynamicFilter"), "{shown}");
    let expected: Vec<String> = {
        let mut rows: Vec<String> = (0..20)
            .map(|i| 50000 + 3 * i)
            .map(|k| format!("| {k} | {:<2} |", k % 100))
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(with, expected);
    assert_eq!(without, expected);
    // The probe rows never left the scan: their pages were skipped by the keys' bounds, or
    // the keys rejected them as they decoded.
    let pruned = metric(&plan, "NatalScanExec", "rows_page_pruned");
    let filtered = metric(&plan, "NatalScanExec", "rows_filtered");
    assert_eq!(pruned + filtered, ROWS as usize - 20);
    assert!(pruned > ROWS as usize / 2, "{pruned} rows pruned by page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_keys_meet_deleted_moved_and_filtered_rows() {
    let keys = "SELECT value * 7 FROM generate_series(0, 2000)";
    let (_dir, ctx) = tables(keys).await;
    run(&ctx, "DELETE FROM big WHERE k % 49 = 0").await;
    run(&ctx, "UPDATE big SET v = v + 1000 WHERE k % 91 = 0").await;
    let sql = r#"SELECT b.k, b.v, b._rowid FROM small s JOIN "big$rows" b ON s.k = b.k WHERE b.v < 1050 AND b.v % 2 = 1"#;
    let (with, _, shown, without) = both_ways(&ctx, sql).await;
    assert!(shown.contains("pushed=DynamicFilter"), "{shown}");
    assert!(shown.contains("filter="), "{shown}");
    assert!(!with.is_empty());
    assert_eq!(with, without);
    let keys: Vec<i64> = (0..=2000).map(|i| i * 7).filter(|k| k % 49 != 0).collect();
    let expected = keys
        .iter()
        .map(|k| if k % 91 == 0 { k % 100 + 1000 } else { k % 100 })
        .filter(|v| v % 2 == 1 && *v < 1050)
        .count();
    assert_eq!(with.len(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_whose_keys_keep_every_row_answers_the_same() {
    let keys = format!("SELECT value FROM generate_series(0, {})", ROWS - 1);
    let (_dir, ctx) = tables(&keys).await;
    let sql = "SELECT b.v, count(*) FROM small s JOIN big b ON s.k = b.k GROUP BY b.v";
    let (with, _, _, without) = both_ways(&ctx, sql).await;
    assert_eq!(with.len(), 100);
    assert_eq!(with, without);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_k_bound_reaches_the_scan_and_the_top_rows_stay() {
    let (_dir, ctx) = tables("VALUES (1)").await;
    run(&ctx, "DELETE FROM big WHERE k >= 99990").await;
    let sql = "SELECT k, v FROM big ORDER BY k DESC LIMIT 5";
    let (with, _, shown, without) = both_ways(&ctx, sql).await;
    assert!(shown.contains("pushed=DynamicFilter"), "{shown}");
    let expected: Vec<String> = (99985..99990)
        .map(|k| format!("| {k} | {} |", k % 100))
        .collect();
    assert_eq!(with, expected);
    assert_eq!(without, expected);
}
