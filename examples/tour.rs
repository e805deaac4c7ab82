//! natal's five-minute tour in Rust: the README's SQL tour, run through a DataFusion session
//! with natal registered over a local directory.
//!
//! ```text
//! cargo run --release --example tour -- ./natal-tour
//! ```

use datafusion::prelude::SessionContext;

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "./natal-tour".into());
    // As the natal CLI has it: a quoted path is a file, a bare name a table under `root`.
    let ctx = SessionContext::new().enable_url_table();
    natal::datafusion::register(&ctx, &root)?;
    for statement in TOUR {
        println!("> {statement}");
        // natal's entry point: DataFusion's SQL plus ALTER TABLE, BLOB columns, `*, _rowid`.
        natal::datafusion::sql(&ctx, statement)
            .await?
            .show()
            .await?;
    }
    Ok(())
}

/// The README's tour, statement by statement (the first one makes it safe to run again).
const TOUR: &[&str] = &[
    "DROP TABLE IF EXISTS trips",
    "COPY (SELECT column1 AS id, column2 AS city, column3 AS fare \
     FROM (VALUES (1, 'Oslo', 12.5), (2, 'Lima', 8.0), (3, 'Pune', 5.25))) TO 'trips.parquet'",
    "CREATE TABLE trips (id BIGINT, city VARCHAR, fare DOUBLE, receipt BLOB)",
    "INSERT INTO trips (id, city, fare) SELECT id, city, fare FROM 'trips.parquet'",
    "UPDATE trips SET fare = 9.0 WHERE id = 2",
    r#"SELECT id, fare, _rowid, _rowaddr FROM "trips$rows" ORDER BY id"#,
    r#"SELECT id, fare FROM "trips@v2" ORDER BY id"#,
    "INSERT INTO trips VALUES (4, 'Rome', 20.0, CAST(repeat('ab', 40000) AS BYTEA))",
    r#"SELECT _rowid, kind, size FROM "trips$blobs" WHERE kind IS NOT NULL"#,
    "SELECT id, fare, _change_type, _commit_version FROM natal_changes('trips', 2) \
     ORDER BY _rowid, _change_type DESC",
    "SELECT version, fragments_removed, fragments_added, rows_rewritten \
     FROM natal_compact('trips')",
    r#"SELECT id, _rowid, _rowaddr >> 32 AS fragment FROM "trips$rows" ORDER BY id"#,
];
