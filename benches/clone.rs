//! Clones (issue 38's figures): a table of `NATAL_BENCH_ROWS` rows (default 10M, fragments
//! of 1M, 1% of rows then updated) and a blob table (`NATAL_CLONE_BLOBS` values of 256 KiB,
//! default 1,000), on a local directory. For each: a shallow clone's time, bytes and files
//! written; a deep clone's time against copying the table's directory file by file with the
//! store's own copy (as many at once as the deep clone runs); reads of a shallow clone
//! against the source. Then over S3 (the tests' in-process S3 server, `tests/it/s3_server.rs`):
//! a deep clone from the local root into a bucket against uploading the table's files with
//! `object_store` (a GET and a PUT, or a multipart upload, each), and a deep clone within the
//! bucket against copying the files with the server's own copy (CopyObject), 8 at once
//! each. Lance 14 (`benches/lance_clone.py`, interpreter `NATAL_BENCH_PYTHON`) beside, on
//! the same rows.
//!
//! ```text
//! NATAL_BENCH_PYTHON=/path/to/venv/bin/python cargo bench --bench clone
//! ```

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/it/s3_server.rs"]
mod s3_server;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use common::{bytes_under, env, files_under, median, ms, timed_sql, write_table, Rng};
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};

const RUNS: usize = 3;

