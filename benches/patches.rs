//! Row patches (issue 63's figures): a table of `NATAL_BENCH_ROWS` rows (default 100,000;
//! fragments of 25,000) of `id`, a short `label`, `score`, a `NATAL_BENCH_DIM`-float
//! embedding `emb` (default 768) and a blob column `thumb` of `NATAL_BENCH_THUMB` random
//! bytes a row (default 4096, the issue's thumbnails; 0 leaves the column out), about 720 MB
//! at the default rows (the issue's 1M rows: `NATAL_BENCH_ROWS=1000000`), on a local
//! directory. Then:
//! - relabelling 1%, 10% and 50% of the rows (`label = 'x'`), scattered (`id % 100 < p`) or
//!   clustered (`id < n·p`), each on its own shallow clone of the table: the bytes written
//!   and the time of natal's SQL `UPDATE` writing row patches (`natal.patch_max_share` 1)
//!   beside the same `UPDATE` rewriting the rows (share 0), and the relocation view's
//!   entries after each; Lance 14.0.2's `update` on the same rows
//!   (`benches/lance_patches.py`, interpreter `NATAL_BENCH_PYTHON`), each on its own copy;
//! - reads with 0, 1 (10% scattered) and 10 (that, then 9 of 1%) patch generations, each
//!   beside the same values compacted (a shallow clone of that version, compacted): a full
//!   scan of `label` and `score` and one of every column, a filtered scan (`label = 'x'`),
//!   and takes of 1,000 ids (of `id`, `label` and `score`, and of whole rows) through a cold
//!   handle (each the median of `NATAL_BENCH_RUNS`, default 3); the compaction's time.
//!
//! ```text
//! NATAL_BENCH_PYTHON=/path/to/venv/bin/python cargo bench --bench patches
//! NATAL_PATCH_WRITES=0 cargo bench --bench patches   # the reads only
//! NATAL_PATCH_READS=narrow,take cargo bench --bench patches   # some of: narrow, every, filtered, take, whole
//! ```

#[path = "common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array};
use arrow::array::{LargeBinaryArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use common::{bytes_under, env, json_number, median, ms, python_json, Rng};
use datafusion::prelude::SessionContext;
use natal::{RowAddress, RowId, ScanRequest, Table};

const FRAGMENT_ROWS: u64 = 25_000;

/// The rows' shape: the embedding's floats and the thumbnail's bytes (none: no column).
#[derive(Clone, Copy)]
struct Shape {
    dim: i32,
    thumb: usize,
}

fn schema(shape: Shape) -> Arc<Schema> {
    let item = Arc::new(Field::new_list_field(DataType::Float32, true));
    let mut fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("label", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
        Field::new("emb", DataType::FixedSizeList(item, shape.dim), true),
    ];
    if shape.thumb > 0 {
        let blob = HashMap::from([("natal.blob".to_string(), "true".to_string())]);
        fields.push(Field::new("thumb", DataType::LargeBinary, true).with_metadata(blob));
    }
    Arc::new(Schema::new(fields))
}

fn rows(start: u64, len: u64, shape: Shape, rng: &mut Rng) -> RecordBatch {
    let dim = shape.dim;
    let ids = start..start + len;
    let floats: Float32Array = (0..len * dim as u64)
        .map(|_| Some(rng.below(1 << 20) as f32 / (1 << 20) as f32))
        .collect();
    let item = Arc::new(Field::new_list_field(DataType::Float32, true));
    let emb = FixedSizeListArray::new(item, dim, Arc::new(floats), None);
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(ids.clone().map(|i| i as i64))),
        Arc::new(StringArray::from_iter_values(
            ids.clone().map(|i| format!("l{}", i % 97)),
        )),
        Arc::new(Float64Array::from_iter_values(ids.map(|i| i as f64 * 0.5))),
        Arc::new(emb),
    ];
    if shape.thumb > 0 {
        // Incompressible bytes, as a JPEG's are.
        let thumbs: LargeBinaryArray = (0..len)
            .map(|_| {
                let bytes: Vec<u8> = (0..shape.thumb.div_ceil(8))
                    .flat_map(|_| rng.next().to_le_bytes())
                    .take(shape.thumb)
                    .collect();
                Some(bytes)
            })
            .collect();
        columns.push(Arc::new(thumbs));
    }
    RecordBatch::try_new(schema(shape), columns).expect("rows")
}

