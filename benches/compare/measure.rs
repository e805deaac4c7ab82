//! One measurement in a fresh process: `compare measure <table dir> <what> <ids file>
//! <fragment rows>` prints one JSON object of figures (milliseconds, bytes) and the process's
//! peak resident memory as the OS reports it. `view_search` times the resolution of a take's
//! ids alone, 40 times over (the first, cold, apart); with `NATAL_TAKE_ONLY=1`, `take_cold`
//! stops after the take (no whole view built after it), for profiling the take alone.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::prelude::SessionContext;
use natal::internals::rowid::{CarriedFragment, IdSet, RelocationView};
use natal::RowId;

use crate::common::{birth_id, ms, timed_sql};
use natal::internals::io::InstrumentedStore;
use natal::{CompactOptions, ScanRequest, Table};
use object_store::local::LocalFileSystem;
use serde_json::{json, Map, Value};

/// Figure name → value, as one process reported them.
pub type Figures = BTreeMap<String, f64>;

/// Bytes of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// Each figure's median over the runs that reported it.
pub fn median_of(runs: &[Value]) -> Figures {
    let mut all: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for run in runs {
        for (name, value) in run.as_object().into_iter().flatten() {
            if let Some(v) = value.as_f64() {
                all.entry(name.clone()).or_default().push(v);
            }
        }
    }
    all.into_iter()
        .map(|(name, mut values)| {
            values.sort_by(f64::total_cmp);
            (name, values[values.len() / 2])
        })
        .collect()
}

/// A line of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .map_or(0.0, |kb: f64| kb * 1024.0)
}

/// CPU time this process's threads have run, in ns (0 where `/proc` does not say): a cold
/// take's work over its wall time shows how much of it ran in parallel.
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

pub fn run(args: &[String]) {
    let [dir, what, ids, fragment_rows] = args else {
        panic!("usage: compare measure <table dir> <what> <ids file> <fragment rows>");
    };
    let fragment_rows: u64 = fragment_rows.parse().expect("fragment rows");
    let rows: Vec<u64> = std::fs::read_to_string(ids)
        .expect("ids file")
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut out = runtime.block_on(measure(Path::new(dir), what, &rows, fragment_rows));
    out.insert("peak_rss_bytes".into(), json!(status_bytes("VmHWM:")));
    println!("{}", Value::Object(out));
}

