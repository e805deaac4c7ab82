//! natal, Lance and DataFusion's Parquet table side by side (issue #4). One run prints every
//! table of BENCHMARKS.md and writes `results.json` for `benches/plot.py`.
//!
//! For each scale (default 1M rows in fragments of 100k, and 10M in fragments of 1M; rows are
//! `id int64, val int64, payload ~20 B`) and each U ∈ {0, 1k, 10k, 100k, 1M}, a copy of the
//! base table takes U random updates by row id in 100 commits, on natal and on Lance (stable
//! row ids). Then every measurement runs in a fresh process (this binary again, or
//! `benches/lance_bench.py`), reading peak memory from the OS: cold open; cold take of 1,000
//! random ids (open + relocation view / row-id index + take); warm take; a filtered scan
//! returning row ids; `count(*)`; compaction; and a cold take after compaction. DataFusion's
//! Parquet table over natal's own data files is measured at U = 0 (it has no updates).
//!
//! ```text
//! cargo bench --bench compare                       # natal + Parquet; Lance if importable
//! NATAL_BENCH_PYTHON=.venv/bin/python cargo bench --bench compare
//! NATAL_BENCH_SCALES=1000000:100000 NATAL_BENCH_U=0,10000 cargo bench --bench compare
//! ```
//! Also `NATAL_BENCH_DIR` (work directory, default `target/compare-bench`),
//! `NATAL_BENCH_COMMITS` (default 100), `NATAL_BENCH_REPEAT` (fresh processes per figure,
//! median taken; default 3) and `NATAL_BENCH_MERGE` (the fan-in of natal's tiered merging of
//! small fragments during the updates, `TableOptions::merge`; default 8, natal's own; 0: off)
//! and `NATAL_BENCH_LANCE_MAX_U` (Lance runs only at levels up to this U; at 100M rows its
//! updates by `_rowid IN (...)` scan the table each commit).

#[path = "common/mod.rs"]
mod common;
#[path = "compare/measure.rs"]
mod measure;
#[path = "compare/report.rs"]
mod report;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use common::{birth_id, bump_val, env, rows, schema, Rng};
use measure::{dir_bytes, median_of, Figures};
use natal::{Table, TableOptions, TieredMerge};
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};
use report::{Level, Scale};
use serde_json::Value;

/// The measurements both systems run, each in fresh processes.
const MEASUREMENTS: [&str; 6] = ["open", "take_cold", "take_warm", "scan", "count", "compact"];

struct Config {
    work: PathBuf,
    scales: Vec<(u64, u64)>,
    levels: Vec<u64>,
    commits: u64,
    repeat: usize,
    /// Fan-in of natal's tiered merging during the updates; 0: off.
    merge: u32,
    python: Option<String>,
    /// Lance runs only at levels up to this many updates (all when unset).
    lance_max_u: Option<u64>,
}

fn config() -> Config {
    let list = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let scales = list("NATAL_BENCH_SCALES", "1000000:100000,10000000:1000000")
        .split(',')
        .filter_map(|s| {
            let (rows, fragment) = s.split_once(':')?;
            Some((rows.trim().parse().ok()?, fragment.trim().parse().ok()?))
        })
        .collect();
    let levels = list("NATAL_BENCH_U", "0,1000,10000,100000,1000000")
        .split(',')
        .filter_map(|u| u.trim().parse().ok())
        .collect();
    let python = list("NATAL_BENCH_PYTHON", "python3");
    let lance_ok = Command::new(&python)
        .args(["-c", "import lance"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !lance_ok {
        eprintln!(
            "Lance is not importable by `{python}`: measuring natal and Parquet only \
             (set NATAL_BENCH_PYTHON to a venv with pylance, see README.md)"
        );
    }
    Config {
        work: PathBuf::from(list("NATAL_BENCH_DIR", "target/compare-bench")),
        scales,
        levels,
        commits: env("NATAL_BENCH_COMMITS", 100),
        repeat: env("NATAL_BENCH_REPEAT", 3) as usize,
        merge: env("NATAL_BENCH_MERGE", 8) as u32,
        python: lance_ok.then_some(python),
        lance_max_u: std::env::var("NATAL_BENCH_LANCE_MAX_U")
            .ok()
            .and_then(|u| u.parse().ok()),
    }
}

fn local_store(dir: &Path) -> Arc<dyn ObjectStore> {
    std::fs::create_dir_all(dir).expect("create dir");
    Arc::new(LocalFileSystem::new_with_prefix(dir).expect("local store"))
}

async fn create_natal_base(dir: &Path, total: u64, fragment_rows: u64) {
    let options = TableOptions {
        max_rows_per_fragment: fragment_rows,
        ..Default::default()
    };
    let table = Table::create(local_store(dir), "".into(), &schema(), options)
        .await
        .expect("create");
    let mut rng = Rng(7);
    let mut written = 0u64;
    let batches = std::iter::from_fn(move || {
        (written < total).then(|| {
            let len = (total - written).min(65_536);
            let batch = rows(written as i64, len as i64, &mut rng);
            written += len;
            Ok(batch)
        })
    });
    table
        .append_stream(Box::pin(futures::stream::iter(batches)))
        .await
        .expect("load");
}

/// `commits` lines of distinct random row numbers, `level` numbers in all.
fn write_updates(path: &Path, level: u64, commits: u64, total: u64, rng: &mut Rng) {
    let mut text = String::new();
    for commit in 0..commits.min(level) {
        let size = level / commits + u64::from(commit < level % commits);
        let mut rows = BTreeSet::new();
        while (rows.len() as u64) < size {
            rows.insert(rng.below(total));
        }
        let line: Vec<String> = rows.iter().map(u64::to_string).collect();
        text.push_str(&line.join(" "));
        text.push('\n');
    }
    std::fs::write(path, text).expect("write updates");
}

fn read_rows(path: &Path) -> Vec<Vec<u64>> {
    let text = std::fs::read_to_string(path).expect("read row numbers");
    text.lines()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .filter(|l: &Vec<u64>| !l.is_empty())
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).expect("clear copy");
    }
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy file");
        }
    }
}

