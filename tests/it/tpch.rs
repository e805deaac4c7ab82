//! TPC-H at scale factor 0.01 (the `tpch` bench's CI-sized variant): every one of the 22
//! queries gives natal's tables the same answer as DataFusion's Parquet files of the same
//! generated rows, fresh and after churn that keeps the logical content (updates to the same
//! values, deletes and re-inserts, compaction). Answers only; the bench times them.

#[path = "../../benches/tpch/mod.rs"]
pub(crate) mod harness;

use harness::Dirs;

/// The CI-sized scale factor.
const SF: f64 = 0.01;

async fn assert_same_answers(dirs: &Dirs, when: &str) {
    for q in 1..=22 {
        let natal = harness::run(&harness::natal_session(dirs).expect("session"), q, SF)
            .await
            .unwrap_or_else(|e| panic!("q{q} on natal ({when}): {e}"));
        let parquet = harness::run(
            &harness::parquet_session(dirs).await.expect("session"),
            q,
            SF,
        )
        .await
        .unwrap_or_else(|e| panic!("q{q} on Parquet ({when}): {e}"));
        let (natal, parquet) = (
            harness::canonical(&natal).expect("format"),
            harness::canonical(&parquet).expect("format"),
        );
        assert_eq!(natal, parquet, "q{q} ({when})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_22_queries_answer_as_on_parquet_fresh_and_after_churn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dirs = Dirs::under(dir.path());
    harness::load(&dirs, SF).await.expect("load");
    assert_same_answers(&dirs, "fresh").await;
    harness::churn(&dirs).await.expect("churn");
    assert_same_answers(&dirs, "after churn").await;
    // The churn changed natal's tables (new versions), not what they hold.
    let ctx = harness::natal_session(&dirs).expect("session");
    let versions = ctx
        .sql("SELECT count(*) FROM \"lineitem$versions\"")
        .await
        .expect("plan")
        .collect()
        .await
        .expect("run");
    let count =
        arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(versions[0].column(0))
            .value(0);
    assert!(count >= 6, "lineitem has {count} versions");
}
