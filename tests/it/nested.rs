//! Nested columns (structs, lists, maps): their rows through every write, and the table `n`
//! every fixture since 2026-12-02-nested holds beside `t`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::prelude::SessionContext;
use natal::{FieldPath, SchemaChange, Table};

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

/// The history of `n` in a catalog at `ctx`: appends, an update of a nested value, a delete,
/// a compaction, then nested schema changes and writes after them.
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
    // Nested changes (since 2026-12-02-nested-ids, which tags nested fields with ids): a
    // field renamed, added, moved, widened and dropped, rows written after, an update.
    for change in [
        "natal_rename_column('n', 's.b.c', 'cc')",
        "natal_add_column('n', 'l.element.z', 'BIGINT')",
        "natal_alter_column('n', 'l.element.y', 'FIRST')",
        "natal_alter_column('n', 's.b.d', 'BIGINT')",
        "natal_drop_column('n', 's.a')",
    ] {
        run(ctx, &format!("SELECT * FROM {change}")).await;
    }
    run(
        ctx,
        "INSERT INTO n VALUES (60, named_struct('b', named_struct('cc', 'new', 'd', 6)), \
         [named_struct('y', 'w', 'x', 1, 'z', 2)], MAP {'k': 1})",
    )
    .await;
    run(
        ctx,
        "UPDATE n SET s = named_struct('b', named_struct('cc', 'v', 'd', key)) WHERE key % 4 = 2",
    )
    .await;
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
        // As described before `n$rows` had lineage columns.
        let sql = format!(
            "SELECT * EXCLUDE (_row_created_version, _row_updated_version) \
             FROM \"n@v{version}$rows\" ORDER BY _rowid"
        );
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

/// The rows of `sql` as a pretty table.
async fn rows(ctx: &SessionContext, sql: &str) -> String {
    crate::schema::query(ctx, sql).await
}

/// The latest version of `t`.
async fn version(ctx: &SessionContext) -> String {
    rows(ctx, "SELECT max(version) FROM \"t$versions\"").await
}

