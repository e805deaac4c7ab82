//! natal on a Ballista cluster vs a local session (issue #39's figures): the same queries on
//! a local `SessionContext` and on three clusters — an in-process one whose two executors
//! pull their tasks (`cluster/mod.rs`: Ballista's standalone scheduler and executors, each
//! on a runtime of its own), and `natal-scheduler` with `natal-executor` processes (this
//! build's binaries on 127.0.0.1), which push tasks, with one executor running 2 tasks at
//! once and with two running 1 each. On a 2-core machine every cluster has the cores the
//! local session has, so the figures are each query's overhead on a cluster, not a
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

use std::process::{Child, Command};
use std::time::{Duration, Instant};

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

/// `natal-scheduler` and `executors` `natal-executor` processes on 127.0.0.1, tasks
/// pushed; killed when dropped.
struct Processes {
    port: u16,
    children: Vec<Child>,
    _logs: tempfile::TempDir,
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Processes {
    async fn start(executors: usize, vcores: usize) -> Result<Self> {
        let logs = tempfile::tempdir()?;
        let port = free_port()?;
        let log_dir = logs.path().to_path_buf();
        let spawn = |program: &str, args: Vec<String>, log: &str| -> Result<Child> {
            let log = std::fs::File::create(log_dir.join(log))?;
            Ok(Command::new(program)
                .args(args)
                .env("RUST_LOG", "warn")
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()?)
        };
        let mut processes = Self {
            port,
            children: Vec::new(),
            _logs: logs,
        };
        let scheduler = env!("CARGO_BIN_EXE_natal-scheduler");
        let args = vec!["--bind-port".to_string(), port.to_string()];
        processes
            .children
            .push(spawn(scheduler, args, "scheduler.log")?);
        for executor in 0..executors {
            let args = vec![
                "--scheduler-port".to_string(),
                port.to_string(),
                "--port".into(),
                free_port()?.to_string(),
                "--grpc-port".into(),
                free_port()?.to_string(),
                "--vcores".into(),
                vcores.to_string(),
            ];
            let log = format!("executor{executor}.log");
            let executor = env!("CARGO_BIN_EXE_natal-executor");
            processes.children.push(spawn(executor, args, &log)?);
        }
        // Ready once a query answers: a job with no executor yet waits for one.
        let started = Instant::now();
        loop {
            let client = processes.client_of("/").await;
            let probe = async { client.sql("SELECT 1").await?.collect().await };
            let answered = tokio::time::timeout(Duration::from_secs(2), probe).await;
            if matches!(answered, Ok(Ok(_))) {
                return Ok(processes);
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err(datafusion::error::DataFusionError::Execution(
                    "the process cluster did not answer in 60 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn client_of(&self, root: &str) -> SessionContext {
        natal::datafusion::cluster::connect(
            &format!("df://127.0.0.1:{}", self.port),
            root,
            std::sync::Arc::new(datafusion::execution::runtime_env::RuntimeEnv::default()),
            natal::datafusion::CatalogOptions::default(),
        )
        .await
        .expect("a client session")
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The local session, then the clusters' sessions in the table's column order.
struct Sessions {
    local: SessionContext,
    clusters: Vec<SessionContext>,
}

/// The clusters compared, in the table's column order.
struct Clusters {
    pulled: harness::Cluster,
    pushed_one: Processes,
    pushed_two: Processes,
}

impl Clusters {
    async fn sessions(&self, local: SessionContext, root: &str) -> Sessions {
        Sessions {
            local,
            clusters: vec![
                self.pulled.client(root).await,
                self.pushed_one.client_of(root).await,
                self.pushed_two.client_of(root).await,
            ],
        }
    }
}

/// Times `sql` on each session, checks the clusters' answers, prints a row.
async fn compare(sessions: &Sessions, name: &str, sql: &str, runs: usize) -> Result<Vec<f64>> {
    let (expected, local) = timed(&sessions.local, sql, runs).await?;
    let mut times = vec![local];
    for (i, cluster) in sessions.clusters.iter().enumerate() {
        let (answer, time) = timed(cluster, sql, runs).await?;
        assert_eq!(answer, expected, "{name}: cluster {i}'s answer");
        times.push(time);
    }
    print_row(name, &times);
    Ok(times)
}

fn print_row(name: &str, times: &[f64]) {
    let cells: Vec<String> = times.iter().map(|t| format!("{t:.1}")).collect();
    let ratios: Vec<String> = times[1..]
        .iter()
        .map(|t| format!("{:.2}x", t / times[0]))
        .collect();
    println!(
        "| {name} | {} | {} |",
        cells.join(" | "),
        ratios.join(" | ")
    );
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

    let clusters = Clusters {
        pulled: harness::Cluster::start(2, 1),
        pushed_one: Processes::start(1, 2).await?,
        pushed_two: Processes::start(2, 1).await?,
    };
    let local = SessionContext::new();
    natal::datafusion::register(&local, &root_text)?;
    let sessions = clusters.sessions(local, &root_text).await;
    println!("\nmedian ms of {runs} runs; ratio = cluster / local");
    println!(
        "| query | local | pulled, 2 executors × 1 task | pushed, 1 executor × 2 tasks | \
         pushed, 2 executors × 1 task | pulled 2 | pushed 1 | pushed 2 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
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
        let natal_root = dirs.natal.to_string_lossy().into_owned();
        let tpch_sessions = clusters
            .sessions(tpch::natal_session(&dirs)?, &natal_root)
            .await;
        let mut totals = vec![0.0; 4];
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
        print_row(&format!("TPC-H SF{sf}, 22 queries"), &totals);
    }
    Ok(())
}
