//! The whole SQL workload a user runs — CTAS, a table registered by `CREATE EXTERNAL TABLE`
//! (blob column included), INSERT, UPDATE, DELETE, MERGE, ALTER, an index, compaction, a
//! checkpoint, time travel, restore, cleanup — as text of its results, so the same workload
//! can be compared across stores (a local directory, an S3 server). Every natal name and
//! function is used on the external table by its plain name, wherever it lives.

use datafusion::prelude::SessionContext;

/// Runs `sql`, returning its result as text (or the error's, prefixed `error:`).
async fn answer(ctx: &SessionContext, sql: &str) -> String {
    (crate::common::answer(ctx, sql).await).unwrap_or_else(|e| format!("error: {e}"))
}

/// Runs the workload in `ctx` (a session with natal registered over some root), its
/// external table at `<external>/w`; returns each statement with its result.
pub async fn run_workload(ctx: &SessionContext, external: &str) -> Vec<(String, String)> {
    let statements = [
        "CREATE TABLE src AS SELECT value AS k, value * 7 AS v FROM generate_series(1, 60)"
            .to_string(),
        format!(
            "CREATE EXTERNAL TABLE w (id BIGINT NOT NULL, v BIGINT, body BYTEA) STORED AS NATAL \
             LOCATION '{external}/w' OPTIONS ('blob.body.inline_limit' '10', \
             'blob.body.dedicated_threshold' '100', 'blob.body.pack_file_size' '1000')"
        ),
        "INSERT INTO w SELECT value, value * 10, CAST(repeat('x', value % 7 * 30) AS BYTEA) \
         FROM generate_series(1, 200)"
            .into(),
        "UPDATE w SET v = v + 1 WHERE id % 3 = 0".into(),
        "DELETE FROM w WHERE id % 5 = 0".into(),
        "MERGE INTO w USING src ON w.id = src.k \
         WHEN MATCHED AND src.k % 2 = 0 THEN UPDATE SET v = src.v \
         WHEN NOT MATCHED THEN INSERT VALUES (src.k + 1000, src.v, NULL)"
            .into(),
        "SELECT * FROM natal_add_column('w', 'extra', 'INT')".into(),
        "SELECT * FROM natal_rename_column('w', 'extra', 'more')".into(),
        "SELECT * FROM natal_create_index('w', 'v')".into(),
        "SELECT id, v FROM w WHERE v = 70 ORDER BY id".into(),
        "SELECT * FROM natal_compact('w')".into(),
        "SELECT * FROM natal_checkpoint('w')".into(),
        "SELECT count(*), sum(v), sum(octet_length(body)) FROM \"w@v3\"".into(),
        "SELECT version, operation, live_rows FROM \"w$versions\" ORDER BY version".into(),
        "SELECT count(*) FROM \"w$rows\" WHERE _rowid < 100".into(),
        "SELECT * FROM natal_restore('w', 4)".into(),
        "SELECT count(*), sum(v) FROM w".into(),
        "SELECT * FROM natal_cleanup('w', 1, 0, 0)".into(),
        "SELECT count(*) FROM \"w@v3\"".into(),
        "SELECT id, v, octet_length(body), md5(body) FROM w ORDER BY id".into(),
        "SELECT k, v FROM src WHERE k > 55 ORDER BY k".into(),
    ];
    let mut out = Vec::new();
    for sql in statements {
        let result = answer(ctx, &sql).await;
        out.push((sql, result));
    }
    out
}

/// Locally: every statement of the workload succeeds on the external table but the read of
/// a version cleanup removed, which names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workload_runs_on_an_external_table_by_its_name() {
    let (_root, ctx) = crate::common::catalog_session();
    let elsewhere = tempfile::tempdir().unwrap();
    let results = run_workload(&ctx, elsewhere.path().to_str().unwrap()).await;
    for (sql, result) in &results {
        if sql.contains("FROM \"w@v3\"") && sql.starts_with("SELECT count(*) FROM") {
            assert!(result.contains("version 3"), "{sql}: {result}");
            continue;
        }
        assert!(!result.starts_with("error:"), "{sql}: {result}");
    }
    // The table lives outside the root, and the functions found it there.
    assert!(elsewhere.path().join("w/_versions").is_dir());
    let versions = &results[13].1;
    for operation in [
        "append",
        "patch",
        "delete",
        "schema change",
        "create index",
        "compaction",
        "checkpoint",
    ] {
        assert!(versions.contains(operation), "{versions}");
    }
    // Restored to version 4 (after the DELETE): its 160 rows.
    let restored = &results[16];
    assert!(
        restored.1.contains("| 160 "),
        "{}: {}",
        restored.0,
        restored.1
    );
}
