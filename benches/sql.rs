//! natal through SQL vs DataFusion's own Parquet table (issues #3 and #17's figures). One
//! table of `NATAL_BENCH_ROWS` rows (default 10M: `id int64, val int64, payload ~20 B`) in
//! fragments of 1M rows is written by natal; the same rows are written as Parquet by
//! DataFusion's `COPY` with its default writer options, and read through its listing table.
//!
//! Prints the median of 11 runs, planning and execution apart, for: a filtered scan (`val > X`,
//! ~1% of rows), a scan of a 1,000-key range of the clustered `id` (pages pruned by min/max),
//! a take of 1,000 random rows (natal: `_rowid IN (...)`; Parquet: `id IN (...)`),
//! `count(*)`, and `val IN (10 values)` before and after `natal_create_index('t', 'val')`;
//! then `DELETE ... WHERE _rowid IN (100 ids)` beside the SELECT of the same ids.
//!
//! ```text
//! cargo bench --bench sql
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{birth_id, env, ms, schema, write_table, Rng};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::physical_plan::collect;
use datafusion::prelude::{SessionConfig, SessionContext};

/// Runs per measurement; the reported figure is their median.
const RUNS: usize = 11;

/// Median planning and execution time of [`RUNS`] runs of `sql` in a row, and the rows it
/// returned. Not interleaved with the query it is compared with: on this project's machines
/// (virtual, 2 cores) a query run just after another's 10M-row scan was measured to plan 3–4×
/// slower than in a run of its own, which would measure the machine rather than the query.
async fn median_ms(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<Timing> {
    let mut plans = Vec::with_capacity(RUNS);
    let mut runs = Vec::with_capacity(RUNS);
    let mut rows = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        let plan = ctx.sql(sql).await?.create_physical_plan().await?;
        plans.push(ms(start));
        let start = Instant::now();
        let batches = collect(plan, ctx.task_ctx()).await?;
        runs.push(ms(start));
        rows = batches.iter().map(|b| b.num_rows()).sum();
    }
    let median = |mut times: Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[RUNS / 2]
    };
    Ok(Timing {
        plan: median(plans),
        run: median(runs),
        rows,
    })
}

struct Timing {
    plan: f64,
    run: f64,
    rows: usize,
}

