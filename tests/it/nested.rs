//! Nested columns (structs, lists, maps): their rows through every write, and the table `n`
//! every fixture since 2026-12-02-nested holds beside `t`.

use std::fmt::Write as _;

use datafusion::prelude::SessionContext;
use natal::Table;

use crate::common::run;

/// A `SELECT` list of nested rows for keys `from..=to`: `s` a struct holding a struct, `l` a
/// list of structs, `m` a map; some of each NULL, some nested fields NULL.
fn nested_rows(from: i64, to: i64) -> String {
    format!(
        "SELECT value AS key, \
           CASE WHEN value % 7 = 3 THEN NULL ELSE named_struct('a', value, 'b', \
             named_struct('c', CASE WHEN value % 4 = 1 THEN NULL ELSE concat('c', value) END, \
                          'd', CAST(value * 2 AS INT))) END AS s, \
           CASE WHEN value % 6 = 5 THEN NULL ELSE \
             [named_struct('x', CAST(value AS INT), 'y', 'y'), \
              named_struct('x', CAST(value + 1 AS INT), 'y', NULL)] END AS l, \
           MAP {{'k': value, 'j': value * 3}} AS m \
         FROM generate_series({from}, {to})"
    )
}

/// The history of `n` in a catalog at `ctx`: appends, an update of a nested value, a delete
/// and a compaction.
pub async fn write_history(ctx: &SessionContext) {
    run(ctx, &format!("CREATE TABLE n AS {}", nested_rows(0, 29))).await;
    run(ctx, &format!("INSERT INTO n {}", nested_rows(30, 49))).await;
    run(
        ctx,
        "UPDATE n SET s = named_struct('a', key + 100, 'b', named_struct('c', 'u', 'd', \
         CAST(7 AS INT))) WHERE key % 3 = 0",
    )
    .await;
    run(ctx, "DELETE FROM n WHERE key % 5 = 0").await;
    run(ctx, "SELECT * FROM natal_compact('n')").await;
    run(ctx, &format!("INSERT INTO n {}", nested_rows(50, 54))).await;
}

/// Every version of `n`: its operation, then its rows with `_rowid`, as DataFusion prints
/// them (nested field names included).
pub async fn describe(ctx: &SessionContext, table: &Table) -> String {
    let mut out = String::new();
    for manifest in table.versions().await.expect("versions") {
        let version = manifest.version;
        writeln!(
            out,
            "version {version} {:?}",
            manifest.transaction.operation
        )
        .ok();
        let sql = format!("SELECT * FROM \"n@v{version}$rows\" ORDER BY _rowid");
        let batches = match ctx.sql(&sql).await {
            Ok(frame) => frame.collect().await,
            Err(e) => Err(e),
        };
        let batches = match batches {
            Ok(batches) => batches,
            Err(e) => panic!("{sql}: {e}"),
        };
        let shown = arrow::util::pretty::pretty_format_batches(&batches).expect("pretty");
        writeln!(out, "{shown}").ok();
    }
    out
}
