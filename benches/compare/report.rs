//! The tables `cargo bench --bench compare` prints (BENCHMARKS.md is one run of them) and the
//! JSON `benches/plot.py` reads. Figures are keyed `<measurement>.<figure>`, e.g.
//! `take_cold.take_cold_ms`: every measurement ran in its own process.

use serde_json::{json, Value};

use crate::measure::Figures;

/// One system at one U.
#[derive(Debug, Default)]
pub struct Level {
    pub level: u64,
    pub update_ms: Vec<f64>,
    pub bytes_per_commit: Vec<u64>,
    pub manifest_bytes: u64,
    pub figures: Figures,
}

impl Level {
    /// What `lance_bench.py prepare` printed.
    pub fn from_prepared(level: u64, prepared: &Value) -> Self {
        let numbers = |key: &str| -> Vec<f64> {
            prepared[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect()
        };
        Self {
            level,
            update_ms: numbers("update_ms"),
            bytes_per_commit: numbers("bytes_per_commit")
                .into_iter()
                .map(|b| b as u64)
                .collect(),
            manifest_bytes: prepared["manifest_bytes"].as_u64().unwrap_or(0),
            figures: Figures::new(),
        }
    }

    /// Adds one measurement's figures under its name.
    pub fn add(&mut self, measurement: &str, figures: Figures) {
        for (name, value) in figures {
            self.figures.insert(format!("{measurement}.{name}"), value);
        }
    }

    fn get(&self, key: &str) -> Option<f64> {
        self.figures.get(key).copied()
    }

    /// Mean bytes written by commits `from..to` (0-based), where there were that many.
    fn mean_bytes(&self, from: usize, to: usize) -> Option<f64> {
        let window = self
            .bytes_per_commit
            .get(from..to.min(self.bytes_per_commit.len()))?;
        (!window.is_empty()).then(|| window.iter().sum::<u64>() as f64 / window.len() as f64)
    }

    fn mean_update_ms(&self) -> Option<f64> {
        (!self.update_ms.is_empty())
            .then(|| self.update_ms.iter().sum::<f64>() / self.update_ms.len() as f64)
    }
}

/// Fresh processes per side for the paired cold-take measurement.
pub const PAIRED_RUNS: usize = 11;

/// Every level of one table size; each level holds natal's figures and Lance's if it ran.
pub struct Scale {
    pub rows: u64,
    pub fragment_rows: u64,
    /// Fan-in of natal's tiered merging of small fragments during the updates; 0: off.
    pub merge: u32,
    pub parquet: Level,
    pub levels: Vec<(Level, Option<Level>)>,
    /// natal's cold take before and after 100k updates, medians of fresh processes run in
    /// alternation (the target's ratio, measured side by side).
    pub paired_take: Option<(f64, f64)>,
}

fn ms(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1} ms"))
}

fn bytes(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(b) if b.abs() >= 1e6 => format!("{:.1} MB", b / 1e6),
        Some(b) if b.abs() >= 1e3 => format!("{:.1} kB", b / 1e3),
        Some(b) => format!("{b:.0} B"),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".into(),
    }
}

fn systems(scale: &Scale) -> impl Iterator<Item = (&'static str, &Level)> {
    scale.levels.iter().flat_map(|(natal, lance)| {
        std::iter::once(("natal", natal)).chain(lance.iter().map(|l| ("Lance", l)))
    })
}