async fn measure(dir: &Path, what: &str, rows: &[u64], fragment_rows: u64) -> Map<String, Value> {
    let mut out = Map::new();
    let dir = std::fs::canonicalize(dir).expect("table dir");
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("table name");
    let root = dir.parent().expect("root").to_string_lossy().to_string();
    let ctx = SessionContext::new();
    if let Some(query) = what.strip_prefix("parquet_") {
        let listing =
            ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        let data = format!("{}/data/", dir.display());
        ctx.register_listing_table("p", data, listing, Some(common_schema()), None)
            .await
            .expect("listing table");
        let keys: Vec<String> = rows[..1000].iter().map(u64::to_string).collect();
        let sql = match query {
            "scan" => "SELECT id, val FROM p WHERE val > 990000".to_string(),
            "take" => format!("SELECT * FROM p WHERE id IN ({})", keys.join(",")),
            _ => "SELECT count(*) FROM p".to_string(),
        };
        let (ms, n) = timed_sql(&ctx, &sql).await;
        out.insert(format!("parquet_{query}_ms"), json!(ms));
        out.insert(format!("parquet_{query}_rows"), json!(n));
        return out;
    }
    natal::datafusion::register(&ctx, &root).expect("register");
    let rss_start = status_bytes("VmRSS:");
    let local = Arc::new(LocalFileSystem::new_with_prefix(&dir).expect("local store"));
    let store = Arc::new(InstrumentedStore::new(local));
    let table = Table::open(store.clone(), "".into());
    let start = Instant::now();
    let snapshot = table.latest().await.expect("open");
    out.insert("open_ms".into(), json!(ms(start)));
    let requests = |out: &mut Map<String, Value>, prefix: &str| {
        let tally = store.tally();
        out.insert(format!("{prefix}_gets"), json!(tally.get));
        out.insert(format!("{prefix}_lists"), json!(tally.list));
        out.insert(format!("{prefix}_bytes_read"), json!(tally.bytes_read));
        store.reset();
    };
    requests(&mut out, "open");
    let ids: Vec<RowId> = rows.iter().map(|&r| birth_id(r, fragment_rows)).collect();
    match what {
        "open" => {}
        "open_pinned" => {
            // A version halfway through the updates, on a handle of its own (nothing cached).
            let pinned = snapshot.version() / 2;
            let table = Table::open(store.clone(), "".into());
            let start = Instant::now();
            table.at_version(pinned).await.expect("pinned");
            out.insert("pinned_open_ms".into(), json!(ms(start)));
            requests(&mut out, "pinned_open");
        }
        "view_search" => {
            // The view of a take's 1,000 ids alone, many times over the same sequences: the
            // CPU a cold take spends resolving ids, without the noise of a fresh process.
            let carried: Vec<_> = (snapshot.manifest().fragments.iter())
                .filter_map(|f| Some((f.id, f.physical_rows, f.row_ids.sequence()?)))
                .collect();
            let fragments: Vec<CarriedFragment> = (carried.iter())
                .map(|&(id, physical_rows, _)| CarriedFragment { id, physical_rows })
                .collect();
            let mut times = Vec::new();
            for round in 0..40 {
                let wanted = IdSet::new(ids[round % 2 * 1000..][..1000].iter().copied());
                let start = Instant::now();
                let sequences = carried.iter().map(|&(id, _, s)| (id, s.as_ref()));
                let view = RelocationView::build_for(&fragments, sequences, &wanted);
                times.push(ms(start));
                std::hint::black_box(view);
            }
            // The first round is a cold take's: it also builds each sequence's search index.
            out.insert("view_search_first_ms".into(), json!(times[0]));
            times.sort_by(f64::total_cmp);
            out.insert("view_search_min_ms".into(), json!(times[0]));
            out.insert(
                "view_search_median_ms".into(),
                json!(times[times.len() / 2]),
            );
        }
        "take_cold" | "take_warm" => {
            let rss_before = status_bytes("VmRSS:");
            // The first take of a fresh process, as a user gets it (a few ids are resolved by
            // a view of just them); the whole view is built after it, to be measured.
            let cpu_before = cpu_ns();
            let start = Instant::now();
            let got = snapshot
                .take(&ids[..1000], ScanRequest::default())
                .await
                .expect("take");
            out.insert("take_cold_ms".into(), json!(ms(start)));
            requests(&mut out, "take_cold");
            let cpu = cpu_ns().saturating_sub(cpu_before);
            out.insert("take_cpu_ms".into(), json!(cpu as f64 / 1e6));
            assert_eq!(got.num_rows(), 1000, "every id is live");
            if std::env::var("NATAL_TAKE_ONLY").is_ok() {
                return out;
            }
            let start = Instant::now();
            let view = snapshot.relocation_view().await.expect("view");
            out.insert("view_ms".into(), json!(ms(start)));
            out.insert("index_bytes".into(), json!(view.heap_size()));
            out.insert("moved_rows".into(), json!(view.moved_rows()));
            // The part of a cold take that resolves its ids: the view of just them, built
            // from the carried fragments' sequences (as the first take built it).
            let carried: Vec<_> = (snapshot.manifest().fragments.iter())
                .filter_map(|f| Some((f.id, f.physical_rows, f.row_ids.sequence()?)))
                .collect();
            let segments: usize = carried.iter().map(|(_, _, s)| s.segments().len()).sum();
            out.insert("row_id_segments".into(), json!(segments));
            let fragments: Vec<CarriedFragment> = (carried.iter())
                .map(|&(id, physical_rows, _)| CarriedFragment { id, physical_rows })
                .collect();
            let wanted = IdSet::new(ids[..1000].iter().copied());
            let start = Instant::now();
            let sequences = carried.iter().map(|&(id, _, s)| (id, s.as_ref()));
            RelocationView::build_for(&fragments, sequences, &wanted);
            out.insert("view_for_take_ms".into(), json!(ms(start)));
            out.insert(
                "index_rss_bytes".into(),
                json!(status_bytes("VmRSS:") - rss_before),
            );
            if what == "take_warm" {
                let start = Instant::now();
                let got = snapshot
                    .take(&ids[1000..2000], ScanRequest::default())
                    .await
                    .expect("take");
                out.insert("take_warm_ms".into(), json!(ms(start)));
                assert_eq!(got.num_rows(), 1000, "every id is live");
            }
        }
        "scan" | "scan_plain" => {
            let sql = if what == "scan" {
                format!("SELECT _rowid, id, val FROM \"{name}$rows\" WHERE val > 990000")
            } else {
                format!("SELECT id, val FROM \"{name}\" WHERE val > 990000")
            };
            let (ms, n) = timed_sql(&ctx, &sql).await;
            out.insert(format!("{what}_ms"), json!(ms));
            out.insert(format!("{what}_rows"), json!(n));
        }
        "count" => {
            let (ms, n) = timed_sql(&ctx, &format!("SELECT count(*) FROM \"{name}\"")).await;
            out.insert("count_ms".into(), json!(ms));
            assert_eq!(n, 1);
        }
        "compact" => {
            let start = Instant::now();
            let report = table
                .compact(CompactOptions::default())
                .await
                .expect("compact");
            out.insert("compact_ms".into(), json!(ms(start)));
            out.insert(
                "fragments_removed".into(),
                json!(report.figures.fragments_removed),
            );
        }
        other => panic!("unknown measurement {other:?}"),
    }
    out.insert(
        "rss_growth_bytes".into(),
        json!(status_bytes("VmRSS:") - rss_start),
    );
    out
}

fn common_schema() -> arrow::datatypes::SchemaRef {
    super::common::schema()
}
