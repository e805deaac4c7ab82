//! Updates by id and upserts choosing row patches (issue 63): under a table's patch share,
//! `Table::update_rows` patches the columns its update changed and `Table::upsert` the
//! columns its input gives, so the rows stay where they are; over it they are rewritten.
//! An upsert of some columns keeps the other columns of the rows it matches and gives the
//! rows it appends nulls there; bad input writes nothing. A patch of an indexed column
//! takes its fragment out of the index until the index is built again.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringViewArray};
use arrow::datatypes::{Int64Type, UInt64Type};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use natal::{RowId, ScanRequest, Table};

use crate::common::{patched_fragments, run};

/// A row as read: `val`, `name`, whether `doc` is set, and the row's address.
type Row = (Option<i64>, Option<String>, bool, u64);

/// `t (k, val, name, doc)` of keys 0..100 in two fragments, `doc` a long string (most of
/// the row's bytes), with the patch share `share`.
async fn table(share: Option<f64>) -> (tempfile::TempDir, SessionContext, Table) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    let create = "CREATE TABLE t (k BIGINT NOT NULL, val BIGINT, name VARCHAR, doc VARCHAR)";
    run(&ctx, create).await;
    for (from, to) in [(0, 49), (50, 99)] {
        let insert = format!(
            "INSERT INTO t SELECT value AS k, value AS val, concat('n', CAST(value AS VARCHAR)), \
             repeat(md5(CAST(value AS VARCHAR)), 20) FROM generate_series({from}, {to})"
        );
        run(&ctx, &insert).await;
    }
    let table =
        natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display())).unwrap();
    table.set_patch_max_share(share).await.unwrap();
    (dir, ctx, table)
}

/// Every row, by key.
async fn rows(table: &Table) -> BTreeMap<i64, Row> {
    let request = ScanRequest {
        with_row_addr: true,
        ..Default::default()
    };
    let scan = table.latest().await.unwrap().scan(request).await.unwrap();
    let batches: Vec<RecordBatch> = scan.try_collect().await.unwrap();
    let mut rows = BTreeMap::new();
    for batch in batches {
        let int = |i: usize| batch.column(i).as_primitive::<Int64Type>().clone();
        let (k, val) = (int(0), int(1));
        let name = batch.column(2).as_string_view();
        let doc = batch.column(3);
        let addr = batch.column(4).as_primitive::<UInt64Type>();
        for i in 0..batch.num_rows() {
            let row = (
                val.is_valid(i).then(|| val.value(i)),
                name.is_valid(i).then(|| name.value(i).to_string()),
                doc.is_valid(i),
                addr.value(i),
            );
            rows.insert(k.value(i), row);
        }
    }
    rows
}

/// The ids of the rows with keys `keys`.
async fn ids_of(table: &Table, keys: &[i64]) -> Vec<RowId> {
    let request = ScanRequest {
        columns: Some(vec!["k".into()]),
        with_row_id: true,
        ..Default::default()
    };
    let scan = table.latest().await.unwrap().scan(request).await.unwrap();
    let batches: Vec<RecordBatch> = scan.try_collect().await.unwrap();
    let mut found = BTreeMap::new();
    for batch in &batches {
        let k = batch.column(0).as_primitive::<Int64Type>();
        let id = batch.column(1).as_primitive::<UInt64Type>();
        for i in 0..batch.num_rows() {
            found.insert(k.value(i), RowId::from_u64(id.value(i)));
        }
    }
    keys.iter().map(|k| found[k]).collect()
}

fn keyed(keys: &[i64], column: (&str, ArrayRef)) -> RecordBatch {
    RecordBatch::try_from_iter([
        ("k", Arc::new(Int64Array::from(keys.to_vec())) as _),
        column,
    ])
    .unwrap()
}

/// Values of a `VARCHAR` column (SQL's strings are string views).
fn names(names: &[&str]) -> ArrayRef {
    Arc::new(StringViewArray::from(names.to_vec()))
}