impl Timing {
    fn total(&self) -> f64 {
        self.plan + self.run
    }
}

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let total = env("NATAL_BENCH_ROWS", 10_000_000);
    let fragment_rows = 1_000_000u64.min(total);
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let root = dir.path().to_string_lossy().to_string();
    let ctx = SessionContext::new_with_config(SessionConfig::new());
    natal::datafusion::register(&ctx, &root)?;
    let table_dir = format!("{root}/t");
    let mut rng = Rng(7);
    write_table(&ctx, &table_dir, total, fragment_rows, &mut rng).await?;

    // DataFusion's own Parquet table over the same rows, written by DataFusion's writer with
    // its defaults (what a user of plain Parquet has).
    let plain_dir = format!("{root}/plain");
    std::fs::create_dir_all(&plain_dir)?;
    ctx.sql(&format!(
        "COPY (SELECT * FROM t) TO '{plain_dir}/' STORED AS PARQUET"
    ))
    .await?
    .collect()
    .await?;
    let listing =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    ctx.register_listing_table(
        "plain",
        format!("{plain_dir}/"),
        listing,
        Some(schema()),
        None,
    )
    .await?;

    let ids: Vec<String> = (0..1000)
        .map(|_| {
            let row = rng.next() % total;
            birth_id(row, fragment_rows).as_u64().to_string()
        })
        .collect();
    let rows: Vec<String> = ids
        .iter()
        .map(|id| {
            let id: u64 = id.parse().unwrap_or(0);
            ((id >> 32) * fragment_rows + (id & 0xFFFF_FFFF)).to_string()
        })
        .collect();
    let mid = total / 2 + 1_234;
    let cases = [
        (
            "filtered scan, val > 990000 (~1%)",
            "SELECT id, val, payload FROM t WHERE val > 990000".to_string(),
            "SELECT id, val, payload FROM plain WHERE val > 990000".to_string(),
        ),
        (
            "clustered filter, id in a 1,000-key range (page pruning)",
            format!(
                "SELECT id, val, payload FROM t WHERE id BETWEEN {mid} AND {}",
                mid + 999
            ),
            format!(
                "SELECT id, val, payload FROM plain WHERE id BETWEEN {mid} AND {}",
                mid + 999
            ),
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
    println!("natal vs DataFusion Parquet (its default writer): {total} rows, fragments of {fragment_rows}, median of {RUNS} runs (planning + execution)\n");
    println!(
        "| query | natal | rows | DataFusion Parquet | rows | natal / Parquet | execution only |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, natal_sql, plain_sql) in cases {
        let natal = median_ms(&ctx, &natal_sql).await?;
        let plain = median_ms(&ctx, &plain_sql).await?;
        println!(
            "| {name} | {:.1} ms ({:.1} + {:.1}) | {} | {:.1} ms ({:.1} + {:.1}) | {} | {:.2}× | {:.2}× |",
            natal.total(),
            natal.plan,
            natal.run,
            natal.rows,
            plain.total(),
            plain.plan,
            plain.run,
            plain.rows,
            natal.total() / plain.total(),
            natal.run / plain.run,
        );
    }

    // Equality on an unclustered column: a full scan until `val` is indexed.
    let vals: Vec<String> = (0..10).map(|_| rng.below(1_000_000).to_string()).collect();
    let point = |table: &str| {
        format!(
            "SELECT id, val, payload FROM {table} WHERE val IN ({})",
            vals.join(",")
        )
    };
    let unindexed = median_ms(&ctx, &point("t")).await?;
    let start = Instant::now();
    ctx.sql("SELECT * FROM natal_create_index('t', 'val')")
        .await?
        .collect()
        .await?;
    let build_ms = ms(start);
    let indexed = median_ms(&ctx, &point("t")).await?;
    let plain = median_ms(&ctx, &point("plain")).await?;
    println!("\n`val IN (10 random values)` (~100 rows): index built in {build_ms:.0} ms\n");
    println!(
        "| natal, no index | natal, indexed | rows | DataFusion Parquet | indexed / Parquet |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| {:.1} ms ({:.1} + {:.1}) | {:.1} ms ({:.1} + {:.1}) | {} | {:.1} ms ({:.1} + {:.1}) | {:.3}× |",
        unindexed.total(),
        unindexed.plan,
        unindexed.run,
        indexed.total(),
        indexed.plan,
        indexed.run,
        indexed.rows,
        plain.total(),
        plain.plan,
        plain.run,
        indexed.total() / plain.total(),
    );
    assert_eq!(indexed.rows, plain.rows, "the index finds every row");
    assert_eq!(unindexed.rows, plain.rows);

    // DML by id is a take: `DELETE ... WHERE _rowid IN (100 ids)` against the SELECT of the
    // same ids, just before it (each run deletes 100 other rows, so the last runs read a
    // table with the earlier runs' deletions).
    let (mut selects, mut deletes) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let ids: Vec<String> = (0..100)
            .map(|_| {
                birth_id(rng.next() % total, fragment_rows)
                    .as_u64()
                    .to_string()
            })
            .collect();
        let list = ids.join(",");
        let start = Instant::now();
        let selected: usize = ctx
            .sql(&format!(
                "SELECT * FROM \"t$rows\" WHERE _rowid IN ({list})"
            ))
            .await?
            .collect()
            .await?
            .iter()
            .map(|b| b.num_rows())
            .sum();
        selects.push(ms(start));
        let start = Instant::now();
        ctx.sql(&format!("DELETE FROM \"t$rows\" WHERE _rowid IN ({list})"))
            .await?
            .collect()
            .await?;
        deletes.push(ms(start));
        assert!(selected > 0, "the ids name rows");
    }
    let median = |mut times: Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[RUNS / 2]
    };
    let (select, delete) = (median(selects), median(deletes));
    println!("\n`_rowid IN (100 random ids)`, median of {RUNS} runs, each on other ids\n");
    println!("| SELECT | DELETE | DELETE / SELECT |");
    println!("|---|---|---|");
    println!(
        "| {select:.1} ms | {delete:.1} ms | {:.2}× |",
        delete / select
    );
    Ok(())
}
