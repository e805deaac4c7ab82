//! Late materialization (issue #41, item 3): a filtered scan of wide rows through natal vs
//! DataFusion's Parquet listing table with `datafusion.execution.parquet.pushdown_filters`
//! off (its default) and on.
//!
//! One table of `NATAL_BENCH_ROWS` rows (default 1M): `key int64` counting up, `f int64`
//! uniform in 0..1M, `s` a 1 KiB string (hex digits), `b` a 4 KiB binary (random bytes).
//! natal writes it (`Table::append_stream`); DataFusion's `COPY` writes the same rows as
//! Parquet with its defaults but for row groups of 128Ki rows (its default of 1M rows would
//! buffer 5 GiB per row group; natal's are about 50Ki rows at this width).
//!
//! Prints, for `SELECT key, s, b WHERE f < X` keeping 0.01%, 1%, 50% and 90% of rows, the
//! median of [`RUNS`] runs (batches streamed and dropped, not held), the rows out and the
//! bytes the scan read (natal's `bytes_read`, Parquet's `bytes_scanned`), natal in two steps
//! and with `natal.late_materialization` off. `NATAL_LATE_DATA=dir` keeps the tables in
//! `dir` for later runs to read again.
//!
//! ```text
//! NATAL_BENCH_DIR=/some/disk cargo bench --bench late
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use common::{env, median, ms, Rng};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;

/// Runs per measurement; the reported figure is their median.
const RUNS: usize = 5;
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

/// Median time of [`RUNS`] runs of `sql`, its rows and the bytes its scan read (`bytes_metric`).
async fn measure(ctx: &SessionContext, sql: &str, bytes_metric: &str) -> Measured {
    let mut times = Vec::with_capacity(RUNS);
    let (mut rows, mut bytes) = (0, 0);
    for _ in 0..RUNS {
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

/// Writes `total` rows as the natal table `t` under `root`, then as Parquet in `plain`.
async fn write_tables(
    ctx: &SessionContext,
    root: &str,
    total: u64,
) -> datafusion::error::Result<()> {
    let start = Instant::now();
    let (store, path) =
        natal::datafusion::resolve_location(ctx.runtime_env().as_ref(), &format!("{root}/t"))?;
    let table =
        natal::Table::create(store, path, &schema(), natal::TableOptions::default()).await?;
    let batches = futures::stream::unfold((0u64, Rng(41)), move |(written, mut rng)| async move {
        (written < total).then(|| {
            let len = BATCH_ROWS.min(total - written);
            let batch = wide_rows(written, len, &mut rng);
            (Ok::<_, natal::Error>(batch), (written + len, rng))
        })
    });
    table.append_stream(Box::pin(batches)).await?;
    println!("natal wrote {total} rows in {:.1} s", ms(start) / 1e3);

    let start = Instant::now();
    let plain_dir = format!("{root}/plain");
    std::fs::create_dir_all(&plain_dir)?;
    let copy = format!("COPY (SELECT * FROM t) TO '{plain_dir}/' STORED AS PARQUET");
    ctx.sql(&copy).await?.collect().await?;
    println!(
        "DataFusion wrote them as Parquet in {:.1} s",
        ms(start) / 1e3
    );
    Ok(())
}

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let total = env("NATAL_BENCH_ROWS", 1_000_000);
    // `NATAL_LATE_DATA`: a directory the tables are kept in and read again by later runs.
    let (_temporary, root) = match std::env::var("NATAL_LATE_DATA") {
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
    if !written {
        write_tables(&ctx, &root, total).await?;
    }
    let listing =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    ctx.register_listing_table(
        "plain",
        format!("{plain_dir}/"),
        listing.clone(),
        Some(schema()),
        None,
    )
    .await?;
    let pushdown = SessionContext::new_with_config(
        SessionConfig::new().set_bool("datafusion.execution.parquet.pushdown_filters", true),
    );
    pushdown
        .register_listing_table(
            "plain",
            format!("{plain_dir}/"),
            listing,
            Some(schema()),
            None,
        )
        .await?;
    println!(
        "on disk: natal {:.2} GiB, Parquet {:.2} GiB",
        common::bytes_under(&std::path::Path::new(&root).join("t")) as f64 / (1u64 << 30) as f64,
        common::bytes_under(std::path::Path::new(&plain_dir)) as f64 / (1u64 << 30) as f64,
    );

    println!();
    println!(
        "| rows kept | natal | natal, one step | Parquet, pushdown off | Parquet, pushdown on \
         | natal / one step | natal / off | natal / on |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (label, below) in [
        ("0.01%", 100),
        ("1%", 10_000),
        ("50%", 500_000),
        ("90%", 900_000),
    ] {
        let query = |t: &str| format!("SELECT key, s, b FROM {t} WHERE f < {below}");
        let natal = measure(&ctx, &query("t"), "bytes_read").await;
        ctx.sql("SET natal.late_materialization = false").await?;
        let one_step = measure(&ctx, &query("t"), "bytes_read").await;
        ctx.sql("SET natal.late_materialization = true").await?;
        let off = measure(&ctx, &query("plain"), "bytes_scanned").await;
        let on = measure(&pushdown, &query("plain"), "bytes_scanned").await;
        for other in [&one_step, &off, &on] {
            assert_eq!(natal.rows, other.rows, "natal and Parquet answer alike");
        }
        let cell = |m: &Measured| {
            format!(
                "{:.1} ms, {:.1} MiB",
                m.ms,
                m.bytes as f64 / (1 << 20) as f64
            )
        };
        println!(
            "| {label} ({} rows) | {} | {} | {} | {} | {:.2}× | {:.2}× | {:.2}× |",
            natal.rows,
            cell(&natal),
            cell(&one_step),
            cell(&off),
            cell(&on),
            natal.ms / one_step.ms,
            natal.ms / off.ms,
            natal.ms / on.ms,
        );
    }
    Ok(())
}
