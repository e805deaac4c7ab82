//! Schema changes (seed 004): `ALTER TABLE` through natal's SQL entry point and
//! `Table::alter`, each one version that writes no data file; older versions keep their
//! schema; refused changes commit nothing; concurrent writers rebase over a change.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int32Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema as ArrowSchema, TimeUnit};
use arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;
use natal::internals::format::flags;
use natal::{Error, SchemaChange, Table, TableOptions};
use object_store::memory::InMemory;

use crate::common::catalog_session;

/// Runs `sql` through natal's entry point and returns its rows as a pretty table.
pub(crate) async fn query(ctx: &SessionContext, sql: &str) -> String {
    let frame = natal::datafusion::sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let batches = frame
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    pretty_format_batches(&batches).unwrap().to_string()
}

pub(crate) async fn fails(ctx: &SessionContext, sql: &str) -> String {
    match natal::datafusion::sql(ctx, sql).await {
        Ok(frame) => match frame.collect().await {
            Ok(_) => panic!("{sql} should fail"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

/// Runs each statement of `cases`, which must fail with an error containing its text.
pub(crate) async fn fails_with(ctx: &SessionContext, cases: &[(&str, &str)]) {
    for (sql, says) in cases {
        let error = fails(ctx, sql).await;
        assert!(error.contains(says), "{sql}: {error}");
    }
}

async fn latest_version(ctx: &SessionContext) -> String {
    query(ctx, "SELECT max(version) AS v FROM \"t$versions\"").await
}

/// Every data file of the table's directory.
pub(crate) fn data_files(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("t").join("data"))
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_table_changes_the_schema_in_one_version_each_and_writes_no_data() {
    let (dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (id INT NOT NULL, d DATE, s VARCHAR)").await;
    query(
        &ctx,
        "INSERT INTO t VALUES (1, '2024-01-02', 'a'), (2, '2024-03-04', 'b')",
    )
    .await;
    let files = data_files(dir.path());
    for change in [
        "ALTER TABLE t ADD COLUMN c BIGINT",
        "ALTER TABLE t RENAME COLUMN s TO label",
        "ALTER TABLE t ALTER COLUMN id SET DATA TYPE BIGINT",
        "ALTER TABLE t ALTER COLUMN d SET DATA TYPE TIMESTAMP(6)",
        "ALTER TABLE t ALTER COLUMN id DROP NOT NULL",
    ] {
        query(&ctx, change).await;
    }
    assert_eq!(data_files(dir.path()), files, "no data file written");
    let versions = query(
        &ctx,
        "SELECT version, operation, rows_added FROM \"t$versions\" ORDER BY version",
    )
    .await;
    assert_eq!(
        versions.matches("schema change").count(),
        5,
        "one version per change: {versions}"
    );
    query(
        &ctx,
        "INSERT INTO t VALUES (3, '2025-01-01T10:00:00', 'c', 30)",
    )
    .await;
    assert_eq!(
        query(&ctx, "SELECT * FROM t ORDER BY id").await,
        "+----+---------------------+-------+----+\n\
         | id | d                   | label | c  |\n\
         +----+---------------------+-------+----+\n\
         | 1  | 2024-01-02T00:00:00 | a     |    |\n\
         | 2  | 2024-03-04T00:00:00 | b     |    |\n\
         | 3  | 2025-01-01T10:00:00 | c     | 30 |\n\
         +----+---------------------+-------+----+"
    );
    // The widened dates' bounds were converted: a filter on timestamps prunes and finds.
    assert_eq!(
        query(
            &ctx,
            "SELECT id FROM t WHERE d > TIMESTAMP '2024-02-01T00:00:00' ORDER BY id"
        )
        .await,
        "+----+\n| id |\n+----+\n| 2  |\n| 3  |\n+----+"
    );
    assert_eq!(
        query(
            &ctx,
            "SELECT id FROM t WHERE d < TIMESTAMP '2024-01-03T00:00:00'"
        )
        .await,
        "+----+\n| id |\n+----+\n| 1  |\n+----+"
    );
    // Version 2 keeps the schema it was written with.
    assert_eq!(
        query(&ctx, "SELECT * FROM \"t@v2\" ORDER BY id").await,
        "+----+------------+---+\n\
         | id | d          | s |\n\
         +----+------------+---+\n\
         | 1  | 2024-01-02 | a |\n\
         | 2  | 2024-03-04 | b |\n\
         +----+------------+---+"
    );
    // `t$schema` lists each version's columns by field id: the rename kept id 2, `c` is 3.
    assert_eq!(
        query(
            &ctx,
            "SELECT position, field_id, name, data_type, nullable FROM \"t$schema\""
        )
        .await,
        "+----------+----------+-------+---------------+----------+\n\
         | position | field_id | name  | data_type     | nullable |\n\
         +----------+----------+-------+---------------+----------+\n\
         | 0        | 0        | id    | Int64         | true     |\n\
         | 1        | 1        | d     | Timestamp(µs) | true     |\n\
         | 2        | 2        | label | Utf8View      | true     |\n\
         | 3        | 3        | c     | Int64         | true     |\n\
         +----------+----------+-------+---------------+----------+"
    );
    assert_eq!(
        query(
            &ctx,
            "SELECT name, data_type, nullable FROM \"t@v2$schema\""
        )
        .await,
        "+------+-----------+----------+\n\
         | name | data_type | nullable |\n\
         +------+-----------+----------+\n\
         | id   | Int32     | false    |\n\
         | d    | Date32    | true     |\n\
         | s    | Utf8View  | true     |\n\
         +------+-----------+----------+"
    );
    let schema = ctx.table("t").await.unwrap().schema().clone();
    assert_eq!(schema.field(0).data_type(), &DataType::Int64);
    assert!(schema.field(0).is_nullable());
    assert_eq!(
        schema.field(1).data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, None)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_column_leaves_reads_now_and_its_bytes_at_compaction() {
    let (dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (id BIGINT NOT NULL, payload VARCHAR)").await;
    query(&ctx, "INSERT INTO t VALUES (1, 'x'), (2, 'y')").await;
    query(&ctx, "INSERT INTO t VALUES (3, 'z')").await;
    query(&ctx, "SELECT * FROM natal_create_index('t', 'payload')").await;
    query(&ctx, "ALTER TABLE t DROP COLUMN payload").await;
    assert_eq!(
        query(&ctx, "SELECT * FROM t ORDER BY id").await,
        "+----+\n| id |\n+----+\n| 1  |\n| 2  |\n| 3  |\n+----+"
    );
    assert_eq!(
        query(&ctx, "SELECT count(*) AS n FROM \"t$indexes\"").await,
        "+---+\n| n |\n+---+\n| 0 |\n+---+",
        "the dropped column's index goes with it"
    );
    // Adding a column of the old name gives it a new id: the old values do not come back.
    query(&ctx, "ALTER TABLE t ADD COLUMN payload VARCHAR").await;
    assert_eq!(
        query(&ctx, "SELECT count(payload) AS n FROM t").await,
        "+---+\n| n |\n+---+\n| 0 |\n+---+"
    );
    let ids = query(&ctx, "SELECT id, _rowid FROM \"t$rows\" ORDER BY id").await;
    query(&ctx, "SELECT * FROM natal_compact('t')").await;
    query(&ctx, "SELECT * FROM natal_cleanup('t', 1, 0, 0)").await;
    let table = Table::open(
        Arc::new(object_store::local::LocalFileSystem::new()),
        object_store::path::Path::from_absolute_path(dir.path().join("t")).unwrap(),
    );
    let snapshot = table.latest().await.unwrap();
    let held: BTreeSet<u32> = snapshot
        .manifest()
        .fragments
        .iter()
        .flat_map(|f| f.files.iter().flat_map(|d| d.field_ids.clone()))
        .collect();
    assert_eq!(
        held,
        BTreeSet::from([0, 2]),
        "compaction wrote the live columns only"
    );
    assert_eq!(
        query(&ctx, "SELECT id, _rowid FROM \"t$rows\" ORDER BY id").await,
        ids,
        "compaction keeps the row ids"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_changes_are_typed_errors_that_commit_nothing() {
    let (_dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (id INT NOT NULL, v VARCHAR)").await;
    query(&ctx, "INSERT INTO t VALUES (1, 'a')").await;
    query(&ctx, "SELECT * FROM natal_create_index('t', 'id')").await;
    let version = latest_version(&ctx).await;
    for (sql, says) in [
        (
            "ALTER TABLE t ALTER COLUMN id SET DATA TYPE SMALLINT",
            "not a lossless widening",
        ),
        (
            "ALTER TABLE t ALTER COLUMN v SET DATA TYPE BIGINT",
            "not a lossless widening",
        ),
        (
            "ALTER TABLE t ALTER COLUMN id SET DATA TYPE BIGINT",
            "index id_idx is on the column",
        ),
        (
            "ALTER TABLE t RENAME COLUMN id TO v",
            "a column named 'v' exists",
        ),
        (
            "ALTER TABLE t RENAME COLUMN id TO _rowid",
            "natal system column",
        ),
        ("ALTER TABLE t DROP COLUMN nope", "no column named 'nope'"),
        (
            "ALTER TABLE t ADD COLUMN z INT NOT NULL",
            "without a DEFAULT",
        ),
        (
            "ALTER TABLE t ALTER COLUMN v SET NOT NULL",
            "only relaxes nullability",
        ),
        ("ALTER TABLE \"t@v2\" ADD COLUMN z INT", "read-only"),
        ("ALTER TABLE \"t$rows\" ADD COLUMN z INT", "read-only"),
        ("ALTER TABLE nope ADD COLUMN z INT", "nope"),
        // All or nothing: the second change fails, so the first is not committed either.
        (
            "ALTER TABLE t ADD COLUMN z INT, DROP COLUMN nope",
            "no column named 'nope'",
        ),
    ] {
        let error = fails(&ctx, sql).await;
        assert!(error.contains(says), "{sql}: {error}");
    }
    assert_eq!(latest_version(&ctx).await, version);
    let one = fails(&ctx, "ALTER TABLE t DROP COLUMN v, DROP COLUMN id").await;
    assert!(one.contains("at least one column"), "{one}");
    // No-ops publish nothing.
    query(&ctx, "ALTER TABLE t ALTER COLUMN v DROP NOT NULL").await;
    query(&ctx, "ALTER TABLE t ADD COLUMN IF NOT EXISTS v INT").await;
    query(&ctx, "ALTER TABLE t DROP COLUMN IF EXISTS nope").await;
    query(&ctx, "ALTER TABLE IF EXISTS nope DROP COLUMN x").await;
    assert_eq!(latest_version(&ctx).await, version);
}

fn int_table_schema() -> Arc<ArrowSchema> {
    Arc::new(ArrowSchema::new(vec![
        Field::new("k", DataType::Int32, false),
        Field::new("day", DataType::Date32, false),
    ]))
}

fn int_rows(keys: std::ops::Range<i32>) -> RecordBatch {
    RecordBatch::try_new(
        int_table_schema(),
        vec![
            Arc::new(Int32Array::from_iter_values(keys.clone())),
            Arc::new(arrow::array::Date32Array::from_iter_values(keys)),
        ],
    )
    .unwrap()
}

async fn int_table() -> Table {
    let store = Arc::new(InMemory::new());
    let schema = int_table_schema();
    let table = Table::create(store, "t".into(), &schema, TableOptions::default())
        .await
        .unwrap();
    table.append(vec![int_rows(0..10)]).await.unwrap();
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_changes_conflict_with_each_other() {
    let table = int_table().await;
    let a = table.planned_at(table.latest().await.unwrap());
    let b = table.planned_at(table.latest().await.unwrap());
    a.alter(vec![SchemaChange::AddColumn {
        name: "x".into(),
        data_type: DataType::Utf8,
    }])
    .await
    .unwrap();
    let lost = b
        .alter(vec![SchemaChange::RenameColumn {
            from: "k".into(),
            to: "key".into(),
        }])
        .await
        .unwrap_err();
    assert!(matches!(lost, Error::Conflict { .. }), "{lost}");
    let schema = table.latest().await.unwrap().schema().clone();
    assert!(schema.field_by_name("k").is_some() && schema.field_by_name("x").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_planned_before_a_change_rebases_over_it() {
    let table = int_table().await;
    let planned = table.planned_at(table.latest().await.unwrap());
    table
        .alter(vec![
            SchemaChange::AddColumn {
                name: "note".into(),
                data_type: DataType::Utf8,
            },
            SchemaChange::SetDataType {
                name: "k".into(),
                data_type: DataType::Int64,
            },
            SchemaChange::SetDataType {
                name: "day".into(),
                data_type: DataType::Timestamp(TimeUnit::Microsecond, None),
            },
        ])
        .await
        .unwrap();
    // Written under the old schema (Int32, Date32, no `note`), committed over the new one.
    planned.append(vec![int_rows(100..110)]).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let manifest = snapshot.manifest();
    assert_ne!(manifest.reader_flags() & flags::SCHEMA_CHANGES, 0);
    let rows: Vec<RecordBatch> =
        futures::TryStreamExt::try_collect(snapshot.scan(Default::default()).await.unwrap())
            .await
            .unwrap();
    let mut keys = Vec::new();
    for batch in &rows {
        assert_eq!(batch.schema().field(0).data_type(), &DataType::Int64);
        assert_eq!(batch.column(2).null_count(), batch.num_rows());
        keys.extend(
            batch
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .copied(),
        );
    }
    keys.sort_unstable();
    assert_eq!(keys, (0..10).chain(100..110).collect::<Vec<i64>>());
    // The rebased fragment's day bounds are timestamps too: day 105 is found by its micros.
    let micros_per_day = 86_400_000_000i64;
    for fragment in &manifest.fragments {
        let stats = fragment.column_stats(1).unwrap();
        let Some(natal::internals::format::StatValue::Int(max)) = stats.max else {
            panic!("{stats:?}");
        };
        assert_eq!(max % micros_per_day, 0);
        assert!(
            max / micros_per_day == 9 || max / micros_per_day == 109,
            "{max}"
        );
    }
}

#[tokio::test]
async fn the_alter_fixture_reads_each_version_with_the_columns_it_had() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/2026-12-01-alter");
    let store = Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap());
    let table = Table::open(store, "t".into());
    let columns = |schema: &natal::internals::format::Schema| -> Vec<(String, DataType)> {
        schema
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.data_type.clone()))
            .collect()
    };
    let base = vec![
        ("key".to_string(), DataType::Int64),
        ("val".to_string(), DataType::Int64),
        ("name".to_string(), DataType::Utf8),
    ];
    let with = |name: &str, data_type: DataType| {
        let mut all = base.clone();
        all.push((name.to_string(), data_type));
        all
    };
    let latest = table.latest().await.unwrap();
    assert_eq!(columns(latest.schema()), base);
    assert_eq!(
        latest.schema().next_field_id,
        4,
        "the dropped column's id is not reused"
    );
    assert_ne!(latest.manifest().reader_flags() & flags::SCHEMA_CHANGES, 0);
    for (version, expected) in [
        (14, base.clone()),
        (16, with("x", DataType::Int32)),
        (17, with("y", DataType::Int32)),
        (18, with("y", DataType::Int64)),
    ] {
        let snapshot = table.at_version(version).await.unwrap();
        assert_eq!(columns(snapshot.schema()), expected, "version {version}");
    }
}

/// `LIKE 'prefix%'` prunes fragments by their string bounds (seed 004 "Pruning"), also
/// after the column was renamed: bounds belong to field ids, not names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_like_prefix_prunes_by_string_bounds_across_a_rename() {
    let (_dir, ctx) = catalog_session();
    query(&ctx, "CREATE TABLE t (s VARCHAR)").await;
    query(&ctx, "SET natal.merge_fan_in = 0").await;
    for rows in [
        "('apple'), ('apricot')",
        "('banana'), ('blue')",
        "('cherry')",
    ] {
        query(&ctx, &format!("INSERT INTO t VALUES {rows}")).await;
    }
    query(&ctx, "ALTER TABLE t RENAME COLUMN s TO fruit").await;
    let frame = natal::datafusion::sql(&ctx, "SELECT fruit FROM t WHERE fruit LIKE 'ba%'")
        .await
        .unwrap();
    let plan = frame.clone().create_physical_plan().await.unwrap();
    let shown = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string();
    assert!(shown.contains("fragments=1 (pruned 2)"), "{shown}");
    assert_eq!(
        pretty_format_batches(&frame.collect().await.unwrap())
            .unwrap()
            .to_string(),
        "+--------+\n| fruit  |\n+--------+\n| banana |\n+--------+"
    );
}
