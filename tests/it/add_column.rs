//! Columns added with values (seed 004 "Fragments and column files"): `ALTER TABLE ... ADD
//! COLUMN ... DEFAULT <expr>` and `Table::add_column_with_values` write only the new column,
//! one file per fragment beside its others, and keep row ids, deletions and indexes; a
//! constant DEFAULT is also the column's default for later INSERTs; rows added or rewritten
//! concurrently conflict, deletes do not.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use natal::internals::format::flags;
use natal::{CompactOptions, Error, NewColumn, Table};

use crate::common::{batch, catalog_session, key_matches, memory_table};
use crate::schema::{data_files, fails, fails_with, query};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_column_default_writes_only_the_column_and_keeps_every_id() {
    let (dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (id BIGINT NOT NULL, s VARCHAR)").await;
    query(&ctx, "SET natal.merge_fan_in = 0").await;
    query(&ctx, "INSERT INTO t VALUES (1, 'a'), (2, 'bb'), (3, 'ccc')").await;
    query(&ctx, "INSERT INTO t VALUES (4, 'dddd'), (5, 'eeeee')").await;
    query(&ctx, "DELETE FROM t WHERE id = 2").await;
    let ids_before = query(&ctx, "SELECT id, _rowid FROM \"t$rows\" ORDER BY id").await;
    let files_before = data_files(dir.path());
    query(
        &ctx,
        "ALTER TABLE t ADD COLUMN score BIGINT NOT NULL DEFAULT id * 10 + length(s)",
    )
    .await;
    // One new file per fragment, holding only the new column; the old files stay.
    let files_after = data_files(dir.path());
    assert!(files_after.is_superset(&files_before));
    assert_eq!(files_after.len(), files_before.len() + 2);
    assert_eq!(
        query(&ctx, "SELECT id, _rowid FROM \"t$rows\" ORDER BY id").await,
        ids_before,
        "row ids and deletions untouched"
    );
    assert_eq!(
        query(&ctx, "SELECT id, score FROM t ORDER BY id").await,
        "+----+-------+\n\
         | id | score |\n\
         +----+-------+\n\
         | 1  | 11    |\n\
         | 3  | 33    |\n\
         | 4  | 44    |\n\
         | 5  | 55    |\n\
         +----+-------+"
    );
    // A filter on the new column prunes by its file's statistics and finds the row.
    assert_eq!(
        query(&ctx, "SELECT id FROM t WHERE score = 44").await,
        "+----+\n| id |\n+----+\n| 4  |\n+----+"
    );
    // The version before still has two columns; the schema change is one version.
    let versions = query(&ctx, "SELECT version, operation FROM \"t$versions\"").await;
    assert_eq!(versions.matches("schema change").count(), 1, "{versions}");
    assert_eq!(
        query(&ctx, "SELECT * FROM \"t@v4\" ORDER BY id LIMIT 1").await,
        "+----+---+\n| id | s |\n+----+---+\n| 1  | a |\n+----+---+"
    );
    // An INSERT must give a NOT NULL column without a constant default.
    let error = fails(&ctx, "INSERT INTO t (id, s) VALUES (6, 'f')").await;
    assert!(error.contains("non-nullable"), "{error}");
    // Compaction folds a fragment's files into one, values and ids kept.
    query(&ctx, "SELECT * FROM natal_compact('t')").await;
    assert_eq!(
        query(&ctx, "SELECT id, _rowid FROM \"t$rows\" ORDER BY id").await,
        ids_before
    );
    assert_eq!(
        query(&ctx, "SELECT sum(score) AS total FROM t").await,
        "+-------+\n| total |\n+-------+\n| 143   |\n+-------+"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constant_default_is_kept_for_later_inserts() {
    let (dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (id INT)").await;
    query(&ctx, "INSERT INTO t VALUES (1), (2)").await;
    query(
        &ctx,
        "ALTER TABLE t ADD COLUMN tag VARCHAR DEFAULT 'new' || '!'",
    )
    .await;
    query(&ctx, "INSERT INTO t (id) VALUES (3)").await;
    query(&ctx, "INSERT INTO t VALUES (4, 'given')").await;
    let expected = "+----+-------+\n\
                    | id | tag   |\n\
                    +----+-------+\n\
                    | 1  | new!  |\n\
                    | 2  | new!  |\n\
                    | 3  | new!  |\n\
                    | 4  | given |\n\
                    +----+-------+";
    assert_eq!(query(&ctx, "SELECT * FROM t ORDER BY id").await, expected);
    let schema = query(&ctx, "SELECT name, \"default\" FROM \"t$schema\"").await;
    assert!(schema.contains("| tag  | new!    |"), "{schema}");
    // A new session (the manifest read again) keeps the default.
    let again = datafusion::prelude::SessionContext::new();
    natal::datafusion::register(&again, dir.path().to_str().unwrap()).unwrap();
    query(&again, "INSERT INTO t (id) VALUES (5)").await;
    let tags = query(&again, "SELECT tag FROM t WHERE id = 5").await;
    assert!(tags.contains("new!"), "{tags}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_defaults_are_errors_that_commit_nothing() {
    let (dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (id INT, s VARCHAR)").await;
    query(&ctx, "INSERT INTO t VALUES (1, 'a'), (2, '2')").await;
    let files = data_files(dir.path());
    let version = query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await;
    fails_with(
        &ctx,
        &[
            ("ALTER TABLE t ADD COLUMN c INT DEFAULT nope + 1", "nope"),
            (
                "ALTER TABLE t ADD COLUMN c DATE DEFAULT true",
                "cannot be cast",
            ),
            (
                "ALTER TABLE t ADD COLUMN c INT DEFAULT CAST(s AS INT)",
                "computing",
            ),
            (
                "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT NULLIF(id, 1)",
                "NOT NULL",
            ),
            ("ALTER TABLE t ADD COLUMN c INT NOT NULL", "DEFAULT"),
            ("ALTER TABLE t ADD COLUMN id INT DEFAULT 1", "exists"),
            ("ALTER TABLE t ADD COLUMN c INT DEFAULT _rowaddr", "address"),
            (
                "ALTER TABLE t ADD COLUMN c INT DEFAULT 1, ADD COLUMN e INT",
                "its own",
            ),
            (
                "ALTER TABLE \"t@v1\" ADD COLUMN c INT DEFAULT 1",
                "read-only",
            ),
        ],
    )
    .await;
    assert_eq!(data_files(dir.path()), files, "no file left behind");
    assert_eq!(
        query(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await,
        version
    );
    // A default may name the row's id (natal's extension).
    query(&ctx, "ALTER TABLE t ADD COLUMN born BIGINT DEFAULT _rowid").await;
    assert_eq!(
        query(
            &ctx,
            "SELECT count(*) AS n FROM \"t$rows\" WHERE born = _rowid"
        )
        .await,
        "+---+\n| n |\n+---+\n| 2 |\n+---+"
    );
}

/// A column holding each row's `key`, added through the Rust API with `during` run inside
/// the value computation (on the first fragment), as a concurrent writer would.
async fn add_key_copy(
    table: &Table,
    during: impl Fn() -> natal::Result<()> + Send + Sync,
) -> natal::Result<natal::Committed> {
    let column = NewColumn {
        name: "k2".into(),
        data_type: DataType::Int64,
        nullable: true,
        inputs: vec!["key".into()],
        default_value: None,
        blob: None,
    };
    let once = std::sync::Once::new();
    let values = |batch: &RecordBatch| -> natal::Result<ArrayRef> {
        let mut outcome = Ok(());
        once.call_once(|| outcome = during());
        outcome?;
        Ok(batch.column(0).clone())
    };
    table.add_column_with_values(column, &values).await
}

/// Runs `write` from inside a synchronous closure (a multi-thread runtime).
fn blocking<T, F: std::future::Future<Output = natal::Result<T>>>(write: F) -> natal::Result<()> {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(write))?;
    Ok(())
}

fn k2_by_key(batches: &[RecordBatch]) -> Vec<(i64, Option<i64>)> {
    let mut out = Vec::new();
    for b in batches {
        let keys = b.column(0).as_primitive::<Int64Type>();
        let k2 = arrow::compute::cast(b.column(3), &DataType::Int64).unwrap();
        let k2 = k2.as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            out.push((keys.value(i), k2.is_valid(i).then(|| k2.value(i))));
        }
    }
    out.sort_unstable();
    out
}

async fn all_rows(table: &Table) -> Vec<RecordBatch> {
    use futures::TryStreamExt;
    let snapshot = table.latest().await.unwrap();
    let scan = snapshot.scan(Default::default()).await.unwrap();
    scan.try_collect().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_rebase_over_deletes_and_give_way_to_rewrites() {
    let rows = |keys: std::ops::Range<i64>| -> Vec<(i64, i64)> { keys.map(|k| (k, 0)).collect() };
    // A delete meanwhile: the values land, the deleted row stays deleted.
    let (table, _store) = memory_table(4).await;
    table.append(vec![batch(&rows(0..10))]).await.unwrap();
    let other = table.clone();
    add_key_copy(&table, || {
        blocking(other.delete_where(key_matches(|k| k == 3)))
    })
    .await
    .unwrap();
    let found = k2_by_key(&all_rows(&table).await);
    let expected: Vec<(i64, Option<i64>)> =
        (0..10).filter(|k| *k != 3).map(|k| (k, Some(k))).collect();
    assert_eq!(found, expected);
    let latest = table.latest().await.unwrap();
    assert_ne!(latest.manifest().reader_flags() & flags::COLUMN_FILES, 0);
    assert!(latest
        .manifest()
        .fragments
        .iter()
        .all(|f| f.files.len() == 2));

    // An append, or a compaction, meanwhile: a conflict, and no column file left.
    for case in ["append", "compact"] {
        let (table, store) = memory_table(4).await;
        table.append(vec![batch(&rows(0..10))]).await.unwrap();
        table
            .delete_where(key_matches(|k| k % 2 == 0))
            .await
            .unwrap();
        let other = table.clone();
        let before = data_paths(&store).await;
        let error = add_key_copy(&table, || match case {
            "append" => blocking(other.append(vec![batch(&rows(10..12))])),
            _ => blocking(other.compact(CompactOptions::default())),
        })
        .await
        .unwrap_err();
        assert!(matches!(error, Error::Conflict { .. }), "{case}: {error}");
        let latest = table.latest().await.unwrap();
        assert!(latest.schema().field_by_name("k2").is_none(), "{case}");
        let referenced: Vec<String> = latest
            .manifest()
            .fragments
            .iter()
            .flat_map(|f| f.files.iter().map(|d| format!("t/{}", d.path)))
            .collect();
        for path in data_paths(&store).await.difference(&before) {
            assert!(referenced.contains(path), "{case}: {path} left behind");
        }
    }

    // An update planned before the values landed conflicts instead of losing them.
    let (table, _store) = memory_table(4).await;
    table.append(vec![batch(&rows(0..10))]).await.unwrap();
    let other = table.clone();
    let update = move |b: &RecordBatch| -> natal::Result<RecordBatch> {
        blocking(add_key_copy(&other, || Ok(())))?;
        crate::common::add_to_val(1)(b)
    };
    let error = table
        .update_where(key_matches(|k| k == 5), &update)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Conflict { .. }), "{error}");
    let values: Vec<i64> = k2_by_key(&all_rows(&table).await)
        .into_iter()
        .filter_map(|(_, v)| v)
        .collect();
    assert_eq!(values.len(), 10, "every row keeps its value");
}

async fn data_paths(store: &Arc<dyn object_store::ObjectStore>) -> BTreeSet<String> {
    use futures::TryStreamExt;
    let prefix = object_store::path::Path::from("t/data");
    let listed: Vec<_> = store.list(Some(&prefix)).try_collect().await.unwrap();
    listed.into_iter().map(|m| m.location.to_string()).collect()
}

#[tokio::test]
async fn the_columns_fixture_reads_its_values_and_default() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/2026-12-02-columns");
    let store = Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap());
    let table = Table::open(store, "t".into());
    let latest = table.latest().await.unwrap();
    assert_ne!(latest.manifest().reader_flags() & flags::COLUMN_FILES, 0);
    assert!(latest
        .manifest()
        .fragments
        .iter()
        .any(|f| f.files.len() == 2));
    let found = k2_by_key(&all_rows(&table).await);
    assert!(found.iter().any(|(_, v)| v.is_some()), "values were read");
    for (key, k2) in found {
        assert!(k2.is_none_or(|v| v == key), "row {key}: k2 {k2:?}");
        assert_eq!(
            k2.is_none(),
            key >= 160,
            "rows written later read NULL: {key}"
        );
    }
    let with_default = table.at_version(23).await.unwrap();
    let d = with_default.schema().field_by_name("d").unwrap();
    assert_eq!(d.default_value.as_deref(), Some("5"));
    assert_ne!(
        with_default.manifest().writer_flags() & flags::COLUMN_DEFAULTS,
        0
    );
    assert_eq!(latest.manifest().writer_flags() & flags::COLUMN_DEFAULTS, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_changes_as_table_functions() {
    let (_dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (id INT NOT NULL, s VARCHAR)").await;
    query(&ctx, "INSERT INTO t VALUES (1, 'a')").await;
    for call in [
        "SELECT * FROM natal_add_column('t', 'n', 'SMALLINT')",
        "SELECT * FROM natal_alter_column('t', 'n', 'BIGINT')",
        "SELECT * FROM natal_alter_column('t', 'id', 'drop not null')",
        "SELECT * FROM natal_rename_column('t', 's', 'label')",
        "SELECT * FROM natal_drop_column('t', 'label')",
    ] {
        let version = query(&ctx, call).await;
        assert!(
            !version.contains("|         |"),
            "{call} published: {version}"
        );
    }
    assert_eq!(
        query(&ctx, "SELECT name, data_type, nullable FROM \"t$schema\"").await,
        "+------+-----------+----------+\n\
         | name | data_type | nullable |\n\
         +------+-----------+----------+\n\
         | id   | Int32     | true     |\n\
         | n    | Int64     | true     |\n\
         +------+-----------+----------+"
    );
    // A change that changes nothing publishes nothing (version NULL).
    let same = query(&ctx, "SELECT * FROM natal_alter_column('t', 'n', 'BIGINT')").await;
    assert!(same.contains("|         |"), "{same}");
    fails_with(
        &ctx,
        &[
            (
                "SELECT * FROM natal_add_column('t', 'x', 'NOPE')",
                "not a type",
            ),
            (
                "SELECT * FROM natal_drop_column('t', 'id.f')",
                "no field 'f'",
            ),
            (
                "SELECT * FROM natal_alter_column('t', 'n', 'INT')",
                "cannot",
            ),
            (
                "SELECT * FROM natal_rename_column('t', 'n')",
                "missing argument 3",
            ),
            (
                "SELECT * FROM natal_drop_column('t', 'n', 'x')",
                "at most 2",
            ),
        ],
    )
    .await;
}
