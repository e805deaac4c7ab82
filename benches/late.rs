//! Late materialization (issue #41, item 3): a filtered scan of wide rows through natal vs
//! DataFusion's Parquet listing table with `datafusion.execution.parquet.pushdown_filters`
//! off (its default) and on.
//!
//! One table of `NATAL_BENCH_ROWS` rows (default 1M): `key int64` counting up, `f int64`
//! uniform in 0..1M, `s` a 1 KiB string (hex digits), `b` a 4 KiB binary (random bytes).
//! natal writes it (`Table::append_stream`); DataFusion's `COPY` writes the same rows (the
//! generator's again) as Parquet with its defaults but for row groups of 128Ki rows (its default of 1M rows would
//! buffer 5 GiB per row group; natal's are about 50Ki rows at this width).
//!
//! Prints, for `SELECT key, s, b WHERE f < X` keeping 0.01%, 1%, 50% and 90% of rows, the
//! median of `NATAL_LATE_RUNS` runs (default 5; batches streamed and dropped, not held), the
//! rows out and the bytes the scan read (natal's `bytes_read`, Parquet's `bytes_scanned`),
//! natal in two steps and with `natal.late_materialization` off. `NATAL_LATE_DATA=dir` keeps
//! the tables in `dir` for later runs to read again. `NATAL_LATE_ONE_COPY=1` keeps one copy
//! on disk at a time (10M rows are 43 GiB a copy): natal's table is measured and removed
//! before the Parquet files are written from the same generator.
//!
//! ```text
//! NATAL_BENCH_DIR=/some/disk cargo bench --bench late
//! NATAL_BENCH_ROWS=10000000 NATAL_LATE_RUNS=3 NATAL_LATE_ONE_COPY=1 cargo bench --bench late
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use common::{env, median, ms, Rng};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::error::Result as DfResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;

/// Bytes of `s` and `b` per row.
const STRING_BYTES: usize = 1024;
const BINARY_BYTES: usize = 4096;
/// Rows per generated batch.
const BATCH_ROWS: u64 = 4096;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("f", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
        Field::new("b", DataType::Binary, false),
    ]))
}

/// Rows `start..start + len` of the wide table.
fn wide_rows(start: u64, len: u64, rng: &mut Rng) -> RecordBatch {
    let keys = Int64Array::from_iter_values(start as i64..(start + len) as i64);
    let f = Int64Array::from_iter_values((0..len).map(|_| rng.below(1_000_000) as i64));
    let strings = StringArray::from_iter_values((0..len).map(|_| {
        let mut s = String::with_capacity(STRING_BYTES);
        for _ in 0..STRING_BYTES / 16 {
            s.push_str(&format!("{:016x}", rng.next()));
        }
        s
    }));
    let values: Vec<Vec<u8>> = (0..len)
        .map(|_| {
            (0..BINARY_BYTES / 8)
                .flat_map(|_| rng.next().to_le_bytes())
                .collect()
        })
        .collect();
    let binaries = BinaryArray::from_iter_values(values.iter());
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(keys),
            Arc::new(f),
            Arc::new(strings),
            Arc::new(binaries),
        ],
    )
    .expect("valid batch")
}

/// The sum of metric `name` over every node of `plan`.
fn metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    let own = (plan.metrics())
        .and_then(|m| m.sum_by_name(name))
        .map_or(0, |v| v.as_usize());
    own + (plan.children().into_iter())
        .map(|c| metric(c, name))
        .sum::<usize>()
}

struct Measured {
    ms: f64,
    rows: usize,
    bytes: usize,
}

