//! TPC-H on natal vs DataFusion's Parquet (issue #17's figures).
//!
//! Data is generated in-process (`tpchgen`) at `NATAL_TPCH_SF` (default 1), loaded into natal
//! tables (`INSERT INTO`) and written as Parquet by DataFusion's own writer with its defaults
//! (`COPY ... STORED AS PARQUET`). Every query's answer is compared between the two (the bench
//! fails on a difference), then each side is timed: the median of `NATAL_TPCH_RUNS` (default
//! 5) runs, each in a fresh `SessionContext` (planning included, caches cold). Then churn
//! that keeps the logical content (10% of lineitem updated to its own values, 1% of orders
//! and lineitem deleted and inserted again, every table compacted) and the same again.
//!
//! Before the queries, the write figure: `lineitem` held in memory, written by
//! `CREATE TABLE ... AS SELECT` into natal and by `COPY` as Parquet (time and bytes), on a
//! local directory and through S3 (a bucket of the tests' in-process S3 server, over HTTP);
//! skip it with `NATAL_TPCH_WRITE=0`. `NATAL_TPCH_QUERIES=1,12,18` runs some queries only,
//! `NATAL_TPCH_CHURN=0` skips the churn, `NATAL_TPCH_KEEP=1` leaves the tables in place.
//! `NATAL_TPCH_SETTINGS=key=value;...` instead times natal's session against itself with
//! those settings (see `settings_ab`; may be empty), and with `NATAL_TPCH_KEYS=1` too against
//! copies of the tables that declare their TPC-H primary keys.
//!
//! Beside DataFusion's defaults, each query is also timed on the same Parquet files with
//! `datafusion.execution.parquet.pushdown_filters` on, and, when `NATAL_BENCH_PYTHON` names
//! a Python with the `duckdb` package, by DuckDB (`benches/duckdb_tpch.py`, fresh connection
//! per run) as a reference (its answers' row counts are checked, its times reported).
//!
//! ```text
//! cargo bench --bench tpch
//! NATAL_TPCH_SF=10 NATAL_TPCH_RUNS=3 cargo bench --bench tpch
//! ```

#[allow(dead_code)]
#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/it/s3_server.rs"]
mod s3_server;
#[path = "tpch/mod.rs"]
mod tpch;

use std::sync::Arc;
use std::time::Instant;

use datafusion::catalog::{MemTable, MemorySchemaProvider, SchemaProvider};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use tpch::{env_f64, median, Dirs};

/// Median wall time (ms) of `runs` runs of query `q`, each in a fresh session from `session`.
async fn time_query<F, Fut>(session: F, q: usize, sf: f64, runs: usize) -> Result<f64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<SessionContext>>,
{
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let ctx = session().await?;
        let start = Instant::now();
        tpch::run(&ctx, q, sf).await?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(times))
}

/// One query's times (ms): natal, DataFusion's Parquet with its defaults and with
/// `pushdown_filters` on, and DuckDB's if it ran.
struct Times {
    q: usize,
    natal: f64,
    parquet: f64,
    pushdown: f64,
    duckdb: Option<f64>,
}

/// Checks that natal and Parquet (pushdown off and on) give the same answer to every query,
/// then times each; DuckDB's figures (`duckdb`, by query) are checked by row count.
async fn compare(
    dirs: &Dirs,
    queries: &[usize],
    sf: f64,
    runs: usize,
    duckdb: &Option<serde_json::Value>,
) -> Result<Vec<Times>> {
    let mut out = Vec::new();
    for &q in queries {
        let natal = tpch::canonical(&tpch::run(&tpch::natal_session(dirs)?, q, sf).await?)?;
        for pushdown in [false, true] {
            let session = tpch::parquet_session_with(dirs, pushdown).await?;
            let plain = tpch::canonical(&tpch::run(&session, q, sf).await?)?;
            if natal != plain {
                return Err(DataFusionError::Execution(format!(
                    "q{q}: natal's answer ({} rows) differs from Parquet's ({} rows, pushdown {pushdown})",
                    natal.len(),
                    plain.len()
                )));
            }
        }
        let duckdb = duckdb.as_ref().and_then(|d| d.get(q.to_string()));
        if let Some(rows) = duckdb.and_then(|d| d.get("rows")).and_then(|r| r.as_u64()) {
            if rows as usize != natal.len() {
                return Err(DataFusionError::Execution(format!(
                    "q{q}: DuckDB returned {rows} rows, natal {}",
                    natal.len()
                )));
            }
        }
        let natal_ms = time_query(|| async { tpch::natal_session(dirs) }, q, sf, runs).await?;
        let plain_ms = time_query(|| tpch::parquet_session(dirs), q, sf, runs).await?;
        let pushdown_ms =
            time_query(|| tpch::parquet_session_with(dirs, true), q, sf, runs).await?;
        eprintln!(
            "q{q}: natal {natal_ms:.0} ms, Parquet {plain_ms:.0} ms, pushdown {pushdown_ms:.0} ms ({} rows)",
            natal.len()
        );
        out.push(Times {
            q,
            natal: natal_ms,
            parquet: plain_ms,
            pushdown: pushdown_ms,
            duckdb: duckdb.and_then(|d| d.get("ms")).and_then(|m| m.as_f64()),
        });
    }
    Ok(out)
}