/// The rows `pattern` picks at `percent`%: scattered `id % 100 < p`, or clustered `id < n·p`.
fn picked(pattern: &str, percent: u64, total: u64) -> (Vec<u64>, String) {
    match pattern {
        "scattered" => (
            (0..total).filter(|i| i % 100 < percent).collect(),
            format!("id % 100 < {percent}"),
        ),
        _ => {
            let end = total * percent / 100;
            ((0..end).collect(), format!("id < {end}"))
        }
    }
}

fn id_of(row: u64) -> RowId {
    RowAddress::new((row / FRAGMENT_ROWS) as u32, (row % FRAGMENT_ROWS) as u32).as_native_id()
}

async fn sql(ctx: &SessionContext, query: &str) -> Vec<RecordBatch> {
    natal::datafusion::sql(ctx, query)
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// Gives `label` of `rows` the value `label` in one patch.
async fn patch(table: &Table, rows: &[u64], label: &str) -> natal::Result<()> {
    let ids: Vec<RowId> = rows.iter().map(|&r| id_of(r)).collect();
    let labels: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|_| label)));
    let values = RecordBatch::try_from_iter([("label", labels)])?;
    table.patch_rows(&ids, values).await?;
    Ok(())
}

async fn relocation_entries(table: &Table) -> usize {
    let latest = table.latest().await.expect("latest");
    latest
        .relocation_view()
        .await
        .expect("view")
        .entries()
        .len()
}

/// The median times of `NATAL_BENCH_RUNS` runs of each of two queries (patched, folded),
/// after one run of each not timed (a handle's first read of each file's footer is not what
/// is compared). The runs alternate and each pair swaps which goes first: timed one after
/// the other, the second of two reads of the same files measured 1.2-1.3x faster.
async fn timed_pair(ctx: &SessionContext, queries: [String; 2]) -> [f64; 2] {
    for query in &queries {
        sql(ctx, query).await;
    }
    alternating(|which| {
        let query = queries[which].clone();
        async move {
            let start = Instant::now();
            sql(ctx, &query).await;
            ms(start)
        }
    })
    .await
}

/// Runs `run(0)` and `run(1)` `NATAL_BENCH_RUNS` times each, alternating which goes first,
/// and gives the median of each one's results.
async fn alternating<F, Fut>(mut run: F) -> [f64; 2]
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = f64>,
{
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..env("NATAL_BENCH_RUNS", 3) {
        let first = (round % 2) as usize;
        for which in [first, 1 - first] {
            times[which].push(run(which).await);
        }
    }
    let [a, b] = times;
    [median(a), median(b)]
}

