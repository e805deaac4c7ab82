//! What DataFusion's own tables do, natal's do too: an application's functions keep their
//! names through `register`, joins run on keys whose bounds DataFusion cannot compute, every
//! type DataFusion's tables hold is stored (unions, dictionaries of structs and of
//! dictionaries), and a small table reads back in the order it was written.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, DictionaryArray, Float64Array, Int16Array, Int32Array, Int64Array, Int8Array,
    RecordBatch, StringArray, StructArray, UnionArray,
};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, Field, Int16Type, Int8Type, Schema, UnionFields, UnionMode};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
use datafusion::physical_plan::ExecutionPlanProperties;
use datafusion::prelude::SessionContext;
use natal::{Table, TableOptions};

use crate::common::{answer, run};
use crate::fixtures::local_store;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_function_under_a_built_in_alias_keeps_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    // `array_contains` is an alias of DataFusion's `array_has`; the application's own
    // function of that name (as datafusion-spark registers one) must stay what it means.
    let own = create_udf(
        "array_contains",
        vec![DataType::Int64],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|_: &[ColumnarValue]| {
            Ok(ColumnarValue::Scalar(
                datafusion::scalar::ScalarValue::Utf8(Some("the application's".into())),
            ))
        }),
    );
    ctx.register_udf(own);
    run(&ctx, "SET datafusion.execution.batch_size = 1234").await;
    let session_id = ctx.session_id();
    let functions_before = ctx.state().scalar_functions().len();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();

    let shown = answer(&ctx, "SELECT array_contains(7) AS f").await.unwrap();
    assert!(shown.contains("the application's"), "{shown}");
    // The built-in keeps its own name, and the session what it held.
    let shown = answer(&ctx, "SELECT array_has(make_array(1, 2), 2) AS f")
        .await
        .unwrap();
    assert!(shown.contains("true"), "{shown}");
    assert_eq!(ctx.session_id(), session_id);
    assert_eq!(ctx.state().config().batch_size(), 1234);
    // natal's own functions joined them: nothing was lost.
    assert!(ctx.state().scalar_functions().len() >= functions_before);
    // Registered twice (a second root), nothing changes either.
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    let shown = answer(&ctx, "SELECT array_contains(7) AS f").await.unwrap();
    assert!(shown.contains("the application's"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_run_on_keys_whose_bounds_datafusion_cannot_compute() {
    let (_dir, ctx) = crate::common::catalog_session();
    run(
        &ctx,
        "CREATE TABLE t_map_int AS SELECT MAP {'a': 1, 'b': 5} AS m",
    )
    .await;
    run(
        &ctx,
        "CREATE TABLE t_map_str AS SELECT MAP {'a': '1', 'b': '5'} AS m",
    )
    .await;
    let shown = answer(
        &ctx,
        "SELECT t1.m FROM t_map_int t1, t_map_str t2 WHERE t1.m = t2.m",
    )
    .await
    .unwrap();
    assert!(shown.contains("{a: 1, b: 5}"), "{shown}");
    // Lists and structs as keys too, joined with a table of other rows.
    run(&ctx, "CREATE TABLE l1 AS SELECT [1, 2] AS l, {x: 1} AS s").await;
    run(
        &ctx,
        "CREATE TABLE l2 AS SELECT * FROM (VALUES ([1, 2], {x: 1}), ([3], {x: 2})) AS v(l, s)",
    )
    .await;
    for key in ["l", "s"] {
        let sql = format!("SELECT count(*) AS n FROM l1 JOIN l2 ON l1.{key} = l2.{key}");
        let shown = answer(&ctx, &sql).await.unwrap();
        assert!(shown.contains("| 1 |"), "{key}: {shown}");
    }
    // Keys with bounds still take the join's filter (the scan shows it pushed).
    run(
        &ctx,
        "CREATE TABLE a AS SELECT value AS k FROM generate_series(1, 100)",
    )
    .await;
    run(
        &ctx,
        "CREATE TABLE b AS SELECT value AS k FROM generate_series(1, 3)",
    )
    .await;
    let sql = "SELECT count(*) FROM b JOIN a ON a.k = b.k";
    let (plan, _) = crate::common::physical_plan(&ctx, sql).await;
    let batches = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx())
        .await
        .unwrap();
    let counted = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    assert!(counted.contains("| 3 "), "{counted}");
    let shown = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(false)
        .to_string();
    assert!(shown.contains("pushed="), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_table_reads_back_in_the_order_it_was_written() {
    let (_dir, ctx) = crate::common::catalog_session();
    run(&ctx, "SET datafusion.execution.target_partitions = 4").await;
    run(&ctx, "CREATE TABLE t (k INT, v TEXT)").await;
    run(&ctx, "INSERT INTO t VALUES (3, 'c')").await;
    run(&ctx, "INSERT INTO t VALUES (1, 'a'), (2, 'b')").await;
    run(&ctx, "INSERT INTO t VALUES (0, 'z')").await;
    let rows = natal::datafusion::sql(&ctx, "SELECT k FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let keys: Vec<i32> = (rows.iter())
        .flat_map(|b| {
            let column = b.column(0).as_any().downcast_ref::<Int32Array>().unwrap();
            column.values().to_vec()
        })
        .collect();
    assert_eq!(keys, [3, 1, 2, 0]);
    let (plan, _) = crate::common::physical_plan(&ctx, "SELECT k FROM t").await;
    assert_eq!(plan.output_partitioning().partition_count(), 1);
}

/// Unions (sparse and dense), a dictionary of structs and one of dictionaries, beside a key.
fn shapes_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new(
            "us",
            DataType::Union(union_fields(), UnionMode::Sparse),
            false,
        ),
        Field::new(
            "ud",
            DataType::Union(union_fields(), UnionMode::Dense),
            false,
        ),
        Field::new(
            "ds",
            DataType::Dictionary(Box::new(DataType::Int16), Box::new(point())),
            true,
        ),
        Field::new(
            "dd",
            DataType::Dictionary(
                Box::new(DataType::Int8),
                Box::new(DataType::Dictionary(
                    Box::new(DataType::Int16),
                    Box::new(DataType::Utf8),
                )),
            ),
            true,
        ),
    ]))
}

