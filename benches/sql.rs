//! natal through SQL vs DataFusion's own Parquet table over the same files (issue #3's
//! figures). One table of `NATAL_BENCH_ROWS` rows (default 10M: `id int64, val int64,
//! payload ~20 B`) in fragments of 1M rows is written by natal; DataFusion's listing table is
//! registered over natal's own `data/` directory, so both read identical Parquet files.
//!
//! Prints the median of 5 runs for: a filtered scan (`val > X`, ~1% of rows), a take of
//! 1,000 random rows (natal: `_rowid IN (...)`; Parquet: `id IN (...)`), and `count(*)`.
//!
//! ```text
//! cargo bench --bench sql
//! ```

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::prelude::{SessionConfig, SessionContext};
use natal::rowid::RowAddress;
use natal::table::{Table, TableOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("val", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

async fn median_ms(ctx: &SessionContext, sql: &str) -> (f64, usize) {
    let mut times = Vec::new();
    let mut rows = 0;
    for _ in 0..5 {
        let start = Instant::now();
        let batches = ctx
            .sql(sql)
            .await
            .expect("plan")
            .collect()
            .await
            .expect("run");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        rows = batches.iter().map(RecordBatch::num_rows).sum();
    }
    times.sort_by(f64::total_cmp);
    (times[2], rows)
}

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let total: u64 = std::env::var("NATAL_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let fragment_rows = 1_000_000u64.min(total);
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let root = dir.path().to_string_lossy().to_string();
    let ctx = SessionContext::new_with_config(SessionConfig::new());
    natal::datafusion::register(&ctx, &root)?;
    let table_dir = format!("{root}/t");
    let (store, path) =
        natal::datafusion::resolve_location(ctx.runtime_env().as_ref(), &table_dir)?;
    let table = Table::create(
        store,
        path,
        &schema(),
        TableOptions {
            max_rows_per_fragment: fragment_rows,
            ..Default::default()
        },
    )
    .await?;
    let mut rng = Rng(7);
    let mut batches = Vec::new();
    let mut written = 0u64;
    while written < total {
        let len = (total - written).min(65_536) as i64;
        let start = written as i64;
        batches.push(Ok(RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(start..start + len)),
                Arc::new(Int64Array::from_iter_values(
                    (0..len).map(|_| (rng.next() % 1_000_000) as i64),
                )),
                Arc::new(StringArray::from_iter_values(
                    (start..start + len).map(|i| format!("payload-{i:012}")),
                )),
            ],
        )?));
        written += len as u64;
    }
    table
        .append_stream(Box::pin(futures::stream::iter(batches)))
        .await?;

    // DataFusion's own Parquet table over the very same files.
    let listing =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    ctx.register_listing_table(
        "plain",
        format!("{table_dir}/data/"),
        listing,
        Some(schema()),
        None,
    )
    .await?;

    let ids: Vec<String> = (0..1000)
        .map(|_| {
            let row = rng.next() % total;
            RowAddress::new((row / fragment_rows) as u32, (row % fragment_rows) as u32)
                .as_u64()
                .to_string()
        })
        .collect();
    let rows: Vec<String> = ids
        .iter()
        .map(|id| {
            let id: u64 = id.parse().unwrap_or(0);
            ((id >> 32) * fragment_rows + (id & 0xFFFF_FFFF)).to_string()
        })
        .collect();
    let cases = [
        (
            "filtered scan, val > 990000 (~1%)",
            "SELECT id, val, payload FROM t WHERE val > 990000".to_string(),
            "SELECT id, val, payload FROM plain WHERE val > 990000".to_string(),
        ),
        (
            "take 1,000 random rows",
            format!(
                "SELECT * FROM \"t$rows\" WHERE _rowid IN ({})",
                ids.join(",")
            ),
            format!("SELECT * FROM plain WHERE id IN ({})", rows.join(",")),
        ),
        (
            "count(*)",
            "SELECT count(*) FROM t".to_string(),
            "SELECT count(*) FROM plain".to_string(),
        ),
    ];
    println!("natal vs DataFusion Parquet over the same files: {total} rows, fragments of {fragment_rows}, median of 5\n");
    println!("| query | natal | rows | DataFusion Parquet | rows | natal / Parquet |");
    println!("|---|---|---|---|---|---|");
    for (name, natal_sql, plain_sql) in cases {
        let (natal_ms, natal_rows) = median_ms(&ctx, &natal_sql).await;
        let (plain_ms, plain_rows) = median_ms(&ctx, &plain_sql).await;
        println!(
            "| {name} | {natal_ms:.1} ms | {natal_rows} | {plain_ms:.1} ms | {plain_rows} | {:.2}× |",
            natal_ms / plain_ms
        );
    }
    Ok(())
}