/// Median time of `runs` runs of `sql`, its rows and the bytes its scan read (`bytes_metric`).
async fn measure(ctx: &SessionContext, sql: &str, bytes_metric: &str, runs: usize) -> Measured {
    let mut times = Vec::with_capacity(runs);
    let (mut rows, mut bytes) = (0, 0);
    for _ in 0..runs {
        let start = Instant::now();
        let plan = (ctx.sql(sql).await.expect("plan"))
            .create_physical_plan()
            .await
            .expect("physical plan");
        let mut stream = execute_stream(plan.clone(), ctx.task_ctx()).expect("execute");
        rows = 0;
        while let Some(batch) = stream.next().await {
            rows += batch.expect("batch").num_rows();
        }
        times.push(ms(start));
        bytes = metric(&plan, bytes_metric);
    }
    Measured {
        ms: median(times),
        rows,
        bytes,
    }
}

/// The wide table's `total` rows, the same in every call.
fn generated(total: u64) -> impl futures::Stream<Item = RecordBatch> + Send {
    futures::stream::unfold((0u64, Rng(41)), move |(written, mut rng)| async move {
        (written < total).then(|| {
            let len = BATCH_ROWS.min(total - written);
            (wide_rows(written, len, &mut rng), (written + len, rng))
        })
    })
}

/// The generated rows as a DataFusion table (one partition), for `COPY` to write.
#[derive(Debug)]
struct GeneratedRows {
    total: u64,
    schema: SchemaRef,
}

impl PartitionStream for GeneratedRows {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let rows = generated(self.total).map(Ok);
        Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), rows))
    }
}

/// Writes `total` rows as the natal table `t` under `root`.
async fn write_natal(ctx: &SessionContext, root: &str, total: u64) -> DfResult<()> {
    let start = Instant::now();
    let (store, path) =
        natal::datafusion::resolve_location(ctx.runtime_env().as_ref(), &format!("{root}/t"))?;
    let table =
        natal::Table::create(store, path, &schema(), natal::TableOptions::default()).await?;
    let batches = generated(total).map(Ok::<_, natal::Error>);
    table.append_stream(Box::pin(batches)).await?;
    println!("natal wrote {total} rows in {:.1} s", ms(start) / 1e3);
    Ok(())
}

/// Writes the same rows as Parquet in `plain_dir`, by DataFusion's `COPY`.
async fn write_parquet(ctx: &SessionContext, plain_dir: &str, total: u64) -> DfResult<()> {
    let start = Instant::now();
    std::fs::create_dir_all(plain_dir)?;
    let rows = GeneratedRows {
        total,
        schema: schema(),
    };
    let table = StreamingTable::try_new(schema(), vec![Arc::new(rows)])?;
    ctx.register_table("generated", Arc::new(table))?;
    let copy = format!("COPY (SELECT * FROM generated) TO '{plain_dir}/' STORED AS PARQUET");
    ctx.sql(&copy).await?.collect().await?;
    ctx.deregister_table("generated")?;
    println!(
        "DataFusion wrote them as Parquet in {:.1} s",
        ms(start) / 1e3
    );
    Ok(())
}

/// The filters measured: `f < bound` keeping about this share of rows.
const KEPT: [(&str, i64); 4] = [
    ("0.01%", 100),
    ("1%", 10_000),
    ("50%", 500_000),
    ("90%", 900_000),
];

fn query(table: &str, below: i64) -> String {
    format!("SELECT key, s, b FROM {table} WHERE f < {below}")
}

/// natal in two steps and in one, per filter of [`KEPT`].
async fn measure_natal(ctx: &SessionContext, runs: usize) -> DfResult<Vec<[Measured; 2]>> {
    let mut figures = Vec::new();
    for (_, below) in KEPT {
        let natal = measure(ctx, &query("t", below), "bytes_read", runs).await;
        ctx.sql("SET natal.late_materialization = false").await?;
        let one_step = measure(ctx, &query("t", below), "bytes_read", runs).await;
        ctx.sql("SET natal.late_materialization = true").await?;
        figures.push([natal, one_step]);
    }
    Ok(figures)
}