fn union_fields() -> UnionFields {
    UnionFields::try_new(
        [0, 3],
        [
            Field::new("int", DataType::Int32, true),
            Field::new("text", DataType::Utf8, true),
        ],
    )
    .unwrap()
}

fn point() -> DataType {
    DataType::Struct(
        vec![
            Field::new("x", DataType::Float64, true),
            Field::new("label", DataType::Utf8, true),
        ]
        .into(),
    )
}

/// Rows `keys` of [`shapes_schema`]: each column's value a function of the key.
fn shapes_batch(keys: std::ops::Range<i64>) -> RecordBatch {
    let n = keys.clone().count();
    let type_ids: Vec<i8> = keys
        .clone()
        .map(|k| if k % 3 == 0 { 3 } else { 0 })
        .collect();
    let ints: Vec<Option<i32>> = keys
        .clone()
        .map(|k| (k % 5 != 4).then_some(k as i32))
        .collect();
    let texts: Vec<String> = keys.clone().map(|k| format!("t{k}")).collect();
    let sparse = UnionArray::try_new(
        union_fields(),
        ScalarBuffer::from(type_ids.clone()),
        None,
        vec![
            Arc::new(Int32Array::from(ints.clone())),
            Arc::new(StringArray::from(texts.clone())),
        ],
    )
    .unwrap();
    // Dense: each child holds its own rows, in row order.
    let (mut offsets, mut dense_ints, mut dense_texts) = (Vec::new(), Vec::new(), Vec::new());
    for (i, &t) in type_ids.iter().enumerate() {
        if t == 3 {
            offsets.push(dense_texts.len() as i32);
            dense_texts.push(texts[i].clone());
        } else {
            offsets.push(dense_ints.len() as i32);
            dense_ints.push(ints[i]);
        }
    }
    let dense = UnionArray::try_new(
        union_fields(),
        ScalarBuffer::from(type_ids),
        Some(ScalarBuffer::from(offsets)),
        vec![
            Arc::new(Int32Array::from(dense_ints)),
            Arc::new(StringArray::from(dense_texts)),
        ],
    )
    .unwrap();
    let DataType::Struct(point_fields) = point() else {
        unreachable!()
    };
    let points = StructArray::new(
        point_fields,
        vec![
            Arc::new(Float64Array::from(vec![0.5, 1.5, -2.0])),
            Arc::new(StringArray::from(vec![Some("p"), None, Some("r")])),
        ],
        None,
    );
    let point_keys: Int16Array = keys
        .clone()
        .map(|k| (k % 4 != 1).then_some((k % 3) as i16))
        .collect();
    let of_structs = DictionaryArray::<Int16Type>::try_new(point_keys, Arc::new(points)).unwrap();
    let words = DictionaryArray::<Int16Type>::try_new(
        Int16Array::from(vec![1, 0, 1]),
        Arc::new(StringArray::from(vec!["red", "green"])),
    )
    .unwrap();
    let word_keys: Int8Array = keys
        .clone()
        .map(|k| (k % 6 != 5).then_some((k % 3) as i8))
        .collect();
    let of_dictionaries = DictionaryArray::<Int8Type>::try_new(word_keys, Arc::new(words)).unwrap();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(keys)),
        Arc::new(sparse),
        Arc::new(dense),
        Arc::new(of_structs),
        Arc::new(of_dictionaries),
    ];
    let batch = RecordBatch::try_new(shapes_schema(), columns).unwrap();
    assert_eq!(batch.num_rows(), n);
    batch
}