/// The median times of a take of 1,000 ids (the same each run) through a fresh handle of
/// each of two tables, of `id`, `label` and `score`, or of whole rows; alternating as
/// [`timed_pair`] does.
async fn cold_take_pair(
    ctx: &SessionContext,
    locations: [String; 2],
    total: u64,
    whole: bool,
) -> [f64; 2] {
    let mut rng = Rng(11);
    let mut ids: Vec<RowId> = (0..1000).map(|_| id_of(rng.below(total))).collect();
    ids.sort_unstable();
    ids.dedup();
    let ids = &ids;
    alternating(|which| {
        let location = locations[which].clone();
        async move {
            let table = natal::datafusion::open_table(ctx, &location).expect("open");
            let start = Instant::now();
            let request = ScanRequest {
                columns: (!whole).then(|| vec!["id".into(), "label".into(), "score".into()]),
                ..Default::default()
            };
            table
                .latest()
                .await
                .expect("latest")
                .take(ids, request)
                .await
                .expect("take");
            ms(start)
        }
    })
    .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total = env("NATAL_BENCH_ROWS", 100_000);
    let dim = env("NATAL_BENCH_DIM", 768) as i32;
    let thumb = env("NATAL_BENCH_THUMB", 4096) as usize;
    let shape = Shape { dim, thumb };
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let root = dir.path().to_string_lossy().to_string();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, &root)?;
    let options = natal::TableOptions {
        max_rows_per_fragment: FRAGMENT_ROWS,
        ..Default::default()
    };
    let location = format!("{root}/t");
    let (store, path) = natal::datafusion::resolve_location(ctx.runtime_env().as_ref(), &location)?;
    let table = Table::create(store, path, &schema(shape), options).await?;
    let mut rng = Rng(7);
    let batches: Vec<natal::Result<RecordBatch>> = (0..total)
        .step_by(10_000)
        .map(|start| Ok(rows(start, 10_000.min(total - start), shape, &mut rng)))
        .collect();
    table
        .append_stream(Box::pin(futures::stream::iter(batches)))
        .await?;
    let table_bytes = bytes_under(&dir.path().join("t"));
    let python = std::env::var("NATAL_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let lance_dir = dir.path().join("lance");
    let lance_dir = lance_dir.to_string_lossy().to_string();
    let (rows_arg, dim_arg, thumb_arg) = (total.to_string(), dim.to_string(), thumb.to_string());
    let writes = std::env::var("NATAL_PATCH_WRITES").as_deref() != Ok("0");
    let lance_written = match writes {
        true => python_json(
            &python,
            "lance_patches.py",
            &[
                "write", "--dir", &lance_dir, "--rows", &rows_arg, "--dim", &dim_arg, "--thumb",
                &thumb_arg,
            ],
        ),
        false => None,
    };
    println!(
        "table: {total} rows, {dim}-float embeddings, {thumb}-byte thumbnails, {:.1} MB; Lance's {:.1} MB",
        table_bytes as f64 / 1e6,
        json_number(&lance_written, "bytes").unwrap_or(f64::NAN) / 1e6
    );
    println!();
    println!("| rows relabelled | natal UPDATE as patches: bytes, ms | natal UPDATE as rewrite: bytes, ms | Lance update: bytes, ms | changed cells | view entries: patch / rewrite |");
    println!("|---|---|---|---|---|---|");
    let updates = match writes {
        false => Vec::new(),
        true => vec![
            (1, "scattered"),
            (1, "clustered"),
            (10, "scattered"),
            (10, "clustered"),
            (50, "scattered"),
            (50, "clustered"),
        ],
    };
    for (percent, pattern) in updates {
        let (rows, predicate) = picked(pattern, percent, total);
        let mut figures = Vec::new();
        for (kind, share) in [("p", 1), ("u", 0)] {
            let clone = format!("{kind}{percent}{pattern}");
            sql(
                &ctx,
                &format!("SELECT * FROM natal_clone('t', '{clone}', 2, 'shallow')"),
            )
            .await;
            let clone_dir = dir.path().join(&clone);
            let before = bytes_under(&clone_dir);
            let start = Instant::now();
            let handle = natal::datafusion::open_table(&ctx, &format!("{root}/{clone}"))?;
            sql(&ctx, &format!("SET natal.patch_max_share = {share}")).await;
            let update = format!("UPDATE {clone} SET label = 'x' WHERE {predicate}");
            sql(&ctx, &update).await;
            let took = ms(start);
            let written = bytes_under(&clone_dir) - before;
            figures.push((written, took, relocation_entries(&handle).await));
        }
        let lance = python_json(
            &python,
            "lance_patches.py",
            &["update", "--dir", &lance_dir, "--where", &predicate],
        );
        // The new values' bytes (one byte each) and their offsets (4 bytes each).
        let cells = rows.len() as u64 * 5;
        println!(
            "| {percent}% {pattern} | {:.2} MB, {:.0} | {:.2} MB, {:.0} | {:.2} MB, {:.0} | {:.2} MB | {} / {} |",
            figures[0].0 as f64 / 1e6,
            figures[0].1,
            figures[1].0 as f64 / 1e6,
            figures[1].1,
            json_number(&lance, "bytes").unwrap_or(f64::NAN) / 1e6,
            json_number(&lance, "seconds").unwrap_or(f64::NAN) * 1e3,
            cells as f64 / 1e6,
            figures[0].2,
            figures[1].2,
        );
    }

    // Reads through 0, 1 and 10 patch generations, each beside the same values compacted
    // (a clone of that version whose compaction folds the patches).
    sql(&ctx, "SELECT * FROM natal_clone('t', 'r', 2, 'shallow')").await;
    let reads = natal::datafusion::open_table(&ctx, &format!("{root}/r"))?;
    println!();
    println!("| patch generations | full scan (label, score) ms: patched / folded | full scan (every column) ms | filtered scan ms | cold take of 1,000 (id, label, score) ms | cold take of 1,000 whole rows ms | compaction folding them ms |");
    println!("|---|---|---|---|---|---|---|");
    let full = |t: &str| format!("SELECT count(label), sum(score) FROM {t}");
    let full: &dyn Fn(&str) -> String = &full;
    let thumbs = if thumb > 0 { ", count(thumb)" } else { "" };
    let every = move |t: &str| {
        format!("SELECT count(id), count(label), sum(score), count(emb){thumbs} FROM {t}")
    };
    let every: &dyn Fn(&str) -> String = &every;
    let filtered = |t: &str| format!("SELECT count(*) FROM {t} WHERE label = 'x'");
    let filtered: &dyn Fn(&str) -> String = &filtered;
    // `NATAL_PATCH_READS=narrow,take`: only those reads (to profile one).
    let reads_asked = std::env::var("NATAL_PATCH_READS").ok();
    let wanted = |name: &str| {
        (reads_asked.as_deref()).is_none_or(|list| list.split(',').any(|r| r.trim() == name))
    };
    let mut generation = 0;
    for (label, generations) in [("0", 0), ("1 (10%)", 1), ("10 (that, then 9 of 1%)", 10)] {
        while generation < generations {
            let rows: Vec<u64> = match generations {
                1 => picked("scattered", 10, total).0,
                _ => (0..total).filter(|i| i % 100 == 50 + generation).collect(),
            };
            patch(&reads, &rows, "x").await?;
            generation += 1;
        }
        let version = reads.latest().await?.version();
        let folded = format!("f{generations}");
        let clone = format!("SELECT * FROM natal_clone('r', '{folded}', {version}, 'shallow')");
        sql(&ctx, &clone).await;
        let compacting = natal::datafusion::open_table(&ctx, &format!("{root}/{folded}"))?;
        let start = Instant::now();
        let options = natal::CompactOptions {
            target_rows_per_fragment: Some(FRAGMENT_ROWS),
            ..Default::default()
        };
        compacting.compact(options).await?;
        let compaction = ms(start);
        let mut cells = Vec::new();
        for (name, query) in [("narrow", full), ("every", every), ("filtered", filtered)] {
            if !wanted(name) {
                cells.push("–".into());
                continue;
            }
            let [patched, compacted] = timed_pair(&ctx, [query("r"), query(&folded)]).await;
            cells.push(format!("{patched:.1} / {compacted:.1}"));
        }
        for (name, whole) in [("take", false), ("whole", true)] {
            if !wanted(name) {
                cells.push("–".into());
                continue;
            }
            let locations = [format!("{root}/r"), format!("{root}/{folded}")];
            let [patched, compacted] = cold_take_pair(&ctx, locations, total, whole).await;
            cells.push(format!("{patched:.1} / {compacted:.1}"));
        }
        println!("| {label} | {} | {compaction:.0} |", cells.join(" | "));
    }
    Ok(())
}