/// Every (path, field id) a data file's Parquet schema tags, its nested fields included.
fn parquet_field_ids(path: &std::path::Path) -> BTreeMap<String, i32> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = std::fs::File::open(path).unwrap();
    let reader = SerializedFileReader::new(file).unwrap();
    let mut ids = BTreeMap::new();
    let root = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema_ptr();
    let mut stack = vec![(String::new(), root)];
    while let Some((path, node)) = stack.pop() {
        if node.is_group() {
            for child in node.get_fields() {
                let inner = match path.is_empty() {
                    true => child.name().to_string(),
                    false => format!("{path}.{}", child.name()),
                };
                stack.push((inner, child.clone()));
            }
        }
        if node.get_basic_info().has_id() {
            ids.insert(path, node.get_basic_info().id());
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_columns_round_trip_through_every_write_and_time_travel() {
    let (dir, ctx) = crate::common::catalog_session();
    let same = |a: &str, b: &str, what: &str| assert_eq!(a, b, "{what}");
    run(&ctx, &format!("CREATE TABLE t AS {}", nested_rows(0, 29))).await;
    run(&ctx, &format!("INSERT INTO t {}", nested_rows(30, 49))).await;
    let all = format!("SELECT * FROM ({}) ORDER BY key", nested_rows(0, 49));
    same(
        &rows(&ctx, "SELECT * FROM t ORDER BY key").await,
        &rows(&ctx, &all).await,
        "as written",
    );
    // An UPDATE of a nested value, a DELETE and a compaction keep every other value.
    run(
        &ctx,
        "UPDATE t SET s = named_struct('a', key + 100, 'b', named_struct('c', 'u', 'd', \
         CAST(7 AS INT))) WHERE key % 3 = 0",
    )
    .await;
    run(&ctx, "DELETE FROM t WHERE key % 5 = 0").await;
    let expected = format!(
        "SELECT key, CASE WHEN key % 3 = 0 THEN named_struct('a', key + 100, 'b', \
           named_struct('c', 'u', 'd', CAST(7 AS INT))) ELSE s END AS s, l, m \
         FROM ({}) WHERE key % 5 <> 0 ORDER BY key",
        nested_rows(0, 49)
    );
    let expected = rows(&ctx, &expected).await;
    same(
        &rows(&ctx, "SELECT * FROM t ORDER BY key").await,
        &expected,
        "after the update and delete",
    );
    run(&ctx, "SELECT * FROM natal_compact('t')").await;
    same(
        &rows(&ctx, "SELECT * FROM t ORDER BY key").await,
        &expected,
        "after compaction",
    );
    same(
        &rows(&ctx, "SELECT * FROM \"t@v2\" ORDER BY key").await,
        &rows(&ctx, &all).await,
        "time travel",
    );
    // Every data file tags every field with its id, at every depth, as t$schema lists them.
    let listed = rows(
        &ctx,
        "SELECT name, field_id FROM \"t$schema\" ORDER BY field_id",
    )
    .await;
    for file in crate::schema::data_files(dir.path()) {
        let ids = parquet_field_ids(&dir.path().join("t/data").join(&file));
        let mut by_id: Vec<(i32, String)> = ids.into_iter().map(|(p, i)| (i, p)).collect();
        by_id.sort();
        // key, s, l, m, s.a, s.b, s.b.c, s.b.d, l's element, x, y, m's key and value.
        let found: Vec<i32> = by_id.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            found,
            (0..13).collect::<Vec<_>>(),
            "{file}: {by_id:?}\n{listed}"
        );
        assert!(
            by_id.iter().any(|(id, p)| *id == 6 && p == "s.b.c"),
            "{by_id:?}"
        );
    }
    for id in 0..13 {
        assert!(listed.contains(&format!(" {id} ")), "{listed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_fields_change_by_path_in_one_version_each_writing_no_data() {
    let (dir, ctx) = crate::common::catalog_session();
    run(&ctx, &format!("CREATE TABLE t AS {}", nested_rows(0, 19))).await;
    run(&ctx, &format!("INSERT INTO t {}", nested_rows(20, 29))).await;
    let files = crate::schema::data_files(dir.path());
    let before = rows(&ctx, "SELECT max(version) AS v FROM \"t$versions\"").await;
    for sql in [
        "SELECT * FROM natal_rename_column('t', 's.b.c', 'cc')",
        "SELECT * FROM natal_drop_column('t', 's.a')",
        "SELECT * FROM natal_add_column('t', 's.b.e', 'INT')",
        "SELECT * FROM natal_alter_column('t', 's.b.e', 'FIRST')",
        "SELECT * FROM natal_alter_column('t', 's.b.d', 'BIGINT')",
        "SELECT * FROM natal_rename_column('t', 'l.element.y', 'why')",
        "SELECT * FROM natal_alter_column('t', 'l.element.x', 'AFTER why')",
        "SELECT * FROM natal_alter_column('t', 'm.value', 'DECIMAL(20, 0)')",
    ] {
        run(&ctx, sql).await;
    }
    assert_eq!(
        crate::schema::data_files(dir.path()),
        files,
        "no data file written"
    );
    let versions = rows(&ctx, "SELECT count(*) AS n FROM \"t$versions\"").await;
    assert!(versions.contains("| 10 |"), "one version each: {versions}");
    assert!(before.contains("| 2 |"), "{before}");
    // The values, read by id from files written under the old names and order (a widened
    // value prints as it did).
    let reshaped = |source: &str| {
        format!(
            "SELECT key, CASE WHEN s IS NULL THEN NULL ELSE named_struct('b', named_struct( \
               'e', CAST(NULL AS INT), 'cc', s['b']['c'], 'd', CAST(s['b']['d'] AS BIGINT))) \
               END AS s, \
             CASE WHEN l IS NULL THEN NULL ELSE [ \
               named_struct('why', l[1]['y'], 'x', l[1]['x']), \
               named_struct('why', l[2]['y'], 'x', l[2]['x'])] END AS l, \
             m FROM {source} ORDER BY key"
        )
    };
    let expected = rows(&ctx, &reshaped("\"t@v2\"")).await;
    assert_eq!(rows(&ctx, "SELECT * FROM t ORDER BY key").await, expected);
    // Older versions keep the schema they were written with.
    let old = rows(&ctx, "SELECT name FROM \"t@v2$schema\"").await;
    assert!(old.contains("s.b.c") && old.contains("s.a"), "{old}");
    let now = rows(
        &ctx,
        "SELECT name, position FROM \"t$schema\" WHERE name LIKE 's.%'",
    )
    .await;
    assert!(!now.contains("s.a ") && now.contains("s.b.cc"), "{now}");
    assert!(now.contains("| s.b.e  | 0 "), "{now}");
    // New rows in the new shape, beside the old; an update of one, and a compaction.
    run(
        &ctx,
        "INSERT INTO t VALUES (100, named_struct('b', named_struct('e', 1, 'cc', 'new', \
         'd', 5)), [named_struct('why', 'w', 'x', 1)], MAP {'q': 2})",
    )
    .await;
    run(
        &ctx,
        "UPDATE t SET s = named_struct('b', named_struct('e', 9, 'cc', s['b']['cc'], 'd', \
         s['b']['d'])) WHERE key = 4",
    )
    .await;
    run(&ctx, "SELECT * FROM natal_compact('t')").await;
    let some = rows(
        &ctx,
        "SELECT key, s['b']['e'] AS e, s['b']['cc'] AS cc, l[1]['why'] AS why FROM t \
         WHERE key IN (4, 100) ORDER BY key",
    )
    .await;
    assert!(some.contains("| 4   | 9 | c4  | y   |"), "{some}");
    assert!(some.contains("| 100 | 1 | new | w   |"), "{some}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_nested_changes_name_the_field_and_commit_nothing() {
    let (_dir, ctx) = crate::common::catalog_session();
    run(
        &ctx,
        &format!(
            "CREATE TABLE t AS SELECT *, named_struct('only', 1) AS one FROM ({})",
            nested_rows(0, 3)
        ),
    )
    .await;
    let at = version(&ctx).await;
    crate::schema::fails_with(
        &ctx,
        &[
            (
                "SELECT * FROM natal_rename_column('t', 's.nope', 'x')",
                "no field named 'nope'",
            ),
            (
                "SELECT * FROM natal_add_column('t', 's.nope.x', 'INT')",
                "s has no field 'nope'",
            ),
            (
                "SELECT * FROM natal_rename_column('t', 'l.element', 'x')",
                "a list's element cannot be renamed",
            ),
            (
                "SELECT * FROM natal_drop_column('t', 'm.key')",
                "a map's key and value cannot be dropped",
            ),
            (
                "SELECT * FROM natal_drop_column('t', 'one.only')",
                "a struct keeps at least one field",
            ),
            (
                "SELECT * FROM natal_rename_column('t', 's.a', 'b')",
                "a field named 'b' exists there",
            ),
            (
                "SELECT * FROM natal_alter_column('t', 's.a', 'INT')",
                "not a lossless widening",
            ),
            (
                "SELECT * FROM natal_alter_column('t', 's.b', 'BIGINT')",
                "not a lossless widening",
            ),
            (
                "SELECT * FROM natal_add_column('t', 'key.x', 'INT')",
                "key is a Int64, which has no field 'x'",
            ),
            (
                "SELECT * FROM natal_alter_column('t', 's.a', 'AFTER nope')",
                "no 'nope' to move after",
            ),
            (
                "SELECT * FROM natal_alter_column('t', 'm.key', 'DROP NOT NULL')",
                "a map's keys cannot be null",
            ),
            (
                "SELECT * FROM natal_drop_column('t', 's..a')",
                "bad field path",
            ),
            (
                "SELECT * FROM natal_drop_column('t', '\"s.a')",
                "an unclosed quote",
            ),
            (
                "SELECT * FROM natal_add_column('t', 'nope.x', 'INT')",
                "no column named 'nope'",
            ),
            (
                "ALTER TABLE t DROP COLUMN s.a",
                "a field inside a column changes through natal_add_column",
            ),
        ],
    )
    .await;
    assert_eq!(version(&ctx).await, at, "nothing committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_reorder_by_sql_and_the_functions() {
    let (dir, ctx) = crate::common::catalog_session();
    rows(
        &ctx,
        "CREATE TABLE t (id INT NOT NULL, v VARCHAR, n BIGINT)",
    )
    .await;
    rows(&ctx, "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20)").await;
    let files = crate::schema::data_files(dir.path());
    rows(&ctx, "ALTER TABLE t MODIFY COLUMN v VARCHAR FIRST").await;
    rows(&ctx, "ALTER TABLE t ADD COLUMN z INT AFTER id").await;
    rows(&ctx, "ALTER TABLE t CHANGE COLUMN n total BIGINT AFTER v").await;
    rows(&ctx, "SELECT * FROM natal_alter_column('t', 'z', 'FIRST')").await;
    assert_eq!(crate::schema::data_files(dir.path()), files);
    let expected = "\
+---+---+-------+----+
| z | v | total | id |
+---+---+-------+----+
|   | a | 10    | 1  |
|   | b | 20    | 2  |
+---+---+-------+----+";
    assert_eq!(rows(&ctx, "SELECT * FROM t ORDER BY id").await, expected);
    // INSERT takes the new order; the first version keeps its own.
    rows(&ctx, "INSERT INTO t VALUES (7, 'c', 30, 3)").await;
    let three = rows(&ctx, "SELECT z, id FROM t WHERE id = 3").await;
    assert!(three.contains("| 7 | 3  |"), "{three}");
    let first = rows(&ctx, "SELECT * FROM \"t@v2\" ORDER BY id").await;
    assert!(
        first.starts_with("+----+---+----+\n| id | v | n  |"),
        "{first}"
    );
    let at = version(&ctx).await;
    crate::schema::fails_with(
        &ctx,
        &[
            (
                "ALTER TABLE t MODIFY COLUMN v INT FIRST",
                "not a lossless widening",
            ),
            (
                "ALTER TABLE t MODIFY COLUMN v VARCHAR AFTER nope",
                "no 'nope' to move after",
            ),
            (
                "ALTER TABLE t MODIFY COLUMN v VARCHAR AFTER v",
                "cannot move after itself",
            ),
            (
                "ALTER TABLE t MODIFY COLUMN v VARCHAR NOT NULL",
                "only relaxes nullability",
            ),
            (
                "ALTER TABLE t ADD COLUMN w INT DEFAULT 1 FIRST",
                "is added last",
            ),
        ],
    )
    .await;
    assert_eq!(version(&ctx).await, at, "nothing committed");
    // A move to where the column is publishes nothing.
    rows(&ctx, "ALTER TABLE t MODIFY COLUMN z INT FIRST").await;
    assert_eq!(version(&ctx).await, at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_columns_written_before_nested_ids_change_by_id() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/2026-12-02-nested");
    let scratch = tempfile::tempdir().unwrap();
    crate::fixtures::copy_dir(&fixture, scratch.path());
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, scratch.path().to_str().unwrap()).unwrap();
    let old = rows(&ctx, "SELECT max(version) AS v FROM \"n$versions\"").await;
    assert!(old.contains("| 6 |"), "{old}");
    for sql in [
        "SELECT * FROM natal_rename_column('n', 's.b.c', 'cc')",
        "SELECT * FROM natal_drop_column('n', 's.a')",
        "SELECT * FROM natal_add_column('n', 'l.element.z', 'INT')",
        "SELECT * FROM natal_alter_column('n', 'l.element.y', 'FIRST')",
    ] {
        run(&ctx, sql).await;
    }
    let reshaped = |source: &str| {
        format!(
            "SELECT key, CASE WHEN s IS NULL THEN NULL ELSE named_struct('b', named_struct( \
               'cc', s['b']['c'], 'd', s['b']['d'])) END AS s, \
             CASE WHEN l IS NULL THEN NULL ELSE [ \
               named_struct('y', l[1]['y'], 'x', l[1]['x'], 'z', CAST(NULL AS INT)), \
               named_struct('y', l[2]['y'], 'x', l[2]['x'], 'z', CAST(NULL AS INT))] END AS l, \
             m FROM {source} ORDER BY key"
        )
    };
    let expected = rows(&ctx, &reshaped("\"n@v6\"")).await;
    assert_eq!(rows(&ctx, "SELECT * FROM n ORDER BY key").await, expected);
    // Old files (no nested ids) and new ones (tagged) side by side, then one compacted file.
    run(&ctx, "INSERT INTO n SELECT * FROM n WHERE key = 1").await;
    run(&ctx, "SELECT * FROM natal_compact('n')").await;
    let both = rows(
        &ctx,
        "SELECT count(*) AS c FROM n WHERE key = 1 AND s['b']['cc'] IS NULL AND s['b']['d'] = 2",
    )
    .await;
    assert!(both.contains("| 2 |"), "{both}");
    let table = natal::Table::open(
        std::sync::Arc::new(
            object_store::local::LocalFileSystem::new_with_prefix(scratch.path()).unwrap(),
        ),
        "n".into(),
    );
    let latest = table.latest().await.unwrap();
    let flags = latest.manifest().reader_flags();
    assert_ne!(flags & natal::internals::format::flags::NESTED_FIELD_IDS, 0);
    // The version the old natal wrote keeps its names.
    let c = rows(&ctx, "SELECT s['b']['c'] AS c FROM \"n@v6\" WHERE key = 2").await;
    assert!(c.contains("| c2 |"), "{c}");
}

/// `k` and a struct `s {a INT NOT NULL, b VARCHAR}` for keys `keys`.
fn struct_rows(schema: &arrow::datatypes::SchemaRef, keys: std::ops::Range<i32>) -> RecordBatch {
    use arrow::array::{Int32Array, StringArray, StructArray};
    let DataType::Struct(fields) = schema.field(1).data_type() else {
        panic!("a struct")
    };
    let a = Int32Array::from_iter_values(keys.clone());
    let b = StringArray::from_iter_values(keys.clone().map(|k| format!("b{k}")));
    let s = StructArray::new(fields.clone(), vec![Arc::new(a), Arc::new(b)], None);
    RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int32Array::from_iter_values(keys)), Arc::new(s)],
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_planned_before_a_nested_change_rebases_over_it() {
    let fields = vec![
        Field::new("a", DataType::Int32, false),
        Field::new("b", DataType::Utf8, true),
    ];
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, false),
        Field::new("s", DataType::Struct(fields.into()), true),
    ]));
    let store = Arc::new(object_store::memory::InMemory::new());
    let table = Table::create(store, "t".into(), &schema, natal::TableOptions::default())
        .await
        .unwrap();
    table
        .append(vec![struct_rows(&schema, 0..5)])
        .await
        .unwrap();
    let planned = table.planned_at(table.latest().await.unwrap());
    let path = |p: &str| FieldPath::parse(p).unwrap();
    table
        .alter(vec![
            SchemaChange::DropNotNull { name: path("s.a") },
            SchemaChange::SetDataType {
                name: path("s.a"),
                data_type: DataType::Int64,
            },
            SchemaChange::RenameColumn {
                from: path("s.b"),
                to: "label".into(),
            },
            SchemaChange::AddColumn {
                name: path("s.c"),
                data_type: DataType::Float64,
            },
            SchemaChange::Move {
                name: path("s.c"),
                to: natal::Position::First,
            },
        ])
        .await
        .unwrap();
    // Written under the old shape, committed over the new: read by id.
    planned
        .append(vec![struct_rows(&schema, 10..13)])
        .await
        .unwrap();
    let snapshot = table.latest().await.unwrap();
    let batches: Vec<RecordBatch> =
        futures::TryStreamExt::try_collect(snapshot.scan(Default::default()).await.unwrap())
            .await
            .unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    for k in [0, 4, 10, 12] {
        let row = format!("| {k:<2} | {{c: , a: {k}, label: b{k}}} ");
        assert!(shown.contains(&row), "{row} in\n{shown}");
    }
    let s = snapshot.schema().field_by_name("s").unwrap();
    let DataType::Struct(now) = &s.data_type else {
        panic!("a struct")
    };
    let names: Vec<(&str, &DataType, bool)> = now
        .iter()
        .map(|f| (f.name().as_str(), f.data_type(), f.is_nullable()))
        .collect();
    assert_eq!(
        names,
        [
            ("c", &DataType::Float64, true),
            ("a", &DataType::Int64, true),
            ("label", &DataType::Utf8, true)
        ]
    );
    // Two nested changes planned together conflict like any two schema changes.
    let a = table.planned_at(table.latest().await.unwrap());
    let b = table.planned_at(table.latest().await.unwrap());
    a.alter(vec![SchemaChange::DropColumn { name: path("s.c") }])
        .await
        .unwrap();
    let lost = b
        .alter(vec![SchemaChange::RenameColumn {
            from: path("s.c"),
            to: "d".into(),
        }])
        .await
        .unwrap_err();
    assert!(matches!(lost, natal::Error::Conflict { .. }), "{lost}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parquet_file_that_tags_its_fields_with_ids_loads_into_a_table() {
    let (dir, ctx) = crate::common::catalog_session();
    run(&ctx, &format!("CREATE TABLE t AS {}", nested_rows(0, 9))).await;
    // natal's own data files tag nested fields with ids, as Iceberg's writers do.
    let file = crate::schema::data_files(dir.path())
        .into_iter()
        .next()
        .expect("a data file");
    let path = dir.path().join("t/data").join(file);
    ctx.register_parquet("file", path.to_str().unwrap(), Default::default())
        .await
        .unwrap();
    run(&ctx, "CREATE TABLE c AS SELECT * FROM file").await;
    run(&ctx, "INSERT INTO c SELECT * FROM file").await;
    let twice = rows(
        &ctx,
        "SELECT count(*) AS n, count(DISTINCT key) AS keys FROM c",
    )
    .await;
    assert!(twice.contains("| 20 | 10   |"), "{twice}");
    assert_eq!(
        rows(&ctx, "SELECT DISTINCT * FROM c ORDER BY key").await,
        rows(&ctx, "SELECT * FROM t ORDER BY key").await
    );
}