/// An update adding `delta` to `val` and, if `doc` is given, setting it: every column of
/// the rows handed to it, in the table's schema.
fn add_to_val(
    delta: i64,
    doc: Option<&'static str>,
) -> impl Fn(&RecordBatch) -> natal::Result<RecordBatch> + Send + Sync {
    move |found: &RecordBatch| {
        let val = found.column(1).as_primitive::<Int64Type>();
        let val: Int64Array = val.iter().map(|v| v.map(|v| v + delta)).collect();
        let doc: ArrayRef = match doc {
            Some(doc) => names(&vec![doc; found.num_rows()]),
            None => found.column(3).clone(),
        };
        let columns = vec![
            found.column(0).clone(),
            Arc::new(val),
            found.column(2).clone(),
            doc,
        ];
        let schema = found.schema().project(&[0, 1, 2, 3])?;
        Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natal_patches_a_narrow_column_of_a_wide_table_by_default() {
    let (_dir, ctx, table) = table(None).await;
    let before = rows(&table).await;
    let update = "UPDATE t SET val = val + 1 WHERE k % 10 = 0";
    let plan = crate::common::answer(&ctx, &format!("EXPLAIN {update}"))
        .await
        .unwrap();
    assert!(plan.contains("1 assignments as row patches"), "{plan}");
    run(&ctx, update).await;
    let after = rows(&table).await;
    assert_eq!((after[&10].0, after[&10].3), (Some(11), before[&10].3));
    // The wide column is not: its update rewrites.
    let wide = "EXPLAIN UPDATE t SET doc = 'x' WHERE k = 1";
    let plan = crate::common::answer(&ctx, wide).await.unwrap();
    assert!(plan.contains("as rewrite"), "{plan}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_by_id_patches_the_columns_it_changed() {
    let (_dir, _ctx, table) = table(Some(0.5)).await;
    let before = rows(&table).await;
    let ids = ids_of(&table, &[1, 2, 70]).await;
    table
        .update_rows(&ids, &add_to_val(1000, None))
        .await
        .unwrap();
    let after = rows(&table).await;
    for k in [1, 2, 70] {
        let (val, name, doc, addr) = &after[&k];
        assert_eq!(*val, Some(k + 1000));
        assert_eq!(
            (name, doc, addr),
            (&before[&k].1, &true, &before[&k].3),
            "row {k}"
        );
    }
    assert_eq!(after[&3], before[&3]);
    let latest = table.latest().await.unwrap();
    assert_eq!(patched_fragments(&latest), 2, "one patch per fragment");

    // The wide column changed too: more than the share, so the rows are rewritten.
    table
        .update_rows(&ids[..1], &add_to_val(1, Some("d")))
        .await
        .unwrap();
    let rewritten = rows(&table).await;
    assert_eq!(rewritten[&1].0, Some(1001 + 1));
    assert_ne!(rewritten[&1].3, before[&1].3, "rewritten rows move");
    // Under a share of 0, every update rewrites.
    table.set_patch_max_share(Some(0.0)).await.unwrap();
    table
        .update_rows(&ids[1..2], &add_to_val(1, None))
        .await
        .unwrap();
    let moved = rows(&table).await;
    assert_eq!(moved[&2].0, Some(1003));
    assert_ne!(moved[&2].3, before[&2].3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_of_some_columns_keeps_the_others() {
    let (_dir, _ctx, table) = table(Some(0.5)).await;
    let before = rows(&table).await;
    let version = table.latest().await.unwrap().version();
    let input = keyed(&[1, 2, 500], ("name", names(&["a", "b", "c"])));
    table.upsert("k", vec![input]).await.unwrap();
    let after = rows(&table).await;
    assert_eq!(table.latest().await.unwrap().version(), version + 1);
    for (k, name) in [(1, "a"), (2, "b")] {
        let row = &before[&k];
        let expected = (row.0, Some(name.to_string()), true, row.3);
        assert_eq!(after[&k], expected, "patched in place, other columns kept");
    }
    let appended = &after[&500];
    assert_eq!(
        (appended.0, appended.1.as_deref(), appended.2),
        (None, Some("c"), false)
    );
    assert_eq!(patched_fragments(&table.latest().await.unwrap()), 1);

    // Only the key given: matched rows have nothing to change, the others are appended.
    let only_key =
        RecordBatch::try_from_iter([("k", Arc::new(Int64Array::from(vec![4, 600])) as ArrayRef)])
            .unwrap();
    table.upsert("k", vec![only_key]).await.unwrap();
    let keys_only = rows(&table).await;
    assert_eq!(
        keys_only[&4], before[&4],
        "a matched row without a change stays"
    );
    assert_eq!(keys_only[&600].0, None);

    // Over the share (a share of 0): rewritten, the other columns read from the old rows.
    table.set_patch_max_share(Some(0.0)).await.unwrap();
    table
        .upsert("k", vec![keyed(&[3], ("name", names(&["z"])))])
        .await
        .unwrap();
    let rewritten = rows(&table).await;
    let (val, name, doc, addr) = &rewritten[&3];
    assert_eq!((*val, name.as_deref(), *doc), (Some(3), Some("z"), true));
    assert_ne!(*addr, before[&3].3, "rewritten rows move");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_upserts_write_nothing() {
    let (dir, ctx, table) = table(Some(0.5)).await;
    let version = table.latest().await.unwrap().version();
    let int = |v: Vec<i64>| Arc::new(Int64Array::from(v)) as ArrayRef;
    let cases: Vec<(&str, Vec<RecordBatch>, &str)> = vec![
        (
            "k",
            vec![keyed(&[1], ("nope", names(&["a"])))],
            "no column 'nope'",
        ),
        (
            "k",
            vec![RecordBatch::try_from_iter([("name", names(&["a"]))]).unwrap()],
            "no key column 'k'",
        ),
        (
            "k",
            vec![
                keyed(&[1], ("name", names(&["a"]))),
                keyed(&[2], ("val", int(vec![2]))),
            ],
            "different columns",
        ),
        (
            "k",
            vec![keyed(&[1], ("name", int(vec![1])))],
            "column 'name' has type",
        ),
        (
            "k",
            vec![keyed(&[1, 1], ("name", names(&["a", "b"])))],
            "repeats a value",
        ),
        ("kk", vec![keyed(&[1], ("name", names(&["a"])))], "'kk'"),
    ];
    for (key, input, expected) in cases {
        let error = table.upsert(key, input).await.unwrap_err();
        assert!(matches!(error, natal::Error::InvalidInput(_)), "{error}");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
    assert_eq!(table.latest().await.unwrap().version(), version);

    // A NOT NULL column the input does not give: rows matching none cannot be appended.
    run(
        &ctx,
        "CREATE TABLE u (k BIGINT NOT NULL, must BIGINT NOT NULL, name VARCHAR)",
    )
    .await;
    run(&ctx, "INSERT INTO u VALUES (1, 10, 'a'), (2, 20, 'b')").await;
    let u = natal::datafusion::open_table(&ctx, &format!("{}/u", dir.path().display())).unwrap();
    let u_version = u.latest().await.unwrap().version();
    let input = keyed(&[2, 3], ("name", names(&["x", "y"])));
    let error = u.upsert("k", vec![input]).await.unwrap_err();
    assert!(error.to_string().contains("'must' is NOT NULL"), "{error}");
    assert_eq!(u.latest().await.unwrap().version(), u_version);
    // Every row matched: nothing to append, so nothing is missing.
    let input = keyed(&[2], ("name", names(&["x"])));
    u.upsert("k", vec![input]).await.unwrap();
    let answer = crate::common::answer(&ctx, "SELECT k, must, name FROM u ORDER BY k")
        .await
        .unwrap();
    assert!(answer.contains("| 2 | 20   | x    |"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_of_an_indexed_column_uncovers_its_fragment_until_it_is_indexed_again() {
    let (_dir, ctx, table) = table(Some(0.5)).await;
    table.create_index("by_val", "val").await.unwrap();
    let covered = |t: &natal::Snapshot| t.manifest().indexes.covered("by_val");
    assert_eq!(covered(&table.latest().await.unwrap()).len(), 2);
    let ids = ids_of(&table, &[1]).await;
    let before = rows(&table).await;
    // `val` 1 becomes 1001: a patch, the row stays.
    table
        .update_rows(&ids, &add_to_val(1000, None))
        .await
        .unwrap();
    let latest = table.latest().await.unwrap();
    assert_eq!(rows(&table).await[&1].3, before[&1].3);
    assert!(
        !covered(&latest).contains(0),
        "the patched fragment is scanned"
    );
    assert!(covered(&latest).contains(1));
    // The new value is found and the old one is not, the index used for the rest; then
    // again once the fragment is indexed anew, by a segment holding the patched value.
    let keys = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let text = crate::common::answer(&ctx, sql).await.unwrap();
            let rows = text.lines().filter(|l| l.starts_with('|')).skip(1);
            rows.map(|l| l.trim_matches(|c| c == '|' || c == ' ').to_string())
                .collect::<Vec<_>>()
        }
    };
    for indexed_again in [false, true] {
        if indexed_again {
            table.create_index("by_val", "val").await.unwrap();
            assert!(covered(&table.latest().await.unwrap()).contains(0));
        }
        assert_eq!(keys("SELECT k FROM t WHERE val = 1001").await, ["1"]);
        assert!(keys("SELECT k FROM t WHERE val = 1").await.is_empty());
        assert_eq!(keys("SELECT k FROM t WHERE val = 70").await, ["70"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_by_predicate_patches_until_its_changes_grow_too_wide() {
    let (_dir, _ctx, table) = table(Some(0.5)).await;
    let before = rows(&table).await;
    let tenth = || crate::common::key_matches(|k| k % 10 == 0);
    table
        .update_where(tenth(), &add_to_val(1000, None))
        .await
        .unwrap();
    let patched = rows(&table).await;
    for (k, row) in &patched {
        let val = Some(k + if k % 10 == 0 { 1000 } else { 0 });
        assert_eq!(
            (row.0, row.3),
            (val, before[k].3),
            "row {k} patched in place"
        );
    }
    assert_eq!(patched_fragments(&table.latest().await.unwrap()), 2);

    // Values equal to the old ones: nothing is written.
    let version = table.latest().await.unwrap().version();
    let same = table.update_where(tenth(), &add_to_val(0, None)).await;
    assert!(!same.unwrap().published);
    assert_eq!(table.latest().await.unwrap().version(), version);

    // `val` of the first fragment's rows, then `doc` of the second's: once `doc` changes,
    // the share is passed, and every updated row is rewritten, the first ones too.
    let mixed = |found: &RecordBatch| {
        let k = found.column(0).as_primitive::<Int64Type>();
        let first = k.values().iter().all(|&k| k < 50);
        match first {
            true => add_to_val(1, None)(found),
            false => add_to_val(0, Some("d"))(found),
        }
    };
    table.update_where(tenth(), &mixed).await.unwrap();
    assert_eq!(table.latest().await.unwrap().version(), version + 1);
    let after = rows(&table).await;
    for k in (0..100).step_by(10) {
        let (val, _, doc, addr) = &after[&k];
        let expected = if k < 50 { k + 1001 } else { k + 1000 };
        assert_eq!(*val, Some(expected), "row {k}");
        assert!(*doc);
        assert_ne!(*addr, before[&k].3, "row {k} rewritten");
    }
    assert_eq!(after[&1], before[&1]);
}
