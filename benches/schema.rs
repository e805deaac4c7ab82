//! Schema changes (issue #20's figures). One table of `NATAL_BENCH_ROWS` rows (default 10M:
//! `id int64, val int64, payload ~20 B`) in fragments of 1M rows. Prints:
//! - `ALTER TABLE t ADD COLUMN v2 BIGINT DEFAULT id * 2 + val`: its time and the bytes it
//!   wrote, beside the bytes of that column alone written as Parquet by DataFusion's `COPY`
//!   (target ≤ 1.2×) and the time of rewriting the table with the column by CTAS (target
//!   ≤ 0.5×);
//! - `sum(v2)` over the added column (a file of its own per fragment) beside `sum(v2)` over
//!   the CTAS table (the column in the fragment's one file);
//! - the bytes each rename, widening and drop writes (one manifest);
//! - `sum(v32)` over an Int32 column before and after it was widened to BIGINT (target
//!   ≤ 1.1×): two tables made alike, one widened, measured in alternation, median of 11.
//!
//! ```text
//! cargo bench --bench schema
//! ```

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Instant;

use common::{bytes_under, env, files_under, median, ms, write_table, Rng};
use datafusion::prelude::SessionContext;

/// Runs per measurement in alternation; the reported figure is their median.
const RUNS: usize = 11;

/// Files under `dir`.
async fn run(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<f64> {
    let start = Instant::now();
    natal::datafusion::sql(ctx, sql).await?.collect().await?;
    Ok(ms(start))
}

/// Medians of `a` and `b`, run in alternation [`RUNS`] times.
async fn alternating(
    ctx: &SessionContext,
    a: &str,
    b: &str,
) -> datafusion::error::Result<(f64, f64)> {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        ta.push(run(ctx, a).await?);
        tb.push(run(ctx, b).await?);
    }
    Ok((median(ta), median(tb)))
}

/// The bytes and files `sql` writes under `table`.
async fn written_by(
    ctx: &SessionContext,
    table: &Path,
    sql: &str,
) -> datafusion::error::Result<(f64, u64, usize)> {
    let (bytes, files) = (bytes_under(table), files_under(table));
    let time = run(ctx, sql).await?;
    Ok((time, bytes_under(table) - bytes, files_under(table) - files))
}

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let total = env("NATAL_BENCH_ROWS", 10_000_000);
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let root = dir.path().to_string_lossy().to_string();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, &root)?;
    write_table(&ctx, &format!("{root}/t"), total, 1_000_000, &mut Rng(7)).await?;
    let t = dir.path().join("t");
    println!(
        "{total} rows, fragments of 1M, {} bytes of data",
        bytes_under(&t)
    );

    let computed = "id * 2 + val";
    let (add_ms, add_bytes, add_files) = written_by(
        &ctx,
        &t,
        &format!("ALTER TABLE t ADD COLUMN v2 BIGINT DEFAULT {computed}"),
    )
    .await?;
    let alone = dir.path().join("v2_alone.parquet");
    run(
        &ctx,
        &format!(
            "COPY (SELECT {computed} AS v2 FROM t) TO '{}' STORED AS PARQUET",
            alone.display()
        ),
    )
    .await?;
    let alone_bytes = std::fs::metadata(&alone)?.len();
    let ctas_ms = run(
        &ctx,
        &format!("CREATE TABLE c AS SELECT id, val, payload, {computed} AS v2 FROM t"),
    )
    .await?;
    println!();
    println!("| figure | natal | peer | ratio | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| ADD COLUMN v2 BIGINT DEFAULT {computed}: bytes written ({add_files} files) vs the column alone by COPY | {add_bytes} | {alone_bytes} | {:.2}× | ≤ 1.2× |",
        add_bytes as f64 / alone_bytes as f64
    );
    println!(
        "| ADD COLUMN ... DEFAULT: time vs CTAS of the table with the column | {add_ms:.0} ms | {ctas_ms:.0} ms | {:.2}× | ≤ 0.5× |",
        add_ms / ctas_ms
    );
    let (added, inline) =
        alternating(&ctx, "SELECT sum(v2) FROM t", "SELECT sum(v2) FROM c").await?;
    println!(
        "| sum(v2): the added column's own files vs the CTAS table's one file | {added:.1} ms | {inline:.1} ms | {:.2}× | – |",
        added / inline
    );
    let (scan_added, scan_inline) = alternating(
        &ctx,
        "SELECT * FROM t WHERE v2 % 1000 = 7",
        "SELECT * FROM c WHERE v2 % 1000 = 7",
    )
    .await?;
    println!(
        "| every column, filtered on v2: multi-file fragments vs one file | {scan_added:.1} ms | {scan_inline:.1} ms | {:.2}× | – |",
        scan_added / scan_inline
    );

    for change in [
        "ALTER TABLE t RENAME COLUMN payload TO body",
        "ALTER TABLE t DROP COLUMN body",
    ] {
        let (_, bytes, files) = written_by(&ctx, &t, change).await?;
        println!("| `{change}`: bytes written | {bytes} ({files} file) | – | – | one manifest |");
    }

    // Two tables alike with an Int32 column in their fragments' files; one is widened.
    for name in ["narrow", "wide"] {
        run(
            &ctx,
            &format!("CREATE TABLE {name} AS SELECT id, val, CAST(val AS INT) AS v32 FROM t"),
        )
        .await?;
    }
    let wide = dir.path().join("wide");
    let (_, bytes, files) = written_by(
        &ctx,
        &wide,
        "ALTER TABLE wide ALTER COLUMN v32 SET DATA TYPE BIGINT",
    )
    .await?;
    println!("| `ALTER COLUMN v32 SET DATA TYPE BIGINT`: bytes written | {bytes} ({files} file) | – | – | one manifest |");
    let (before, after) = alternating(
        &ctx,
        "SELECT sum(v32) FROM narrow",
        "SELECT sum(v32) FROM wide",
    )
    .await?;
    println!(
        "| sum(v32) after widening Int32 → Int64 vs before | {after:.1} ms | {before:.1} ms | {:.2}× | ≤ 1.1× |",
        after / before
    );
    let (before, after) = alternating(
        &ctx,
        "SELECT count(*) FROM narrow WHERE v32 < 1000",
        "SELECT count(*) FROM wide WHERE v32 < 1000",
    )
    .await?;
    println!(
        "| count(*) WHERE v32 < 1000 (0.1%), after widening vs before | {after:.1} ms | {before:.1} ms | {:.2}× | ≤ 1.1× |",
        after / before
    );
    Ok(())
}
