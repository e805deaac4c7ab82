//! What the benchmarks share: a deterministic generator and the benchmark table's rows.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The allocator the `natal` binary and datafusion-cli run with, for natal and the peers
/// beside it in the same process alike: glibc's maps and unmaps a scan's batches of wide
/// values anew each time, a cost of the allocator, not of either reader (stop 59).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// SplitMix64: a tiny deterministic generator, so runs are comparable.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `id int64, val int64, payload ~20-byte string`.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("val", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

/// Rows `start..start + len`: `id` counts up, `val` is uniform in 0..1M.
pub fn rows(start: i64, len: i64, rng: &mut Rng) -> RecordBatch {
    let ids = Int64Array::from_iter_values(start..start + len);
    let vals = Int64Array::from_iter_values((0..len).map(|_| rng.below(1_000_000) as i64));
    let payload =
        StringArray::from_iter_values((start..start + len).map(|i| format!("payload-{i:012}")));
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(ids), Arc::new(vals), Arc::new(payload)],
    )
    .expect("valid batch")
}

/// A value of an environment variable, or `default`.
#[allow(dead_code)] // not every bench reads one
pub fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The id natal gave the `row`-th row written to a table of `fragment_rows`-row fragments:
/// its birth address.
#[allow(dead_code)] // not every bench takes by id
pub fn birth_id(row: u64, fragment_rows: u64) -> natal::RowId {
    natal::RowAddress::new((row / fragment_rows) as u32, (row % fragment_rows) as u32)
        .as_native_id()
}

/// The update the benchmarks apply: `val = val + 1`.
#[allow(dead_code)] // not every bench updates rows
pub fn bump_val(batch: &RecordBatch) -> natal::Result<RecordBatch> {
    use arrow::array::AsArray;
    let vals: Int64Array = batch
        .column(1)
        .as_primitive::<arrow::datatypes::Int64Type>()
        .unary(|v| v + 1);
    let user: Vec<usize> = (0..3).collect(); // then `_rowid` and `_rowaddr`
    Ok(RecordBatch::try_new(
        Arc::new(batch.schema().project(&user)?),
        vec![
            batch.column(0).clone(),
            Arc::new(vals),
            batch.column(2).clone(),
        ],
    )?)
}

/// Milliseconds since `start`.
#[allow(dead_code)] // not every bench times by hand
pub fn ms(start: std::time::Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Runs `sql` to completion: its time in milliseconds and the rows it returned.
#[allow(dead_code)] // not every bench goes through SQL
pub async fn timed_sql(ctx: &datafusion::prelude::SessionContext, sql: &str) -> (f64, usize) {
    let start = std::time::Instant::now();
    let batches = ctx
        .sql(sql)
        .await
        .expect("plan")
        .collect()
        .await
        .expect("run");
    (ms(start), batches.iter().map(RecordBatch::num_rows).sum())
}

/// Creates the natal table at `location` with `total` of the benchmark's rows (drawn from
/// `rng`) in fragments of `fragment_rows`, appended as one stream.
#[allow(dead_code)] // not every bench writes through a session's store
pub async fn write_table(
    ctx: &datafusion::prelude::SessionContext,
    location: &str,
    total: u64,
    fragment_rows: u64,
    rng: &mut Rng,
) -> datafusion::error::Result<()> {
    let (store, path) = natal::datafusion::resolve_location(ctx.runtime_env().as_ref(), location)?;
    let table = natal::Table::create(
        store,
        path,
        &schema(),
        natal::TableOptions {
            max_rows_per_fragment: fragment_rows,
            ..Default::default()
        },
    )
    .await?;
    let mut batches = Vec::new();
    let mut written = 0u64;
    while written < total {
        let len = (total - written).min(65_536) as i64;
        batches.push(Ok::<_, natal::Error>(rows(written as i64, len, rng)));
        written += len as u64;
    }
    table
        .append_stream(Box::pin(futures::stream::iter(batches)))
        .await?;
    Ok(())
}

/// The median of `times` (NaN for none).
#[allow(dead_code)] // not every bench takes medians
pub fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

/// How many files are under `dir`.
#[allow(dead_code)] // not every bench counts what it wrote
pub fn files_under(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => files_under(&e.path()),
            _ => 1,
        })
        .sum()
}

/// Bytes of every file under `dir`.
#[allow(dead_code)] // not every bench measures what it wrote
pub fn bytes_under(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// Runs `benches/<script>` (a peer's side of a bench) with the interpreter `python` and
/// `args`: the JSON object it printed, or `None` (its error told) if it failed.
#[allow(dead_code)] // not every bench runs a peer
pub fn python_json(python: &str, script: &str, args: &[&str]) -> Option<serde_json::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join(script);
    let out = std::process::Command::new(python)
        .arg(path)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "{script} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The number `name` of a peer's JSON answer, if there is one.
#[allow(dead_code)] // not every bench runs a peer
pub fn json_number(answer: &Option<serde_json::Value>, name: &str) -> Option<f64> {
    answer.as_ref()?.get(name)?.as_f64()
}
