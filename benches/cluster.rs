//! natal on a Ballista cluster vs a local session (issue #39's figures): the same queries on
//! a local `SessionContext` and on an in-process Ballista cluster (`cluster/mod.rs`: one
//! scheduler, executors on runtimes of their own) of one executor running 2 tasks at once
//! and of two executors running 1 each — on a 2-core machine both clusters have the cores
//! the local session has, so the figures are each query's overhead on a cluster, not a
//! speed-up. Every answer on a cluster is compared with the local one (the bench fails on a
//! difference), then each is timed: the median of `NATAL_CLUSTER_RUNS` (default 3) runs.
//!
//! Queries: a filtered scan and an aggregate over `NATAL_CLUSTER_ROWS` (default 10M) rows,
//! and TPC-H's 22 at `NATAL_TPCH_SF` (default 1; 0 skips them).
//!
//! ```text
//! cargo bench --features ballista --bench cluster
//! ```

#[path = "cluster/mod.rs"]
mod harness;
#[path = "tpch/mod.rs"]
mod tpch;

use std::time::Instant;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use tpch::{env_f64, median};

/// The rows of `sql` on `ctx`, canonical, and the median time (ms) of `runs` runs.
async fn timed(ctx: &SessionContext, sql: &str, runs: usize) -> Result<(Vec<String>, f64)> {
    let mut times = Vec::with_capacity(runs);
    let mut answer = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let batches = ctx.sql(sql).await?.collect().await?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        answer = tpch::canonical(&batches)?;
    }
    Ok((answer, median(times)))
}

struct Sessions {
    local: SessionContext,
    one: SessionContext,
    two: SessionContext,
}

/// Times `sql` on each session, checks the clusters' answers, prints a row.
async fn compare(sessions: &Sessions, name: &str, sql: &str, runs: usize) -> Result<[f64; 3]> {
    let (expected, local) = timed(&sessions.local, sql, runs).await?;
    let (one_answer, one) = timed(&sessions.one, sql, runs).await?;
    let (two_answer, two) = timed(&sessions.two, sql, runs).await?;
    assert_eq!(one_answer, expected, "{name}: one executor's answer");
    assert_eq!(two_answer, expected, "{name}: two executors' answer");
    println!(
        "| {name} | {local:.1} | {one:.1} | {two:.1} | {:.2}x | {:.2}x |",
        one / local,
        two / local
    );
    Ok([local, one, two])
}

#[tokio::main]
async fn main() -> Result<()> {
    let rows = env_f64("NATAL_CLUSTER_ROWS", 10_000_000.0) as u64;
    let runs = env_f64("NATAL_CLUSTER_RUNS", 3.0) as usize;
    let sf = env_f64("NATAL_TPCH_SF", 1.0);
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("natal");
    let root_text = root.to_string_lossy().into_owned();
    std::fs::create_dir_all(&root)?;

    let load = SessionContext::new();
    natal::datafusion::register(&load, &root_text)?;
    let started = Instant::now();
    for sql in [
        "CREATE TABLE t (k BIGINT, v BIGINT, s VARCHAR)".to_string(),
        format!(
            "INSERT INTO t SELECT value, value % 1000, 'row ' || value \
             FROM generate_series(0, {})",
            rows - 1
        ),
    ] {
        load.sql(&sql).await?.collect().await?;
    }
    println!(
        "loaded {rows} rows in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let dirs = tpch::Dirs::under(dir.path());
    if sf > 0.0 {
        let started = Instant::now();
        tpch::load(&dirs, sf).await?;
        println!(
            "loaded TPC-H SF{sf} in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }

    let one_cluster = harness::Cluster::start(1, 2);
    let two_cluster = harness::Cluster::start(2, 1);
    let local = SessionContext::new();
    natal::datafusion::register(&local, &root_text)?;
    let sessions = Sessions {
        local,
        one: one_cluster.client(&root_text).await,
        two: two_cluster.client(&root_text).await,
    };
    println!("\nmedian ms of {runs} runs; ratio = cluster / local");
    println!("| query | local | 1 executor × 2 tasks | 2 executors × 1 task | 1 exec | 2 execs |");
    println!("|---|---:|---:|---:|---:|---:|");
    compare(
        &sessions,
        "filtered scan (v = 7, 10k rows out)",
        "SELECT k, s FROM t WHERE v = 7",
        runs,
    )
    .await?;
    compare(
        &sessions,
        "aggregate (1,000 groups)",
        "SELECT v, count(*), sum(k), max(s) FROM t GROUP BY v",
        runs,
    )
    .await?;
    if sf > 0.0 {
        let tpch_sessions = Sessions {
            local: tpch::natal_session(&dirs)?,
            one: one_cluster.client(&dirs.natal.to_string_lossy()).await,
            two: two_cluster.client(&dirs.natal.to_string_lossy()).await,
        };
        let mut totals = [0.0; 3];
        for q in 1..=22 {
            let times = compare(
                &tpch_sessions,
                &format!("TPC-H q{q}"),
                &tpch::query(q, sf),
                runs,
            )
            .await?;
            for (total, time) in totals.iter_mut().zip(times) {
                *total += time;
            }
        }
        println!(
            "| TPC-H SF{sf}, 22 queries | {:.1} | {:.1} | {:.1} | {:.2}x | {:.2}x |",
            totals[0],
            totals[1],
            totals[2],
            totals[1] / totals[0],
            totals[2] / totals[0]
        );
    }
    Ok(())
}