/// Applies the update file to natal's copy: per commit, its time and the bytes it wrote
/// (with the merges that followed it, if `merge` is on).
async fn update_natal(dir: &Path, updates: &Path, fragment_rows: u64, merge: u32) -> Level {
    let options = TableOptions {
        merge: (merge > 0).then_some(TieredMerge { fan_in: merge }),
        ..Default::default()
    };
    let table = Table::open_with(local_store(dir), "".into(), options);
    let mut level = Level::default();
    for commit in read_rows(updates) {
        let ids: Vec<_> = commit.iter().map(|&r| birth_id(r, fragment_rows)).collect();
        let before = dir_bytes(dir);
        let start = Instant::now();
        table.update_rows(&ids, &bump_val).await.expect("update");
        level.update_ms.push(start.elapsed().as_secs_f64() * 1e3);
        level.bytes_per_commit.push(dir_bytes(dir) - before);
    }
    let latest = table.latest().await.expect("latest");
    level.manifest_bytes = local_store(dir)
        .head(&table.store().manifest_path(latest.version()))
        .await
        .expect("head")
        .size;
    level
}

/// Writes a relocation checkpoint to the table at `dir`: its time and file size.
async fn checkpoint_natal(dir: &Path) -> Figures {
    let table = Table::open(local_store(dir), "".into());
    let start = Instant::now();
    table.checkpoint().await.expect("checkpoint");
    let mut figures = Figures::new();
    figures.insert("checkpoint_ms".into(), start.elapsed().as_secs_f64() * 1e3);
    let latest = table.latest().await.expect("latest");
    let size = (latest.manifest().relocation_checkpoint.as_ref()).map_or(0, |c| c.file_size_bytes);
    figures.insert("checkpoint_bytes".into(), size as f64);
    figures
}