/// Every column of `table` (or a query over it, `FROM` given), ordered by key, with each
/// column's type.
const DESCRIBE: &str = "SELECT k, us, ud, ds, dd, arrow_typeof(us) AS tus, \
     arrow_typeof(ud) AS tud, arrow_typeof(ds) AS tds, arrow_typeof(dd) AS tdd";

/// Writes table `s` of [`shapes_schema`] in two appends (versions 2 and 3) under `dir`.
pub async fn write_shapes_table(dir: &Path) -> Table {
    let table = Table::create(
        local_store(dir),
        "s".into(),
        &shapes_schema(),
        TableOptions::default(),
    )
    .await
    .unwrap();
    table.append(vec![shapes_batch(0..7)]).await.unwrap();
    table.append(vec![shapes_batch(7..12)]).await.unwrap();
    table
}

/// What DataFusion's own table of the same rows answers `sql` (over `s`).
async fn on_datafusion(sql: &str) -> String {
    let ctx = SessionContext::new();
    let rows = vec![vec![shapes_batch(0..7), shapes_batch(7..12)]];
    let memory = MemTable::try_new(shapes_schema(), rows).unwrap();
    ctx.register_table("s", Arc::new(memory)).unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string()
}

/// Table `s` as [`write_shapes_table`] wrote it, whatever has happened to it since: what a
/// fixture holding it answers.
pub async fn describe_shapes_table(ctx: &SessionContext) -> String {
    answer(ctx, &format!("{DESCRIBE} FROM s ORDER BY k"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unions_and_dictionaries_of_nested_values_are_stored_as_declared() {
    let dir = tempfile::tempdir().unwrap();
    let table = write_shapes_table(dir.path()).await;
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    let all = format!("{DESCRIBE} FROM s ORDER BY k");
    let expected = on_datafusion(&all).await;
    assert_eq!(answer(&ctx, &all).await.unwrap(), expected);
    let flags = table.latest().await.unwrap().manifest().reader_flags();
    assert_ne!(flags & natal::internals::format::flags::STORED_SHAPES, 0);

    // An update rewrites the rows it changes, keeping their values; a take finds them.
    run(&ctx, "UPDATE s SET k = k + 100 WHERE k % 2 = 0").await;
    let moved = format!(
        "{DESCRIBE} FROM (SELECT CASE WHEN k % 2 = 0 THEN k + 100 ELSE k END AS k, us, ud, \
         ds, dd FROM s) ORDER BY k"
    );
    let expected_moved = on_datafusion(&moved).await;
    assert_eq!(answer(&ctx, &all).await.unwrap(), expected_moved);
    let take = format!(
        "{DESCRIBE} FROM \"s$rows\" WHERE _rowid IN (SELECT _rowid FROM \"s$rows\" \
         WHERE k IN (104, 5)) ORDER BY k"
    );
    let expected_taken = on_datafusion(&format!(
        "{DESCRIBE} FROM (SELECT CASE WHEN k % 2 = 0 THEN k + 100 ELSE k END AS k, us, ud, \
         ds, dd FROM s) WHERE k IN (104, 5) ORDER BY k"
    ))
    .await;
    assert_eq!(answer(&ctx, &take).await.unwrap(), expected_taken);

    // Compaction merges the fragments; time travel reads the version before the update.
    run(&ctx, "SELECT * FROM natal_compact('s')").await;
    assert_eq!(answer(&ctx, &all).await.unwrap(), expected_moved);
    assert_eq!(answer(&ctx, &take).await.unwrap(), expected_taken);
    let before = format!("{DESCRIBE} FROM \"s@v3\" ORDER BY k");
    assert_eq!(answer(&ctx, &before).await.unwrap(), expected);

    // Written through SQL too (CREATE TABLE AS from another table, INSERT ... SELECT).
    run(&ctx, "CREATE TABLE s2 AS SELECT * FROM \"s@v3\"").await;
    run(&ctx, "INSERT INTO s2 SELECT * FROM \"s@v3\" WHERE k < 2").await;
    let doubled = answer(&ctx, "SELECT count(*) AS n, count(DISTINCT k) AS d FROM s2").await;
    assert!(doubled.unwrap().contains("| 14 | 12 |"));
}