/// A fresh natal session over `dirs` with `settings` (`key`, `value`) set.
async fn natal_session_with(dirs: &Dirs, settings: &[(String, String)]) -> Result<SessionContext> {
    let ctx = tpch::natal_session(dirs)?;
    for (key, value) in settings {
        ctx.sql(&format!("SET {key} = '{value}'")).await?;
    }
    Ok(ctx)
}

/// `NATAL_TPCH_SETTINGS=key=value;key=value`: each query on natal's session as it is (A)
/// and with those settings (B), answers checked equal, the runs alternating and each pair
/// swapping which goes first (the machine's drift between two runs of the whole bench is
/// larger than a setting's effect); prints the medians and B / A per query and summed.
async fn settings_ab(
    (dirs, b_dirs): (&Dirs, &Dirs),
    queries: &[usize],
    sf: f64,
    runs: usize,
    settings: &str,
) -> Result<()> {
    let settings: Vec<(String, String)> = (settings.split(';'))
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                DataFusionError::Configuration(format!("'{pair}' is not key=value"))
            })?;
            Ok((key.trim().to_string(), value.trim().to_string()))
        })
        .collect::<Result<_>>()?;
    let keyed = b_dirs.natal != dirs.natal;
    println!("A: natal's session; B: with {settings:?} (tables declaring their keys: {keyed}); median of {runs}, alternating\n");
    println!("| query | A | B | B / A |");
    println!("|---|---|---|---|");
    let (mut sum_a, mut sum_b) = (0.0, 0.0);
    for &q in queries {
        let a = tpch::canonical(&tpch::run(&tpch::natal_session(dirs)?, q, sf).await?)?;
        let b = tpch::canonical(
            &tpch::run(&natal_session_with(b_dirs, &settings).await?, q, sf).await?,
        )?;
        if a != b {
            return Err(DataFusionError::Execution(format!(
                "q{q}: the settings changed the answer"
            )));
        }
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..runs {
            for which in [round % 2, 1 - round % 2] {
                let ctx = match which {
                    0 => tpch::natal_session(dirs)?,
                    _ => natal_session_with(b_dirs, &settings).await?,
                };
                let start = Instant::now();
                tpch::run(&ctx, q, sf).await?;
                times[which].push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        let [a, b] = times;
        let (a, b) = (median(a), median(b));
        (sum_a, sum_b) = (sum_a + a, sum_b + b);
        println!("| q{q} | {a:.0} ms | {b:.0} ms | {:.2}× |", b / a);
    }
    println!(
        "| sum | {sum_a:.0} ms | {sum_b:.0} ms | {:.2}× |",
        sum_b / sum_a
    );
    Ok(())
}

/// DuckDB's times over the Parquet files (`benches/duckdb_tpch.py`), if `NATAL_BENCH_PYTHON`
/// names a Python that has it.
fn duckdb_times(
    dirs: &Dirs,
    queries: &[usize],
    sf: f64,
    runs: usize,
) -> Result<Option<serde_json::Value>> {
    let Ok(python) = std::env::var("NATAL_BENCH_PYTHON") else {
        return Ok(None);
    };
    let texts: serde_json::Map<String, serde_json::Value> = queries
        .iter()
        .map(|&q| (q.to_string(), serde_json::Value::from(tpch::query(q, sf))))
        .collect();
    let file = dirs.parquet.join("queries.json");
    std::fs::write(&file, serde_json::Value::Object(texts).to_string())?;
    let args = [
        dirs.parquet.to_string_lossy().to_string(),
        file.to_string_lossy().to_string(),
        runs.to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok(common::python_json(&python, "duckdb_tpch.py", &args))
}

/// lineitem from memory: natal's `CREATE TABLE AS` against DataFusion's `COPY`.
async fn write_figure(dirs: &Dirs, sf: f64) -> Result<()> {
    let ctx = tpch::generator_session(sf)?;
    natal::datafusion::register(&ctx, &dirs.natal.to_string_lossy())?;
    let rows = ctx.sql("SELECT * FROM gen.lineitem").await?;
    let schema = Arc::new(rows.schema().as_arrow().clone());
    let partitions = rows.collect_partitioned().await?;
    let memory = Arc::new(MemorySchemaProvider::new());
    memory.register_table(
        "lineitem".into(),
        Arc::new(MemTable::try_new(schema, partitions)?),
    )?;
    ctx.catalog("datafusion")
        .ok_or_else(|| DataFusionError::Internal("no default catalog".into()))?
        .register_schema("mem", memory)?;
    let start = Instant::now();
    ctx.sql("CREATE TABLE lineitem_ctas AS SELECT * FROM mem.lineitem")
        .await?
        .collect()
        .await?;
    let natal_s = start.elapsed().as_secs_f64();
    let natal_bytes = tpch::bytes_under(&dirs.natal.join("lineitem_ctas").join("data"));
    let copy_dir = dirs.parquet.join("lineitem_copy");
    let start = Instant::now();
    tpch::copy_to_parquet(&ctx, "mem.lineitem", &copy_dir).await?;
    let copy_s = start.elapsed().as_secs_f64();
    let copy_bytes = tpch::bytes_under(&copy_dir);
    let title = format!("lineitem from memory (SF {sf})");
    print_writes(&title, (natal_s, natal_bytes), (copy_s, copy_bytes));
    ctx.sql("DROP TABLE lineitem_ctas").await?.collect().await?;
    std::fs::remove_dir_all(&copy_dir)?;
    write_through_s3(&ctx, sf).await
}

/// The same writes through S3: natal's CTAS into `s3://bench/natal` and DataFusion's `COPY`
/// to `s3://bench/parquet/`, both through one S3 client of the in-process server.
async fn write_through_s3(ctx: &SessionContext, sf: f64) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = s3_server::S3Server::start_in(dir.path(), &["bench"], 1000).await?;
    let client = server
        .client("bench")
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    let bucket =
        url::Url::parse("s3://bench").map_err(|e| DataFusionError::External(Box::new(e)))?;
    let s3 = SessionContext::new();
    s3.register_object_store(&bucket, Arc::new(client));
    let no_memory = || DataFusionError::Internal("no lineitem in memory".into());
    let memory = (ctx.catalog("datafusion").and_then(|c| c.schema("mem"))).ok_or_else(no_memory)?;
    (s3.catalog("datafusion").ok_or_else(no_memory)?).register_schema("mem", memory)?;
    natal::datafusion::register(&s3, "s3://bench/natal")?;
    let start = Instant::now();
    s3.sql("CREATE TABLE lineitem_s3 AS SELECT * FROM mem.lineitem")
        .await?
        .collect()
        .await?;
    let natal_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    s3.sql("COPY (SELECT * FROM mem.lineitem) TO 's3://bench/parquet/' STORED AS PARQUET")
        .await?
        .collect()
        .await?;
    let copy_s = start.elapsed().as_secs_f64();
    let natal_bytes = tpch::bytes_under(&dir.path().join("bench/natal/lineitem_s3/data"));
    let copy_bytes = tpch::bytes_under(&dir.path().join("bench/parquet"));
    let title =
        format!("lineitem from memory through S3 (SF {sf}; the in-process server, over HTTP)");
    print_writes(&title, (natal_s, natal_bytes), (copy_s, copy_bytes));
    Ok(())
}

/// The write figure's table: natal's CTAS and DataFusion's COPY, seconds and bytes each.
fn print_writes(title: &str, (natal_s, natal_bytes): (f64, u64), (copy_s, copy_bytes): (f64, u64)) {
    println!("{title}:\n");
    println!("| writer | time | bytes |");
    println!("|---|---|---|");
    println!(
        "| natal CREATE TABLE AS | {natal_s:.2} s | {:.1} MB |",
        natal_bytes as f64 / 1e6
    );
    println!(
        "| DataFusion COPY ... STORED AS PARQUET | {copy_s:.2} s | {:.1} MB |",
        copy_bytes as f64 / 1e6
    );
    println!(
        "| natal / Parquet | {:.2}× | {:.2}× |\n",
        natal_s / copy_s,
        natal_bytes as f64 / copy_bytes as f64
    );
}

fn print_table(title: &str, rows: &[Times]) {
    println!("{title}\n");
    println!("| query | natal | Parquet | Parquet, pushdown | DuckDB | natal / Parquet | natal / pushdown | natal / DuckDB |");
    println!("|---|---|---|---|---|---|---|---|");
    let ms = |d: Option<f64>| d.map_or("–".to_string(), |d| format!("{d:.0} ms"));
    let over_duckdb =
        |natal: f64, d: Option<f64>| d.map_or("–".to_string(), |d| format!("{:.2}×", natal / d));
    for t in rows {
        println!(
            "| q{} | {:.0} ms | {:.0} ms | {:.0} ms | {} | {:.2}× | {:.2}× | {} |",
            t.q,
            t.natal,
            t.parquet,
            t.pushdown,
            ms(t.duckdb),
            t.natal / t.parquet,
            t.natal / t.pushdown,
            over_duckdb(t.natal, t.duckdb),
        );
    }
    let sum = |f: fn(&Times) -> f64| rows.iter().map(f).sum::<f64>();
    let (natal, plain, pushdown) = (sum(|t| t.natal), sum(|t| t.parquet), sum(|t| t.pushdown));
    let duck: Option<f64> = rows.iter().map(|t| t.duckdb).sum();
    println!(
        "| sum | {natal:.0} ms | {plain:.0} ms | {pushdown:.0} ms | {} | {:.2}× | {:.2}× | {} |",
        ms(duck),
        natal / plain,
        natal / pushdown,
        over_duckdb(natal, duck),
    );
    let worst = rows
        .iter()
        .map(|t| (t.natal / t.parquet, t.q))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((ratio, q)) = worst {
        println!("\nhighest ratio: q{q} at {ratio:.2}×\n");
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let sf = env_f64("NATAL_TPCH_SF", 1.0);
    let runs = env_f64("NATAL_TPCH_RUNS", 5.0).max(1.0) as usize;
    let queries: Vec<usize> = match std::env::var("NATAL_TPCH_QUERIES") {
        Ok(list) => list
            .split(',')
            .filter_map(|q| q.trim().parse().ok())
            .collect(),
        Err(_) => (1..=22).collect(),
    };
    let dir = match std::env::var("NATAL_TPCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d)?,
        Err(_) => tempfile::tempdir_in(std::env::current_dir()?)?,
    };
    let dirs = Dirs::under(dir.path());
    println!("TPC-H SF {sf}: natal vs DataFusion Parquet (default writer), median of {runs} fresh sessions\n");
    let start = Instant::now();
    tpch::load(&dirs, sf).await?;
    println!(
        "loaded in {:.1} s (generated once per side); natal {:.1} MB, Parquet {:.1} MB\n",
        start.elapsed().as_secs_f64(),
        tpch::bytes_under(&dirs.natal) as f64 / 1e6,
        tpch::bytes_under(&dirs.parquet) as f64 / 1e6
    );
    if let Ok(settings) = std::env::var("NATAL_TPCH_SETTINGS") {
        // With `NATAL_TPCH_KEYS=1`, B reads copies that declare their primary keys.
        let mut b_dirs = dirs.clone();
        if std::env::var("NATAL_TPCH_KEYS").as_deref() == Ok("1") {
            b_dirs.natal = dirs.natal.with_file_name("keyed");
            tpch::load_keyed(&dirs, &b_dirs.natal).await?;
        }
        return settings_ab((&dirs, &b_dirs), &queries, sf, runs, &settings).await;
    }
    if std::env::var("NATAL_TPCH_WRITE").as_deref() != Ok("0") {
        write_figure(&dirs, sf).await?;
    }
    // The Parquet files do not change with the churn: DuckDB runs once.
    let duckdb = duckdb_times(&dirs, &queries, sf, runs)?;
    let fresh = compare(&dirs, &queries, sf, runs, &duckdb).await?;
    print_table("fresh tables:", &fresh);
    if std::env::var("NATAL_TPCH_CHURN").as_deref() == Ok("0") {
        keep_if_asked(dir);
        return Ok(());
    }
    let start = Instant::now();
    tpch::churn(&dirs).await?;
    println!("churn took {:.1} s\n", start.elapsed().as_secs_f64());
    let churned = compare(&dirs, &queries, sf, runs, &duckdb).await?;
    print_table(
        "after churn (update 10%, delete + insert 1%, compact):",
        &churned,
    );
    keep_if_asked(dir);
    Ok(())
}

/// With `NATAL_TPCH_KEEP=1`, leaves the tables in place (for EXPLAIN ANALYZE by hand).
fn keep_if_asked(dir: tempfile::TempDir) {
    if std::env::var("NATAL_TPCH_KEEP").as_deref() == Ok("1") {
        println!("tables kept in {}", dir.keep().display());
    }
}