pub fn print_scale(scale: &Scale) {
    println!(
        "\n### {} rows, fragments of {}\n",
        scale.rows, scale.fragment_rows
    );
    println!("Every figure is the median of fresh processes (compaction: one process).");
    if scale.merge > 0 {
        println!("natal merges small fragments as the updates add them (`TableOptions::merge`, fan-in {}); its update times and bytes per commit include the merges.", scale.merge);
    } else {
        println!("natal's tiered merging of small fragments is off: only the compaction column merges them.");
    }
    println!("Index memory: natal = relocation-view heap bytes; Lance = session cache growth from the first take (row-id index and file metadata). RSS growth of that take in parentheses.\n");
    println!("| U | system | update / commit | manifest | index memory | cold open | take 1k cold | take 1k warm | scan + row ids (rows) | count(*) | compaction | take 1k after compaction | peak RSS of cold take |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (system, l) in systems(scale) {
        let index = if system == "natal" {
            l.get("take_cold.index_bytes")
        } else {
            l.get("take_cold.index_cache_bytes")
        };
        println!(
            "| {} | {system} | {} | {} | {} ({}) | {} | {} | {} | {} ({}) | {} | {} | {} | {} |",
            l.level,
            ms(l.mean_update_ms()),
            bytes(Some(l.manifest_bytes as f64)),
            bytes(index),
            bytes(l.get("take_cold.index_rss_bytes")),
            ms(l.get("open.open_ms")),
            ms(l.get("take_cold.take_cold_ms")),
            ms(l.get("take_warm.take_warm_ms")),
            ms(l.get("scan.scan_ms")),
            l.get("scan.scan_rows").map_or(0, |r| r as u64),
            ms(l.get("count.count_ms")),
            ms(l.get("compact.compact_ms")),
            ms(l.get("after.take_cold_ms")),
            bytes(l.get("take_cold.peak_rss_bytes")),
        );
    }
    let p = &scale.parquet;
    println!("\nDataFusion's Parquet table over natal's U = 0 data files (no row ids; take = `id IN (1,000 keys)`):\n");
    println!("| query | natal | DataFusion Parquet | natal / Parquet |");
    println!("|---|---|---|---|");
    let natal_u0 = scale.levels.first().map(|(n, _)| n);
    let natal_take = natal_u0.and_then(|n| n.get("take_cold.take_cold_ms"));
    let natal_count = natal_u0.and_then(|n| n.get("count.count_ms"));
    for (query, natal, parquet) in [
        (
            "filtered scan `val > 990000` (~1%)",
            p.get("scan_plain.scan_plain_ms"),
            p.get("parquet_scan.parquet_scan_ms"),
        ),
        (
            "take 1,000 random rows (cold)",
            natal_take,
            p.get("parquet_take.parquet_take_ms"),
        ),
        (
            "count(*)",
            natal_count,
            p.get("parquet_count.parquet_count_ms"),
        ),
    ] {
        println!(
            "| {query} | {} | {} | {} |",
            ms(natal),
            ms(parquet),
            ratio(natal, parquet)
        );
    }
    println!("\nBytes written per commit as history grows (everything new in the table directory: data, deletion vectors, row-id and segment files, manifest), mean over windows of 10 commits:\n");
    println!("| U | system | commits 1–10 | commits 41–50 | commits 91–100 | last / first window | final manifest |");
    println!("|---|---|---|---|---|---|---|");
    for (system, l) in systems(scale).filter(|(_, l)| l.bytes_per_commit.len() >= 20) {
        let n = l.bytes_per_commit.len();
        let (first, last) = (l.mean_bytes(0, 10), l.mean_bytes(n - 10, n));
        println!(
            "| {} | {system} | {} | {} | {} | {} | {} |",
            l.level,
            bytes(first),
            bytes(l.mean_bytes(40, 50)),
            bytes(last),
            ratio(last, first),
            bytes(Some(l.manifest_bytes as f64)),
        );
    }
    print_movement(scale);
}

/// Opens as seed 000 argues them (O(moved), one GET for the view with a checkpoint), the
/// last commit, and compaction after the updates: natal's figures per U.
fn print_movement(scale: &Scale) {
    println!("\nnatal's movement figures (issue 41): view per moved row; cold opens (time, GET / LIST requests, bytes read) of the latest version, of a version pinned halfway through the updates, and of the latest with a relocation checkpoint (then its cold take, which reads the checkpoint); the last update's commit; compaction after the updates (bytes written, view after):\n");
    println!("| U | moved rows | view | B / moved row | open latest | open pinned | checkpoint (write, size) | open with checkpoint | take 1k cold with checkpoint | last commit | compaction | view after compaction |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let requests = |l: &Level, prefix: &str| {
        let at = |key: &str| l.get(&format!("{prefix}_{key}"));
        format!(
            "{} ({}G+{}L, {})",
            ms(at("ms")),
            at("gets").map_or(0, |v| v as u64),
            at("lists").map_or(0, |v| v as u64),
            bytes(at("bytes_read")),
        )
    };
    for (natal, _) in &scale.levels {
        let moved = natal.get("take_cold.moved_rows");
        let view = natal.get("take_cold.index_bytes");
        let per_row = match (view, moved) {
            (Some(v), Some(m)) if m > 0.0 => format!("{:.2}", v / m),
            _ => "–".into(),
        };
        println!(
            "| {} | {} | {} | {per_row} | {} | {} | {}, {} | {} | {} | {}, {} | {}, {} written | {} |",
            natal.level,
            moved.map_or(0, |m| m as u64),
            bytes(view),
            requests(natal, "open.open"),
            requests(natal, "open_pinned.pinned_open"),
            ms(natal.get("ckpt.checkpoint_ms")),
            bytes(natal.get("ckpt.checkpoint_bytes")),
            requests(natal, "ckpt.open"),
            ms(natal.get("ckpt.take_cold_ms")),
            ms(natal.update_ms.last().copied()),
            bytes(natal.bytes_per_commit.last().map(|&b| b as f64)),
            ms(natal.get("compact.compact_ms")),
            bytes(natal.get("compact.bytes_written")),
            bytes(natal.get("after.index_bytes")),
        );
    }
}