/// DataFusion's Parquet with `pushdown_filters` off and on, per filter of [`KEPT`].
async fn measure_parquet(plain_dir: &str, runs: usize) -> DfResult<Vec<[Measured; 2]>> {
    let listing =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let mut sessions = Vec::new();
    for pushdown in [false, true] {
        let config = SessionConfig::new()
            .set_bool("datafusion.execution.parquet.pushdown_filters", pushdown);
        let ctx = SessionContext::new_with_config(config);
        let (location, options) = (format!("{plain_dir}/"), listing.clone());
        ctx.register_listing_table("plain", location, options, Some(schema()), None)
            .await?;
        sessions.push(ctx);
    }
    let mut figures = Vec::new();
    for (_, below) in KEPT {
        let off = measure(&sessions[0], &query("plain", below), "bytes_scanned", runs).await;
        let on = measure(&sessions[1], &query("plain", below), "bytes_scanned", runs).await;
        figures.push([off, on]);
    }
    Ok(figures)
}

fn print_figures(natal: &[[Measured; 2]], parquet: &[[Measured; 2]]) {
    println!();
    println!(
        "| rows kept | natal | natal, one step | Parquet, pushdown off | Parquet, pushdown on \
         | natal / one step | natal / off | natal / on |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let cell = |m: &Measured| {
        format!(
            "{:.1} ms, {:.1} MiB",
            m.ms,
            m.bytes as f64 / (1 << 20) as f64
        )
    };
    for (((label, _), [natal, one_step]), [off, on]) in KEPT.iter().zip(natal).zip(parquet) {
        for other in [one_step, off, on] {
            assert_eq!(natal.rows, other.rows, "natal and Parquet answer alike");
        }
        println!(
            "| {label} ({} rows) | {} | {} | {} | {} | {:.2}× | {:.2}× | {:.2}× |",
            natal.rows,
            cell(natal),
            cell(one_step),
            cell(off),
            cell(on),
            natal.ms / one_step.ms,
            natal.ms / off.ms,
            natal.ms / on.ms,
        );
    }
}

#[tokio::main]
async fn main() -> DfResult<()> {
    let total = env("NATAL_BENCH_ROWS", 1_000_000);
    let runs = env("NATAL_LATE_RUNS", 5).max(1) as usize;
    // One copy on disk at a time: natal's is measured and removed before Parquet's is written.
    let one_copy = std::env::var("NATAL_LATE_ONE_COPY").as_deref() == Ok("1");
    // `NATAL_LATE_DATA`: a directory the tables are kept in and read again by later runs.
    let (_temporary, root) = match std::env::var("NATAL_LATE_DATA") {
        Ok(_) if one_copy => panic!("NATAL_LATE_ONE_COPY removes the tables NATAL_LATE_DATA keeps"),
        Ok(kept) => (None, std::path::PathBuf::from(kept)),
        Err(_) => {
            let base = std::env::var("NATAL_BENCH_DIR")
                .map_or(std::env::temp_dir(), std::path::PathBuf::from);
            let dir = tempfile::tempdir_in(base)?;
            let root = dir.path().to_path_buf();
            (Some(dir), root)
        }
    };
    let written = root.join("plain").exists();
    let root = root.to_string_lossy().to_string();
    let config = SessionConfig::new().set_usize(
        "datafusion.execution.parquet.max_row_group_size",
        128 * 1024,
    );
    let ctx = SessionContext::new_with_config(config);
    natal::datafusion::register(&ctx, &root)?;
    let plain_dir = format!("{root}/plain");
    let natal_dir = std::path::Path::new(&root).join("t");
    let gib = |dir: &std::path::Path| common::bytes_under(dir) as f64 / (1u64 << 30) as f64;
    if !written {
        write_natal(&ctx, &root, total).await?;
    }
    println!("natal on disk: {:.2} GiB", gib(&natal_dir));
    let natal = measure_natal(&ctx, runs).await?;
    if one_copy {
        std::fs::remove_dir_all(&natal_dir)?;
    }
    if !written {
        write_parquet(&ctx, &plain_dir, total).await?;
    }
    println!(
        "Parquet on disk: {:.2} GiB",
        gib(std::path::Path::new(&plain_dir))
    );
    let parquet = measure_parquet(&plain_dir, runs).await?;
    print_figures(&natal, &parquet);
    Ok(())
}
