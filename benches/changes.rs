//! Change reads (issue 40's figures): a table of `NATAL_BENCH_ROWS` rows (default 10M,
//! fragments of 1M) on a local directory, then 10 rounds, each an UPDATE of 0.1% of the rows
//! (`val = val + 1`) and a DELETE of 0.01% (1% updated and 0.1% deleted in all), the rows
//! either scattered (`id % 1000 = i`) or clustered (contiguous blocks). Then the change
//! between the versions before and after the rounds, read cold (a fresh session and store
//! each run, the OS's page cache warm):
//! - `natal_changes('t', from, to)`, every column of every change (preimages and deleted
//!   rows' values included);
//! - `natal_changes` giving what Lance's `delta()` gives: new values of inserted and updated
//!   rows (`_change_type` filtered: nothing read at `from`), and deleted rows' ids (no value
//!   read);
//! - `natal_changes` reading no value: ids, kinds and versions (the diff's own cost);
//! - the same answer by SQL, a diff of the two versions (`EXCEPT` both ways on all columns);
//! - Lance 14 (`benches/lance_changes.py`, interpreter `NATAL_BENCH_PYTHON`) on the same rows
//!   and rounds: `delta()`'s inserted rows, updated rows (new values only) and deleted ids.
//!
//! Then the scattered rounds again on a table recording change data (`SET TBLPROPERTIES
//! (change_data_feed = true)`): the same reads, the old values from the captures, and the
//! rounds' write time beside the others'.
//!
//! Bytes are what natal's reads got from the store; Lance's are its process's `rchar`.
//! `NATAL_BENCH_KEEP=1` keeps natal's tables (under `NATAL_BENCH_DIR`) for
//! `changes measure <dir> <sql> [n]`, `n` cold runs of `sql` on them in one process.
//!
//! ```text
//! NATAL_BENCH_PYTHON=/path/to/venv/bin/python cargo bench --bench changes
//! ```

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use common::{env, median, ms, write_table, Rng};
use datafusion::prelude::SessionContext;
use natal::internals::io::InstrumentedStore;
use object_store::local::LocalFileSystem;

const RUNS: usize = 3;
const ROUNDS: u64 = 10;

