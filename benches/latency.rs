//! Request economy under latency (issue #22's figures): a store that holds every request for
//! `NATAL_LATENCY_MS` (default 20, S3 in-region) and counts them, under natal's catalog and
//! under DataFusion's Parquet listing table over the same rows (`NATAL_BENCH_ROWS`, default
//! 1M, `id, val, payload`, natal in fragments of 100k, Parquet in one file per 100k rows).
//! Prints, per operation, the requests (GET / PUT / LIST / DELETE) and the wall time. Then
//! the same over HTTP: the tables in a bucket of the tests' in-process S3 server
//! (`tests/it/s3_server.rs`), read and written through `object_store`'s S3 client, no latency
//! added (what the protocol itself costs).
//!
//! ```text
//! cargo bench --bench latency
//! ```

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/it/s3_server.rs"]
mod s3_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env, ms, write_table, Rng};
use datafusion::prelude::SessionContext;
use natal::internals::io::{InstrumentedStore, RequestTally};
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;
use url::Url;

/// One operation's figures.
struct Figure {
    what: String,
    natal: (RequestTally, f64),
    parquet: Option<(RequestTally, f64)>,
}

fn requests(t: &RequestTally) -> String {
    format!("{} / {} / {} / {}", t.get, t.put, t.list, t.delete)
}

/// Runs `sql` through natal's entry point, returning the rows it gave.
async fn run(ctx: &SessionContext, sql: &str) -> usize {
    let frame = natal::datafusion::sql(ctx, sql).await.expect("plan");
    let batches = frame.collect().await.expect("run");
    batches.iter().map(|b| b.num_rows()).sum()
}

/// `sql`'s requests and milliseconds on `store`, counted from zero.
async fn measured(
    store: &InstrumentedStore,
    ctx: &SessionContext,
    sql: &str,
) -> (RequestTally, f64) {
    store.reset();
    let start = Instant::now();
    run(ctx, sql).await;
    (store.tally(), ms(start))
}

/// Where the tables are read from.
#[derive(Clone, Copy)]
enum Mode {
    /// A local directory, every request held this long.
    Latency(Duration),
    /// A bucket of the in-process S3 server, over HTTP.
    S3,
}

#[tokio::main]
async fn main() {
    let rows = env("NATAL_BENCH_ROWS", 1_000_000);
    let latency = Duration::from_millis(env("NATAL_LATENCY_MS", 20));
    for mode in [Mode::Latency(latency), Mode::S3] {
        let figures = measure(rows, mode).await;
        let how = match mode {
            Mode::Latency(latency) => format!("every request held {} ms", latency.as_millis()),
            Mode::S3 => "over HTTP: the in-process S3 server, nothing held".to_string(),
        };
        println!(
            "{rows} rows, {how} (natal: fragments of 100k; Parquet: {} files)\n",
            rows.div_ceil(100_000)
        );
        print(&figures);
    }
}

