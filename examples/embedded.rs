//! Embedding natal in a DataFusion application: register it on a `SessionContext`, use SQL
//! for reads and writes, and the Rust API for what SQL does not say.
//!
//! ```text
//! cargo run --example embedded -- ./natal-embedded
//! ```

use datafusion::prelude::SessionContext;
use natal::RowId;
use natal::ScanRequest;

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "./natal-embedded".to_string());
    let ctx = SessionContext::new();
    // Tables under `root` become the default schema; STORED AS NATAL and natal_* functions too.
    natal::datafusion::register(&ctx, &root)?;

    let location = format!("{root}/events");
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE IF NOT EXISTS events (kind VARCHAR, value DOUBLE) \
         STORED AS NATAL LOCATION '{location}'"
    ))
    .await?;
    ctx.sql("INSERT INTO events VALUES ('click', 1.0), ('view', 0.5), ('click', 2.0)")
        .await?
        .collect()
        .await?;
    ctx.sql("UPDATE events SET value = value * 10 WHERE kind = 'view'")
        .await?
        .collect()
        .await?;
    // natal's entry point runs the SQL natal adds to DataFusion's, such as `*, _rowid`.
    natal::datafusion::sql(
        &ctx,
        r#"SELECT *, _rowid FROM "events$rows" ORDER BY _rowid"#,
    )
    .await?
    .show()
    .await?;

    // The same table through the Rust API: take rows by id, whatever moved them.
    let table = natal::datafusion::open_table(&ctx, &location)?;
    let snapshot = table.latest().await?;
    let rows = snapshot
        .take(
            &[RowId::from_u64(1), RowId::from_u64(0)],
            ScanRequest::default(),
        )
        .await?;
    println!("take(1, 0) at version {}:", snapshot.version());
    println!(
        "{}",
        datafusion::arrow::util::pretty::pretty_format_batches(&[rows])?
    );
    Ok(())
}