async fn run(ctx: &SessionContext, sql: &str) -> Vec<arrow::array::RecordBatch> {
    natal::datafusion::sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// `table`'s latest version, through `ctx`.
async fn latest_version(ctx: &SessionContext, table: &str) -> u64 {
    let batches = run(
        ctx,
        &format!("SELECT max(version) FROM \"{table}$versions\""),
    )
    .await;
    let column = batches[0].column(0);
    column
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .expect("versions")
        .value(0)
}

/// Copies every file under `from` in `source` to the same place under `to` in `target`, 8
/// at once: the store's own copy when they are one store, else a GET and a PUT (a
/// streamed multipart upload past 8 MiB), as a user's upload with `object_store` would.
async fn copy_files(
    source: &Arc<dyn ObjectStore>,
    from: &str,
    target: &Arc<dyn ObjectStore>,
    to: &str,
) {
    let listed: Vec<_> = source
        .list(Some(&from.into()))
        .try_collect()
        .await
        .expect("list");
    futures::stream::iter(listed)
        .map(|meta| async move {
            let rest = meta.location.as_ref().strip_prefix(from).expect("under");
            let destination = object_store::path::Path::from(format!("{to}{rest}"));
            if Arc::ptr_eq(source, target) {
                return source.copy(&meta.location, &destination).await;
            }
            let got = source.get(&meta.location).await?;
            if meta.size <= 8 << 20 {
                return target
                    .put(&destination, got.bytes().await?.into())
                    .await
                    .map(drop);
            }
            let mut body = got.into_stream();
            let upload = target.put_multipart(&destination).await?;
            let mut upload = object_store::WriteMultipart::new(upload);
            while let Some(chunk) = body.try_next().await? {
                upload.wait_for_capacity(4).await?;
                upload.put(chunk);
            }
            upload.finish().await.map(drop)
        })
        .buffer_unordered(8)
        .try_collect::<()>()
        .await
        .expect("copy");
}

/// Deep clones over S3, each against copying the same files without natal: from the
/// local root into the bucket, then within the bucket.
struct S3Figures {
    table: String,
    bytes: u64,
    into_ms: f64,
    upload_ms: f64,
    within_ms: f64,
    server_copy_ms: f64,
}

/// The in-process S3 server the S3 figures use: its bucket `bench`, registered with the
/// bench's session, and a session whose natal root is in the bucket.
struct Bucket {
    _server: s3_server::S3Server,
    store: Arc<dyn ObjectStore>,
    session: SessionContext,
    /// The directory the server keeps the bucket's objects in.
    dir: std::path::PathBuf,
}

impl Bucket {
    async fn start(ctx: &SessionContext, dir: std::path::PathBuf) -> Self {
        let server = s3_server::S3Server::start_in(&dir, &["bench"], 1000)
            .await
            .expect("S3 server");
        let store: Arc<dyn ObjectStore> = Arc::new(server.client("bench").expect("client"));
        let url = url::Url::parse("s3://bench").expect("url");
        ctx.register_object_store(&url, store.clone());
        let session = SessionContext::new();
        session.register_object_store(&url, store.clone());
        natal::datafusion::register(&session, "s3://bench/natal").expect("catalog");
        Self {
            _server: server,
            store,
            session,
            dir,
        }
    }
}

async fn measure_s3(ctx: &SessionContext, root: &Path, s3: &Bucket, table: &str) -> S3Figures {
    let bucket = &s3.store;
    let local: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
    let version = latest_version(ctx, table).await;
    let from = format!(
        "{}/{table}",
        root.to_str().expect("utf-8").trim_start_matches('/')
    );
    let (mut into, mut upload, mut within, mut server_copy) = (vec![], vec![], vec![], vec![]);
    for run_no in 0..RUNS {
        let start = Instant::now();
        let clone = format!("s3://bench/natal/{table}_into{run_no}");
        run(
            ctx,
            &format!("SELECT * FROM natal_clone('{table}', '{clone}', {version}, 'deep')"),
        )
        .await;
        into.push(ms(start));
        let start = Instant::now();
        copy_files(&local, &from, bucket, &format!("upload/{table}{run_no}")).await;
        upload.push(ms(start));
        let start = Instant::now();
        run(
            &s3.session,
            &format!(
                "SELECT * FROM natal_clone('{table}_into0', '{table}_within{run_no}', {version}, 'deep')"
            ),
        )
        .await;
        within.push(ms(start));
        let start = Instant::now();
        let copied = format!("natal/{table}_into0");
        copy_files(bucket, &copied, bucket, &format!("copy/{table}{run_no}")).await;
        server_copy.push(ms(start));
    }
    S3Figures {
        table: table.to_string(),
        bytes: bytes_under(&s3.dir.join(format!("bench/natal/{table}_into0"))),
        into_ms: median(into),
        upload_ms: median(upload),
        within_ms: median(within),
        server_copy_ms: median(server_copy),
    }
}

struct Figures {
    table: String,
    shallow_ms: f64,
    shallow_bytes: u64,
    shallow_files: usize,
    deep_ms: f64,
    copy_ms: f64,
    deep_bytes: u64,
    reads: Vec<(String, f64, f64)>,
}

async fn measure(
    ctx: &SessionContext,
    root: &Path,
    table: &str,
    reads: &[(&str, String)],
) -> Figures {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
    let version = latest_version(ctx, table).await;
    let mut shallow = Vec::new();
    let mut deep = Vec::new();
    let mut copy = Vec::new();
    for run_no in 0..RUNS {
        let start = Instant::now();
        run(
            ctx,
            &format!("SELECT * FROM natal_clone('{table}', '{table}_shallow{run_no}')"),
        )
        .await;
        shallow.push(ms(start));
        let start = Instant::now();
        run(
            ctx,
            &format!(
                "SELECT * FROM natal_clone('{table}', '{table}_deep{run_no}', {version}, 'deep')"
            ),
        )
        .await;
        deep.push(ms(start));
        let from = format!(
            "{}/{table}",
            root.to_str().expect("utf-8").trim_start_matches('/')
        );
        let to = format!(
            "{}/copy_{table}{run_no}",
            root.to_str().expect("utf-8").trim_start_matches('/')
        );
        let start = Instant::now();
        copy_files(&store, &from, &store, &to).await;
        copy.push(ms(start));
    }
    let clone_dir = root.join(format!("{table}_shallow0"));
    let mut figures = Vec::new();
    for (what, sql) in reads {
        let mut source = Vec::new();
        let mut cloned = Vec::new();
        let on_clone = sql.replace(&format!("FROM {table}"), &format!("FROM {table}_shallow0"));
        timed_sql(ctx, sql).await;
        timed_sql(ctx, &on_clone).await;
        // Nine of each, the order alternating (a read warms the page cache for the other).
        for round in 0..9 {
            if round % 2 == 0 {
                source.push(timed_sql(ctx, sql).await.0);
                cloned.push(timed_sql(ctx, &on_clone).await.0);
            } else {
                cloned.push(timed_sql(ctx, &on_clone).await.0);
                source.push(timed_sql(ctx, sql).await.0);
            }
        }
        figures.push((what.to_string(), median(source), median(cloned)));
    }
    Figures {
        table: table.to_string(),
        shallow_ms: median(shallow),
        shallow_bytes: bytes_under(&clone_dir),
        shallow_files: files_under(&clone_dir),
        deep_ms: median(deep),
        copy_ms: median(copy),
        deep_bytes: bytes_under(&root.join(format!("{table}_deep0"))),
        reads: figures,
    }
}

/// Runs `benches/lance_clone.py` with `args`: its JSON answer, or `None` without Lance.
fn lance(python: &str, args: &[&str]) -> Option<serde_json::Value> {
    common::python_json(python, "lance_clone.py", args)
}

fn field(v: &Option<serde_json::Value>, name: &str) -> Option<f64> {
    common::json_number(v, name)
}

#[tokio::main]
async fn main() {
    let rows = env("NATAL_BENCH_ROWS", 10_000_000);
    let blobs = env("NATAL_CLONE_BLOBS", 1000);
    let base = std::env::var("NATAL_BENCH_DIR").map_or(std::env::temp_dir(), Into::into);
    let dir = base.join(format!("natal-clone-{}", std::process::id()));
    let root = dir.join("natal");
    std::fs::create_dir_all(&root).expect("bench directory");
    let ctx = SessionContext::new();
    let root_text = root.to_str().expect("utf-8");
    let start = Instant::now();
    write_table(&ctx, &format!("{root_text}/t"), rows, 1 << 20, &mut Rng(7))
        .await
        .expect("table");
    natal::datafusion::register(&ctx, root_text).expect("catalog");
    run(&ctx, "UPDATE t SET val = val + 1 WHERE id % 100 = 0").await;
    run(&ctx, "CREATE TABLE b (id BIGINT, img BLOB)").await;
    run(
        &ctx,
        &format!(
            "INSERT INTO b SELECT value, CAST(repeat(CAST(value % 10 AS VARCHAR), 262144) AS BYTEA) \
             FROM generate_series(1, {blobs})"
        ),
    )
    .await;
    eprintln!("tables written in {:.1} s", start.elapsed().as_secs_f64());

    let table_reads = [
        (
            "filtered scan (val < 1000)",
            "SELECT count(*), sum(val) FROM t WHERE val < 1000".to_string(),
        ),
        (
            "full scan",
            "SELECT sum(val), max(payload) FROM t".to_string(),
        ),
        ("take of 1,000 ids", {
            let mut rng = Rng(11);
            let ids: Vec<String> = (0..1000)
                .map(|_| {
                    common::birth_id(rng.below(rows), 1 << 20)
                        .as_u64()
                        .to_string()
                })
                .collect();
            format!(
                "SELECT count(*) FROM \"t$rows\" WHERE _rowid IN ({})",
                ids.join(", ")
            )
        }),
    ];
    let blob_reads = [("every blob value", "SELECT max(img) FROM b".to_string())];
    let mut all = vec![measure(&ctx, &root, "t", &table_reads).await];
    all.push(measure(&ctx, &root, "b", &blob_reads).await);

    println!("{rows} rows in fragments of 1M (1% updated); {blobs} blob values of 256 KiB\n");
    println!("| table | shallow clone | written | deep clone | directory copy | deep / copy | deep bytes |");
    println!("|---|---|---|---|---|---|---|");
    for f in &all {
        println!(
            "| {} | {:.1} ms | {} files, {:.1} KiB | {:.0} ms | {:.0} ms | {:.2}× | {:.1} MiB |",
            f.table,
            f.shallow_ms,
            f.shallow_files,
            f.shallow_bytes as f64 / 1024.0,
            f.deep_ms,
            f.copy_ms,
            f.deep_ms / f.copy_ms,
            f.deep_bytes as f64 / (1 << 20) as f64
        );
    }
    println!("\n| read | source | shallow clone | clone / source |");
    println!("|---|---|---|---|");
    for f in &all {
        for (what, source, cloned) in &f.reads {
            println!(
                "| {}: {what} | {source:.1} ms | {cloned:.1} ms | {:.2}× |",
                f.table,
                cloned / source
            );
        }
    }

    let bucket = Bucket::start(&ctx, dir.join("s3")).await;
    let mut over_s3 = Vec::new();
    for table in ["t", "b"] {
        over_s3.push(measure_s3(&ctx, &root, &bucket, table).await);
    }
    println!("\nDeep clones over S3 (the in-process S3 server on loopback), 8 files at once:\n");
    println!("| table | bytes | local → bucket: deep clone | upload | clone / upload | within the bucket: deep clone | server copy | clone / copy |");
    println!("|---|---|---|---|---|---|---|---|");
    for f in &over_s3 {
        println!(
            "| {} | {:.1} MiB | {:.0} ms | {:.0} ms | {:.2}× | {:.0} ms | {:.0} ms | {:.2}× |",
            f.table,
            f.bytes as f64 / (1 << 20) as f64,
            f.into_ms,
            f.upload_ms,
            f.into_ms / f.upload_ms,
            f.within_ms,
            f.server_copy_ms,
            f.within_ms / f.server_copy_ms
        );
    }

    let python = std::env::var("NATAL_BENCH_PYTHON").unwrap_or("python3".into());
    let lance_dir = dir.join("lance");
    let source = lance_dir.join("t");
    let source_text = source.to_str().expect("utf-8");
    let rows_text = rows.to_string();
    if lance(
        &python,
        &["write", "--dir", source_text, "--rows", &rows_text],
    )
    .is_some()
    {
        let clone_of = |kind: &str, run_no: usize| {
            let target = lance_dir.join(format!("{kind}{run_no}"));
            lance(
                &python,
                &[
                    kind,
                    "--dir",
                    source_text,
                    "--target",
                    target.to_str().expect("utf-8"),
                ],
            )
        };
        let shallow: Vec<_> = (0..RUNS).map(|i| clone_of("shallow", i)).collect();
        let deep: Vec<_> = (0..RUNS).map(|i| clone_of("deep", i)).collect();
        let seconds = |runs: &[Option<serde_json::Value>]| {
            median(
                runs.iter()
                    .filter_map(|r| field(r, "seconds"))
                    .map(|s| s * 1e3)
                    .collect(),
            )
        };
        let scan = |dir: &Path| {
            let times: Vec<f64> = (0..5)
                .filter_map(|_| {
                    field(
                        &lance(&python, &["scan", "--dir", dir.to_str()?]),
                        "seconds",
                    )
                })
                .map(|s| s * 1e3)
                .collect();
            median(times)
        };
        println!(
            "\nLance 14.0.2 (`benches/lance_clone.py`, each in a fresh process), the same rows:\n"
        );
        println!("| shallow_clone | written | deep_clone | filtered scan source | filtered scan shallow clone |");
        println!("|---|---|---|---|---|");
        println!(
            "| {:.1} ms | {} files, {:.1} KiB | {:.0} ms | {:.1} ms | {:.1} ms |",
            seconds(&shallow),
            field(&shallow[0], "files").unwrap_or(f64::NAN),
            field(&shallow[0], "bytes").unwrap_or(f64::NAN) / 1024.0,
            seconds(&deep),
            scan(&source),
            scan(&lance_dir.join("shallow0")),
        );
    } else {
        eprintln!("Lance is not importable by `{python}`: natal alone");
    }
    std::fs::remove_dir_all(&dir).ok();
}