fn level(scale: &Scale, u: u64) -> Option<&(Level, Option<Level>)> {
    scale.levels.iter().find(|(n, _)| n.level == u)
}

pub fn print_targets(scales: &[Scale]) {
    println!("\n### Targets\n");
    println!("| rows | target | measured | met |");
    println!("|---|---|---|---|");
    let verdict = |ok: Option<bool>| match ok {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "not measured",
    };
    for scale in scales {
        for (natal, lance) in scale.levels.iter().filter(|(n, _)| n.level >= 10_000) {
            let view = natal.get("take_cold.index_bytes");
            let index = lance
                .as_ref()
                .and_then(|l| l.get("take_cold.index_cache_bytes"));
            let ok = view.zip(index).map(|(v, i)| v * 10.0 <= i);
            println!(
                "| {} | relocation view ≤ 1/10 of Lance's row-id index, U = {} | {} vs {} | {} |",
                scale.rows,
                natal.level,
                bytes(view),
                bytes(index),
                verdict(ok)
            );
        }
        let before = level(scale, 0).and_then(|(n, _)| n.get("take_cold.take_cold_ms"));
        let after = level(scale, 100_000);
        let natal_after = after.and_then(|(n, _)| n.get("take_cold.take_cold_ms"));
        let lance_after = after
            .and_then(|(_, l)| l.as_ref())
            .and_then(|l| l.get("take_cold.take_cold_ms"));
        let lance_before = level(scale, 0)
            .and_then(|(_, l)| l.as_ref())
            .and_then(|l| l.get("take_cold.take_cold_ms"));
        // Side by side where measured so; the tables' figures were taken minutes apart.
        let (paired_before, paired_after) = match scale.paired_take {
            Some((b, a)) => (Some(b), Some(a)),
            None => (before, natal_after),
        };
        println!(
            "| {} | cold take after 100k updates ≤ 1.2× before{} | {} / {} = {} (Lance {}) | {} |",
            scale.rows,
            if scale.paired_take.is_some() {
                format!(" (alternating processes, median of {PAIRED_RUNS})")
            } else {
                String::new()
            },
            ms(paired_after),
            ms(paired_before),
            ratio(paired_after, paired_before),
            ratio(lance_after, lance_before),
            verdict(paired_after.zip(paired_before).map(|(a, b)| a <= 1.2 * b)),
        );
        println!(
            "| {} | cold take after 100k updates faster than Lance's | {} vs {} | {} |",
            scale.rows,
            ms(natal_after),
            ms(lance_after),
            verdict(natal_after.zip(lance_after).map(|(n, l)| n < l)),
        );
        let scan = scale.parquet.get("scan_plain.scan_plain_ms");
        let parquet = scale.parquet.get("parquet_scan.parquet_scan_ms");
        println!(
            "| {} | filtered scan ≤ 1.1× DataFusion Parquet | {} | {} |",
            scale.rows,
            ratio(scan, parquet),
            verdict(scan.zip(parquet).map(|(s, p)| s <= 1.1 * p)),
        );
        for (natal, _) in scale
            .levels
            .iter()
            .filter(|(n, _)| n.bytes_per_commit.len() >= 20)
        {
            let n = natal.bytes_per_commit.len();
            let (first, last) = (natal.mean_bytes(0, 10), natal.mean_bytes(n - 10, n));
            println!(
                "| {} | bytes per commit independent of history, U = {} | last 10 / first 10 commits = {} | {} |",
                scale.rows,
                natal.level,
                ratio(last, first),
                verdict(first.zip(last).map(|(f, l)| l <= 1.25 * f)),
            );
        }
    }
}

fn level_json(l: &Level) -> Value {
    json!({
        "u": l.level,
        "update_ms": l.update_ms,
        "bytes_per_commit": l.bytes_per_commit,
        "manifest_bytes": l.manifest_bytes,
        "figures": l.figures,
    })
}

pub fn to_json(scales: &[Scale]) -> Value {
    Value::Array(
        scales
            .iter()
            .map(|s| {
                json!({
                    "rows": s.rows,
                    "fragment_rows": s.fragment_rows,
                    "merge_fan_in": s.merge,
                    "paired_take_ms": s.paired_take.map(|(b, a)| json!({"before": b, "after": a})),
                    "parquet": level_json(&s.parquet),
                    "natal": s.levels.iter().map(|(n, _)| level_json(n)).collect::<Vec<_>>(),
                    "lance": s.levels.iter().filter_map(|(_, l)| l.as_ref().map(level_json)).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}
