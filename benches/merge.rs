//! MERGE INTO (issue #20's figures): on three alike tables of `NATAL_BENCH_ROWS` rows
//! (default 10M, `id, val, payload`, fragments of 1M), a source of 100k rows of which half
//! match (every 200th id of a 10M table) and half are new, applied three ways:
//! - `MERGE INTO ... WHEN MATCHED THEN UPDATE ... WHEN NOT MATCHED THEN INSERT ...`;
//! - natal's `Table::upsert("id", ...)` of the same rows;
//! - `UPDATE ... WHERE id % step = 0` then `INSERT ... SELECT` of the new rows (two commits).
//!
//! Prints each one's time and the bytes it wrote (tiered merging off, so only the
//! statement's own files count), and checks the three tables end alike.
//!
//! ```text
//! cargo bench --bench merge
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use common::{bytes_under, env, ms, schema, write_table, Rng};
use datafusion::prelude::SessionContext;

async fn sql(ctx: &SessionContext, text: &str) -> datafusion::error::Result<()> {
    natal::datafusion::sql(ctx, text).await?.collect().await?;
    Ok(())
}

/// The source: `matched` ids every `step` from 0, then as many new ids from `total` on.
fn source_rows(total: i64, step: i64, matched: i64) -> RecordBatch {
    let ids: Vec<i64> = (0..matched)
        .map(|k| k * step)
        .chain((0..matched).map(|k| total + k))
        .collect();
    let payload = StringArray::from_iter_values(ids.iter().map(|i| format!("merged-{i:012}")));
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from(vec![1i64; ids.len()])),
            Arc::new(payload),
        ],
    )
    .expect("source batch")
}

/// `sum(val)`, the row count and `max(id)` of `table`: the three ways must agree.
async fn summary(ctx: &SessionContext, table: &str) -> datafusion::error::Result<String> {
    let frame = ctx
        .sql(&format!(
            "SELECT sum(val) AS s, count(*) AS n, max(id) AS m, count(DISTINCT payload) AS p FROM {table}"
        ))
        .await?;
    let batches = frame.collect().await?;
    Ok(arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
}

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let total = env("NATAL_BENCH_ROWS", 10_000_000) as i64;
    let matched = (total / 200).min(50_000);
    let step = total / matched;
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let root = dir.path().to_string_lossy().to_string();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, &root)?;
    sql(&ctx, "SET natal.merge_fan_in = 0").await?;
    for name in ["by_merge", "by_upsert", "by_update_insert"] {
        write_table(
            &ctx,
            &format!("{root}/{name}"),
            total as u64,
            1_000_000,
            &mut Rng(7),
        )
        .await?;
    }
    let source = source_rows(total, step, matched);
    let (store, path) =
        natal::datafusion::resolve_location(ctx.runtime_env().as_ref(), &format!("{root}/src"))?;
    let src = natal::Table::create(store, path, &schema(), Default::default()).await?;
    src.append(vec![source.clone()]).await?;
    println!(
        "{total} rows, source of {} rows ({matched} matched)\n",
        source.num_rows()
    );
    println!("| way | commits | time | bytes written |");
    println!("|---|---|---|---|");

    let dir_of = |name: &str| dir.path().join(name);
    let before = bytes_under(&dir_of("by_merge"));
    let start = Instant::now();
    sql(
        &ctx,
        "MERGE INTO by_merge USING src ON by_merge.id = src.id \
         WHEN MATCHED THEN UPDATE SET val = src.val, payload = src.payload \
         WHEN NOT MATCHED THEN INSERT (id, val, payload) VALUES (src.id, src.val, src.payload)",
    )
    .await?;
    let merge_ms = ms(start);
    let merge_bytes = bytes_under(&dir_of("by_merge")) - before;
    println!("| MERGE INTO | 1 | {merge_ms:.0} ms | {merge_bytes} |");

    let (store, path) = natal::datafusion::resolve_location(
        ctx.runtime_env().as_ref(),
        &format!("{root}/by_upsert"),
    )?;
    let upsert_table = natal::Table::open(store, path).with_merge(None);
    let before = bytes_under(&dir_of("by_upsert"));
    let start = Instant::now();
    upsert_table.upsert("id", vec![source.clone()]).await?;
    let upsert_ms = ms(start);
    let upsert_bytes = bytes_under(&dir_of("by_upsert")) - before;
    println!(
        "| `Table::upsert` | 1 | {upsert_ms:.0} ms ({:.2}× MERGE) | {upsert_bytes} ({:.2}× MERGE) |",
        upsert_ms / merge_ms,
        upsert_bytes as f64 / merge_bytes as f64
    );

    let before = bytes_under(&dir_of("by_update_insert"));
    let start = Instant::now();
    sql(
        &ctx,
        &format!(
            "UPDATE by_update_insert SET val = 1, payload = concat('merged-', lpad(CAST(id AS VARCHAR), 12, '0')) \
             WHERE id % {step} = 0 AND id < {}",
            matched * step
        ),
    )
    .await?;
    sql(
        &ctx,
        &format!("INSERT INTO by_update_insert SELECT * FROM src WHERE id >= {total}"),
    )
    .await?;
    let two_ms = ms(start);
    let two_bytes = bytes_under(&dir_of("by_update_insert")) - before;
    println!(
        "| UPDATE + INSERT | 2 | {two_ms:.0} ms ({:.2}× MERGE) | {two_bytes} ({:.2}× MERGE) |",
        two_ms / merge_ms,
        two_bytes as f64 / merge_bytes as f64
    );

    let expected = summary(&ctx, "by_merge").await?;
    for other in ["by_upsert", "by_update_insert"] {
        assert_eq!(
            summary(&ctx, other).await?,
            expected,
            "{other} ends as MERGE does"
        );
    }
    Ok(())
}