fn run_json(command: &mut Command) -> Value {
    let output = command.output().expect("spawn measurement");
    if !output.status.success() {
        panic!(
            "measurement failed: {command:?}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("bad output {last:?}: {e}"))
}

/// Runs `make()` `repeat` times (a fresh process each) and keeps each figure's median.
fn fresh(repeat: usize, mut make: impl FnMut() -> Command) -> Figures {
    let runs: Vec<Value> = (0..repeat).map(|_| run_json(&mut make())).collect();
    median_of(&runs)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "measure") {
        measure::run(&args[at + 1..]);
        return;
    }
    let config = config();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let me = std::env::current_exe().expect("own path");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/lance_bench.py");
    let mut scales = Vec::new();
    for &(total, fragment_rows) in &config.scales {
        let dir = config.work.join(format!("rows-{total}"));
        let natal_base = dir.join("natal_base");
        if !natal_base.join("_versions").exists() {
            let start = Instant::now();
            runtime.block_on(create_natal_base(&natal_base, total, fragment_rows));
            eprintln!(
                "natal base of {total} rows written in {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
        let mut rng = Rng(total);
        let ids_file = dir.join("take-ids.txt");
        let mut picked = BTreeSet::new();
        while picked.len() < 2000 {
            picked.insert(rng.below(total));
        }
        // Shuffled so the cold and warm takes are both spread over the table.
        let mut picked: Vec<u64> = picked.into_iter().collect();
        for i in (1..picked.len()).rev() {
            picked.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let text: Vec<String> = picked.iter().map(u64::to_string).collect();
        std::fs::write(&ids_file, text.join(" ")).expect("write ids");

        let natal_measure = |table: &Path, what: &str| {
            let mut c = Command::new(&me);
            c.arg("measure").arg(table).arg(what).arg(&ids_file);
            c.arg(fragment_rows.to_string());
            c
        };
        let lance_measure = |python: &str, table: &Path, what: &str| {
            let mut c = Command::new(python);
            c.arg(&script)
                .args(["measure", "--what", what, "--dir"])
                .arg(table);
            c.arg("--ids").arg(&ids_file);
            c.args(["--fragment-rows", &fragment_rows.to_string()]);
            c
        };
        let mut scale = Scale {
            rows: total,
            fragment_rows,
            merge: config.merge,
            parquet: Level::default(),
            levels: Vec::new(),
            paired_take: None,
        };
        for what in [
            "parquet_scan",
            "parquet_take",
            "parquet_count",
            "scan_plain",
        ] {
            let figures = fresh(config.repeat, || natal_measure(&natal_base, what));
            scale.parquet.add(what, figures);
        }
        for &level in config.levels.iter().filter(|&&u| u <= total) {
            let updates = dir.join(format!("updates-{level}.txt"));
            write_updates(&updates, level, config.commits, total, &mut rng);
            let natal_dir = dir.join(format!("natal_u{level}"));
            copy_dir(&natal_base, &natal_dir);
            let mut natal = runtime.block_on(update_natal(
                &natal_dir,
                &updates,
                fragment_rows,
                config.merge,
            ));
            natal.level = level;
            let mut lance = None;
            let lance_here = config.lance_max_u.is_none_or(|max| level <= max);
            if let (Some(python), true) = (&config.python, lance_here) {
                let lance_dir = dir.join(format!("lance_u{level}"));
                let prepared = run_json(
                    Command::new(python)
                        .arg(&script)
                        .args(["prepare", "--rows", &total.to_string()])
                        .args(["--fragment-rows", &fragment_rows.to_string()])
                        .arg("--base")
                        .arg(dir.join("lance_base"))
                        .arg("--dir")
                        .arg(&lance_dir)
                        .arg("--updates")
                        .arg(&updates),
                );
                let mut l = Level::from_prepared(level, &prepared);
                for what in MEASUREMENTS {
                    let repeat = if what == "compact" { 1 } else { config.repeat };
                    l.add(
                        what,
                        fresh(repeat, || lance_measure(python, &lance_dir, what)),
                    );
                }
                let after = fresh(config.repeat, || {
                    lance_measure(python, &lance_dir, "take_cold")
                });
                l.add("after", after);
                lance = Some(l);
            }
            // Compaction rewrites the table: it runs on a copy, so the updated table stays as
            // it is for the paired takes below.
            let compacted = dir.join(format!("natal_u{level}_compacted"));
            copy_dir(&natal_dir, &compacted);
            let uncompacted = dir_bytes(&compacted);
            for what in MEASUREMENTS {
                let (repeat, table) = match what {
                    "compact" => (1, &compacted),
                    _ => (config.repeat, &natal_dir),
                };
                natal.add(what, fresh(repeat, || natal_measure(table, what)));
            }
            let compacted_bytes = dir_bytes(&compacted);
            let after = fresh(config.repeat, || natal_measure(&compacted, "take_cold"));
            natal.add("after", after);
            let mut written = Figures::new();
            written.insert(
                "bytes_written".into(),
                (compacted_bytes - uncompacted) as f64,
            );
            natal.add("compact", written);
            natal.add(
                "open_pinned",
                fresh(config.repeat, || natal_measure(&natal_dir, "open_pinned")),
            );
            // With a relocation checkpoint: a copy of the updated table, checkpointed here,
            // then opened and taken from in fresh processes.
            let checkpointed = dir.join(format!("natal_u{level}_ckpt"));
            copy_dir(&natal_dir, &checkpointed);
            let mut made = runtime.block_on(checkpoint_natal(&checkpointed));
            made.extend(fresh(config.repeat, || {
                natal_measure(&checkpointed, "take_cold")
            }));
            natal.add("ckpt", made);
            std::fs::remove_dir_all(&checkpointed).expect("remove checkpointed copy");
            eprintln!("{total} rows, U = {level}: done");
            scale.levels.push((natal, lance));
        }
        let (before, after) = (dir.join("natal_u0"), dir.join("natal_u100000"));
        // Both tables were (re)built by this run.
        if config.levels.contains(&0) && config.levels.contains(&100_000) && 100_000 <= total {
            let (mut b, mut a) = (Vec::new(), Vec::new());
            for _ in 0..report::PAIRED_RUNS {
                b.push(run_json(&mut natal_measure(&before, "take_cold")));
                a.push(run_json(&mut natal_measure(&after, "take_cold")));
            }
            let take_ms = |runs: &[Value]| median_of(runs).get("take_cold_ms").copied();
            scale.paired_take = take_ms(&b).zip(take_ms(&a));
        }
        report::print_scale(&scale);
        scales.push(scale);
    }
    report::print_targets(&scales);
    let results = config.work.join("results.json");
    std::fs::write(&results, report::to_json(&scales).to_string()).expect("write results");
    eprintln!("wrote {}", results.display());
}