async fn run(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    natal::datafusion::sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

async fn latest_version(ctx: &SessionContext) -> u64 {
    let batches = run(ctx, "SELECT max(version) FROM \"t$versions\"").await;
    let column = batches[0].column(0);
    column
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .expect("versions")
        .value(0)
}

/// The rows round `round` updates and deletes (as `lance_changes.py` picks them).
fn predicates(clustered: bool, rows: u64, round: u64) -> (String, String) {
    if !clustered {
        return (
            format!("id % 1000 = {round}"),
            format!("id % 10000 = {}", 5500 + round),
        );
    }
    let block = rows / 10 * round;
    let start = block + rows / 20;
    (
        format!("id >= {block} AND id < {}", block + rows / 1000),
        format!("id >= {start} AND id < {}", start + rows / 10000),
    )
}

/// One cold run of `sql` (statements separated by `;`, run in turn in one session) on the
/// table under `root`: milliseconds, rows, GETs and bytes.
async fn cold(root: &Path, sql: &str) -> (f64, usize, u64, u64) {
    let local = LocalFileSystem::new_with_prefix(root).expect("local store");
    let store = Arc::new(InstrumentedStore::new(Arc::new(local)));
    let ctx = SessionContext::new();
    let url = url::Url::parse("counted://bench").expect("url");
    ctx.register_object_store(&url, store.clone());
    natal::datafusion::register(&ctx, "counted://bench/").expect("catalog");
    let start = Instant::now();
    let mut rows = 0;
    for statement in sql.split(';') {
        rows += (run(&ctx, statement).await.iter())
            .map(RecordBatch::num_rows)
            .sum::<usize>();
    }
    let time = ms(start);
    let tally = store.tally();
    (time, rows, tally.get, tally.bytes_read)
}

struct Figures {
    ms: f64,
    rows: usize,
    gets: u64,
    bytes: u64,
}

async fn measure(root: &Path, sql: &str) -> Figures {
    let runs: Vec<(f64, usize, u64, u64)> = {
        let mut runs = Vec::new();
        for _ in 0..RUNS {
            runs.push(cold(root, sql).await);
        }
        runs
    };
    let (_, rows, gets, bytes) = runs[0];
    Figures {
        ms: median(runs.iter().map(|r| r.0).collect()),
        rows,
        gets,
        bytes,
    }
}

/// The bytes of the change data the versions of the table under `root` hold.
async fn captured_bytes(root: &Path) -> u64 {
    let local = LocalFileSystem::new_with_prefix(root).expect("local store");
    let table = natal::Table::open(Arc::new(local), "t".into());
    let versions = table.versions().await.expect("versions");
    (versions.iter())
        .flat_map(|m| m.change_data.iter().flatten())
        .flat_map(|f| &f.files)
        .map(|file| file.file_size_bytes)
        .sum()
}

fn lance(python: &str, args: &[&str]) -> Option<serde_json::Value> {
    common::python_json(python, "lance_changes.py", args)
}

fn field(v: &Option<serde_json::Value>, name: &str) -> f64 {
    common::json_number(v, name).unwrap_or(f64::NAN)
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

#[tokio::main]
async fn main() {
    // `changes measure <dir> <sql> [n]`: cold runs on a table kept by `NATAL_BENCH_KEEP=1`.
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, root, sql, rest @ ..] = args.as_slice() {
        if command == "measure" {
            let repeat = rest.first().and_then(|r| r.parse().ok()).unwrap_or(1);
            for _ in 0..repeat {
                let (time, rows, gets, bytes) = cold(Path::new(root), sql).await;
                let mib = mib(bytes as f64);
                println!("{time:.1} ms, {rows} rows, {gets} GETs, {mib:.1} MiB");
            }
            return;
        }
    }
    let keep = std::env::var("NATAL_BENCH_KEEP").is_ok_and(|v| v == "1");
    let rows = env("NATAL_BENCH_ROWS", 10_000_000);
    let python = std::env::var("NATAL_BENCH_PYTHON").unwrap_or("python3".into());
    let base = std::env::var("NATAL_BENCH_DIR").map_or(std::env::temp_dir(), Into::into);
    let dir = base.join(format!("natal-changes-{}", std::process::id()));
    println!(
        "{rows} rows in fragments of 1M; {ROUNDS} rounds of an UPDATE of 0.1% and a DELETE of \
         0.01% of the rows; the change over all rounds, read cold (median of {RUNS})\n"
    );
    println!("| rows changed | read | time | rows | GETs | bytes read | time / SQL diff |");
    println!("|---|---|---|---|---|---|---|");
    let mut lance_rows = Vec::new();
    let mut writes = Vec::new();
    for (clustered, feed) in [(false, false), (true, false), (false, true)] {
        let pattern = if clustered { "clustered" } else { "scattered" };
        let slug = if feed { "scattered-cdf" } else { pattern };
        let label = if feed {
            "scattered, change data"
        } else {
            pattern
        };
        let root = dir.join(slug);
        std::fs::create_dir_all(&root).expect("bench directory");
        let root_text = root.to_str().expect("utf-8");
        let ctx = SessionContext::new();
        write_table(&ctx, &format!("{root_text}/t"), rows, 1 << 20, &mut Rng(7))
            .await
            .expect("table");
        natal::datafusion::register(&ctx, root_text).expect("catalog");
        if feed {
            run(
                &ctx,
                "ALTER TABLE t SET TBLPROPERTIES (change_data_feed = true)",
            )
            .await;
        }
        let from = latest_version(&ctx).await;
        let written = Instant::now();
        for round in 0..ROUNDS {
            let (update, delete) = predicates(clustered, rows, round);
            run(&ctx, &format!("UPDATE t SET val = val + 1 WHERE {update}")).await;
            run(&ctx, &format!("DELETE FROM t WHERE {delete}")).await;
        }
        let written = ms(written);
        let to = latest_version(&ctx).await;
        writes.push((label, written, captured_bytes(&root).await));
        if keep {
            println!("kept: {} (v{from} → v{to})", root.display());
        }
        let changes = measure(
            &root,
            &format!("SELECT * FROM natal_changes('t', {from}, {to})"),
        )
        .await;
        // What Lance's delta gives: new values of inserted and updated rows, deleted ids.
        let as_lance = measure(
            &root,
            &format!(
                "SELECT * FROM natal_changes('t', {from}, {to}) \
                 WHERE _change_type IN ('insert', 'update_postimage'); \
                 SELECT _rowid FROM natal_changes('t', {from}, {to}) \
                 WHERE _change_type = 'delete'"
            ),
        )
        .await;
        // The diff alone: ids, kinds and versions, no value read.
        let ids_only = measure(
            &root,
            &format!(
                "SELECT _rowid, _change_type, _commit_version \
                 FROM natal_changes('t', {from}, {to})"
            ),
        )
        .await;
        let columns = "id, val, payload";
        let diff = measure(
            &root,
            &format!(
                "(SELECT {columns} FROM \"t@v{from}\" EXCEPT SELECT {columns} FROM \"t@v{to}\") \
                 UNION ALL \
                 (SELECT {columns} FROM \"t@v{to}\" EXCEPT SELECT {columns} FROM \"t@v{from}\")"
            ),
        )
        .await;
        for (what, f) in [
            (format!("natal_changes (v{from} → v{to})"), &changes),
            (
                "natal_changes, new values and deleted ids".to_string(),
                &as_lance,
            ),
            (
                "natal_changes, ids and kinds only (no value read)".to_string(),
                &ids_only,
            ),
            ("SQL diff (EXCEPT both ways)".to_string(), &diff),
        ] {
            println!(
                "| {label} | {what} | {:.0} ms | {} | {} | {:.1} MiB | {:.3}× |",
                f.ms,
                f.rows,
                f.gets,
                mib(f.bytes as f64),
                f.ms / diff.ms
            );
        }
        if feed {
            // The same rows and rounds as `scattered`: Lance was measured there.
            if !keep {
                std::fs::remove_dir_all(&root).ok();
            }
            continue;
        }
        let lance_dir = dir.join(format!("lance-{pattern}"));
        let lance_text = lance_dir.to_str().expect("utf-8");
        let rows_text = rows.to_string();
        let rounds_text = ROUNDS.to_string();
        let written = lance(
            &python,
            &["write", "--dir", lance_text, "--rows", &rows_text],
        );
        let edited = written.and_then(|_| {
            lance(
                &python,
                &[
                    "edit",
                    "--dir",
                    lance_text,
                    "--rows",
                    &rows_text,
                    "--rounds",
                    &rounds_text,
                    "--pattern",
                    pattern,
                ],
            )
        });
        if let Some(edited) = edited {
            let from_text = format!("{}", field(&Some(edited), "from") as u64);
            let runs: Vec<Option<serde_json::Value>> = (0..RUNS)
                .map(|_| {
                    lance(
                        &python,
                        &["delta", "--dir", lance_text, "--from", &from_text],
                    )
                })
                .collect();
            let time = median(runs.iter().map(|r| field(r, "seconds") * 1e3).collect());
            lance_rows.push(format!(
                "| {pattern} | {:.0} ms | {} inserted, {} updated, {} deleted ids | {:.1} MiB | \
                 {:.2}× | {:.2}× |",
                time,
                field(&runs[0], "inserted"),
                field(&runs[0], "updated"),
                field(&runs[0], "deleted"),
                mib(field(&runs[0], "bytes")),
                as_lance.ms / time,
                changes.ms / time
            ));
        }
        if !keep {
            std::fs::remove_dir_all(&root).ok();
        }
        std::fs::remove_dir_all(&lance_dir).ok();
    }
    println!("\nThe {ROUNDS} rounds' writes (an UPDATE and a DELETE each):\n");
    println!("| rows changed | time | change data written |");
    println!("|---|---|---|");
    for (label, time, captured) in writes {
        println!(
            "| {label} | {time:.0} ms | {:.1} MiB |",
            mib(captured as f64)
        );
    }
    if lance_rows.is_empty() {
        eprintln!("Lance is not importable by `{python}`: natal alone");
    } else {
        println!(
            "\nLance 14.0.2 `delta()` (each run a fresh process), the same rows and rounds:\n"
        );
        println!(
            "| rows changed | time | rows | bytes read (rchar) | natal, the same output / Lance \
             | natal_changes, all of it / Lance |"
        );
        println!("|---|---|---|---|---|---|");
        for row in lance_rows {
            println!("{row}");
        }
    }
    if !keep {
        std::fs::remove_dir_all(&dir).ok();
    }
}