/// Each operation's figures with the tables where `mode` says.
async fn measure(rows: u64, mode: Mode) -> Vec<Figure> {
    let name = match mode {
        Mode::Latency(_) => "held",
        Mode::S3 => "s3",
    };
    let dir = std::env::temp_dir().join(format!("natal-latency-{}-{name}", std::process::id()));
    // The bucket the S3 server serves: the tables are written there directly.
    let data = dir.join("bench");
    std::fs::create_dir_all(data.join("parquet")).expect("bench directory");

    // The same rows both ways, written without latency.
    let setup = SessionContext::new();
    let root = data.to_str().expect("a UTF-8 path").to_string();
    write_table(
        &setup,
        &format!("{root}/natal/t"),
        rows,
        100_000,
        &mut Rng(7),
    )
    .await
    .expect("natal table");
    natal::datafusion::register(&setup, &format!("{root}/natal")).expect("catalog");
    for part in 0..rows.div_ceil(100_000) {
        let from = part * 100_000;
        let sql = format!(
            "COPY (SELECT * FROM t WHERE id >= {from} AND id < {}) TO '{root}/parquet/part-{part}.parquet' \
             STORED AS PARQUET",
            from + 100_000
        );
        run(&setup, &sql).await;
    }

    // Every request counted (and, held for `latency`).
    let (base, _server): (Arc<dyn ObjectStore>, _) = match mode {
        Mode::Latency(_) => {
            let local = LocalFileSystem::new_with_prefix(&data).expect("local store");
            (Arc::new(local), None)
        }
        Mode::S3 => {
            let server = s3_server::S3Server::start_in(&dir, &["bench"], 1000)
                .await
                .expect("S3 server");
            (
                Arc::new(server.client("bench").expect("client")),
                Some(server),
            )
        }
    };
    let store = Arc::new(InstrumentedStore::new(base));
    if let Mode::Latency(latency) = mode {
        store.set_latency(latency);
    }
    let ctx = SessionContext::new();
    let url = Url::parse("slow://bench").expect("url");
    ctx.register_object_store(&url, store.clone());
    natal::datafusion::register(&ctx, "slow://bench/natal").expect("catalog");
    // A session that accepts a stale latest, as DataFusion's listing table does (its list
    // of files is cached with no TTL by default).
    let patient = SessionContext::new();
    patient.register_object_store(&url, store.clone());
    let catalog = natal::datafusion::CatalogOptions {
        staleness_limit: Duration::from_secs(3600),
    };
    natal::datafusion::register_with(&patient, "slow://bench/natal", catalog).expect("catalog");
    store.reset();
    let start = Instant::now();
    run(
        &ctx,
        "CREATE EXTERNAL TABLE p STORED AS PARQUET LOCATION 'slow://bench/parquet/'",
    )
    .await;
    let register_parquet = (store.tally(), ms(start));

    let mut figures = Vec::new();
    // Opening: a fresh handle on the latest version, and on a pinned one.
    for (what, version) in [("open latest", None), ("open pinned (v1)", Some(1))] {
        let table = natal::Table::open(store.clone(), "natal/t".into());
        store.reset();
        let start = Instant::now();
        match version {
            None => drop(table.latest().await.expect("open")),
            Some(v) => drop(table.at_version(v).await.expect("open")),
        }
        let natal = (store.tally(), ms(start));
        let parquet = (what == "open latest").then_some(register_parquet);
        figures.push(Figure {
            what: what.into(),
            natal,
            parquet,
        });
    }
    let mut rng = Rng(11);
    let picked: Vec<u64> = (0..1000).map(|_| rng.below(rows)).collect();
    let ids: Vec<String> = picked
        .iter()
        .map(|&row| common::birth_id(row, 100_000).as_u64().to_string())
        .collect();
    let keys: Vec<String> = picked.iter().map(u64::to_string).collect();
    let cases = [
        (
            "take of 1,000 ids",
            format!(
                "SELECT * FROM \"t$rows\" WHERE _rowid IN ({})",
                ids.join(", ")
            ),
            Some(format!("SELECT * FROM p WHERE id IN ({})", keys.join(", "))),
        ),
        (
            "filtered scan (val < 1000, 0.1%)",
            "SELECT count(*), sum(id) FROM t WHERE val < 1000".to_string(),
            Some("SELECT count(*), sum(id) FROM p WHERE val < 1000".to_string()),
        ),
        (
            "count(*)",
            "SELECT count(*) FROM t".to_string(),
            Some("SELECT count(*) FROM p".to_string()),
        ),
        (
            "commit of a one-row update",
            "UPDATE t SET val = 0 WHERE id = 12345".to_string(),
            None,
        ),
        (
            "compaction",
            "SELECT * FROM natal_compact('t')".to_string(),
            None,
        ),
    ];
    let reads: Vec<_> = (cases.iter().take(3).cloned())
        .map(|(what, natal, parquet)| {
            let what = format!("{what}, staleness limit 1 h");
            (what, natal, parquet, &patient)
        })
        .collect();
    let cases = (cases.into_iter())
        .map(|(what, natal, parquet)| (what.to_string(), natal, parquet, &ctx))
        .chain(reads);
    for (what, natal_sql, parquet_sql, session) in cases {
        // Reads run once first: each side's footers cached, as a long-lived session has
        // them. Writes run once, on what the reads warmed.
        let writes = natal_sql.starts_with("UPDATE") || natal_sql.contains("natal_compact");
        if !writes {
            run(session, &natal_sql).await;
        }
        let natal = measured(&store, session, &natal_sql).await;
        let parquet = match parquet_sql {
            Some(sql) => {
                run(&ctx, &sql).await;
                Some(measured(&store, &ctx, &sql).await)
            }
            None => None,
        };
        figures.push(Figure {
            what,
            natal,
            parquet,
        });
    }

    std::fs::remove_dir_all(&dir).ok();
    figures
}

fn print(figures: &[Figure]) {
    println!("| operation | natal requests (GET / PUT / LIST / DELETE) | natal time | Parquet requests | Parquet time |");
    println!("|---|---|---|---|---|");
    for f in figures {
        let (parquet_requests, parquet_time) = match &f.parquet {
            Some((t, ms)) => (requests(t), format!("{ms:.1} ms")),
            None => ("–".to_string(), "–".to_string()),
        };
        println!(
            "| {} | {} | {:.1} ms | {} | {} |",
            f.what,
            requests(&f.natal.0),
            f.natal.1,
            parquet_requests,
            parquet_time
        );
    }
    println!();
}
