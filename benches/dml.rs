//! Bulk DML through SQL after updates (issue #17's figures): on tables of 1M and 10M rows
//! (`NATAL_BENCH_SCALES`, comma-separated; fragments of 1M rows, the `id, val, payload`
//! table), the time of
//! - `DELETE ... WHERE id % 100 = 8` (1%) on a fresh table,
//! - `UPDATE ... SET val = val + 1 WHERE id % 10 = 3` (10%) on another,
//! - the same 1% DELETE after that update, which must stay within 2× of the fresh one.
//!
//! Each statement runs once, on its own table, in release mode.
//!
//! ```text
//! cargo bench --bench dml
//! ```

#[path = "common/mod.rs"]
mod common;

use std::time::Instant;

use common::{ms, write_table, Rng};
use datafusion::prelude::SessionContext;

async fn timed(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<(f64, u64)> {
    let start = Instant::now();
    let batches = ctx.sql(sql).await?.collect().await?;
    let count = batches
        .first()
        .and_then(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow::array::UInt64Array>()
                .map(|c| c.value(0))
        })
        .unwrap_or(0);
    Ok((ms(start), count))
}

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let scales: Vec<u64> = std::env::var("NATAL_BENCH_SCALES")
        .ok()
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000_000, 10_000_000]);
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let root = dir.path().to_string_lossy().to_string();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, &root)?;
    println!(
        "| rows | DELETE 1%, fresh | UPDATE 10% | DELETE 1% after the update | after / fresh |"
    );
    println!("|---|---|---|---|---|");
    for total in scales {
        let (fresh, updated) = (format!("fresh_{total}"), format!("updated_{total}"));
        for name in [&fresh, &updated] {
            write_table(
                &ctx,
                &format!("{root}/{name}"),
                total,
                1_000_000,
                &mut Rng(7),
            )
            .await?;
        }
        let (delete_fresh, n1) =
            timed(&ctx, &format!("DELETE FROM {fresh} WHERE id % 100 = 8")).await?;
        let (update, n2) = timed(
            &ctx,
            &format!("UPDATE {updated} SET val = val + 1 WHERE id % 10 = 3"),
        )
        .await?;
        let (delete_after, n3) =
            timed(&ctx, &format!("DELETE FROM {updated} WHERE id % 100 = 8")).await?;
        assert_eq!(n1, n3, "both deletes remove the same rows");
        println!(
            "| {total} | {delete_fresh:.0} ms ({n1} rows) | {update:.0} ms ({n2} rows) | {delete_after:.0} ms | {:.2}× |",
            delete_after / delete_fresh
        );
    }
    Ok(())
}
