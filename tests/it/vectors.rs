//! Vector columns: `VECTOR(n)` in SQL, the distance functions, and exact nearest-neighbour
//! search by `ORDER BY distance LIMIT k`, checked against brute force over a model of the
//! table through inserts, updates, deletes and compaction.

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float32Type, Int64Type};
use datafusion::prelude::SessionContext;
use natal::internals::format::flags;

use crate::common::{answer, catalog_session};

/// `sql` run through natal's SQL (which knows `VECTOR(n)`), its rows.
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<arrow::array::RecordBatch> {
    natal::datafusion::sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vector_columns_are_fixed_size_lists_of_floats_from_any_list_of_numbers() {
    let dir = tempfile::tempdir().unwrap();
    // Files by path, as the natal CLI reads them.
    let ctx = SessionContext::new().enable_url_table();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    let file = dir.path().join("vectors.parquet");
    let file = file.display();
    rows(&ctx, "CREATE TABLE t (id BIGINT, e VECTOR(3))").await;
    rows(
        &ctx,
        "INSERT INTO t VALUES (1, [1.0, 0.0, 0.0]), (2, [0, 1, 0]), (3, NULL)",
    )
    .await;
    let shown = answer(&ctx, "SELECT arrow_typeof(e) AS t FROM t LIMIT 1")
        .await
        .unwrap();
    assert!(shown.contains("FixedSizeList(3 x Float32)"), "{shown}");
    // From a Parquet file's list column, and by ALTER TABLE.
    rows(
        &ctx,
        &format!("COPY (SELECT 4 AS id, [0.5, 0.5, 0.5] AS e) TO '{file}'"),
    )
    .await;
    rows(&ctx, &format!("INSERT INTO t SELECT id, e FROM '{file}'")).await;
    rows(&ctx, "ALTER TABLE t ADD COLUMN f VECTOR(2)").await;
    let shown = answer(&ctx, "SELECT arrow_typeof(f) AS t FROM t LIMIT 1")
        .await
        .unwrap();
    assert!(shown.contains("FixedSizeList(2 x Float32)"), "{shown}");
    let shown = answer(&ctx, "SELECT id, e FROM t ORDER BY id")
        .await
        .unwrap();
    assert!(shown.contains("| 4  | [0.5, 0.5, 0.5] |"), "{shown}");

    // A vector of another length is refused, and nothing of the statement is committed.
    let versions = answer(&ctx, "SELECT count(*) AS n FROM \"t$versions\"")
        .await
        .unwrap();
    for statement in [
        "INSERT INTO t (id, e) VALUES (5, [1.0, 2.0, 3.0]), (6, [1.0, 2.0])",
        "UPDATE t SET e = [1.0, 2.0] WHERE id = 1",
        "MERGE INTO t USING (SELECT 1 AS id, [1.0, 2.0] AS e) s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET e = s.e",
        "MERGE INTO t USING (SELECT 9 AS id, [1.0, 2.0] AS e) s ON t.id = s.id \
         WHEN NOT MATCHED THEN INSERT (id, e) VALUES (s.id, s.e)",
    ] {
        let error = answer(&ctx, statement).await.unwrap_err().to_string();
        assert!(
            error.contains(
                "column e takes vectors of 3 components (VECTOR(3)); a value given has 2"
            ),
            "{statement}: {error}"
        );
    }
    // Rows of a query are cast as they stream in: the error names the row.
    let error = answer(
        &ctx,
        "INSERT INTO t (id, e) SELECT id + 100, array_slice(e, 1, 2) FROM t",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        error.contains(
            "column e takes vectors of 3 components (VECTOR(3)); row 1 of the rows \
                        inserted has 2"
        ),
        "{error}"
    );
    let after = answer(&ctx, "SELECT count(*) AS n FROM \"t$versions\"")
        .await
        .unwrap();
    assert_eq!(versions, after);
    let error = answer(&ctx, "CREATE TABLE bad (e VECTOR(0))")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("takes its dimension"), "{error}");
    let flags_of_t = natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display()))
        .unwrap()
        .latest()
        .await
        .unwrap()
        .manifest()
        .reader_flags();
    // Data files hold a vector's components as bytes: readers must know.
    let wanted = flags::STORED_TYPES | flags::VECTOR_BYTES;
    assert_eq!(flags_of_t & wanted, wanted);
}

/// A seeded stream of numbers in [-1, 1).
struct Numbers(u64);

impl Numbers {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn vector(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn literal(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", parts.join(", "))
}

/// The `k` nearest of `model` to `query` by `metric`, ties by id.
fn brute_force(
    model: &BTreeMap<i64, Vec<f32>>,
    query: &[f32],
    metric: natal::internals::vector::Metric,
    k: usize,
) -> Vec<i64> {
    let mut scored: Vec<(f32, i64)> = (model.iter())
        .map(|(id, v)| (metric.distance(v, query), *id))
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, id)| id).collect()
}

/// What SQL answers for the `k` nearest, ties by id.
async fn nearest_by_sql(ctx: &SessionContext, function: &str, query: &[f32], k: usize) -> Vec<i64> {
    let order = if function == "inner_product" {
        "DESC"
    } else {
        "ASC"
    };
    let sql = format!(
        "SELECT id FROM t ORDER BY {function}(e, {}) {order}, id LIMIT {k}",
        literal(query)
    );
    let batches = rows(ctx, &sql).await;
    (batches.iter())
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_search_matches_brute_force_through_updates_deletes_and_compaction() {
    use natal::internals::vector::Metric;
    let (_dir, ctx) = catalog_session();
    let dimension = 12;
    let mut numbers = Numbers(7);
    let mut model: BTreeMap<i64, Vec<f32>> = BTreeMap::new();
    rows(
        &ctx,
        &format!("CREATE TABLE t (id BIGINT, e VECTOR({dimension}))"),
    )
    .await;
    for part in 0..4 {
        let mut values = Vec::new();
        for id in part * 100..(part + 1) * 100 {
            let v = numbers.vector(dimension);
            values.push(format!("({id}, {})", literal(&v)));
            model.insert(id, v);
        }
        rows(&ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
    }
    let check = |model: BTreeMap<i64, Vec<f32>>, queries: Vec<Vec<f32>>| {
        let ctx = ctx.clone();
        async move {
            for query in &queries {
                for (function, metric) in [
                    ("l2_distance", Metric::L2),
                    ("cosine_distance", Metric::Cosine),
                    ("inner_product", Metric::Dot),
                ] {
                    let expected = brute_force(&model, query, metric, 10);
                    let found = nearest_by_sql(&ctx, function, query, 10).await;
                    assert_eq!(found, expected, "{function}");
                }
            }
        }
    };
    let queries: Vec<Vec<f32>> = (0..3).map(|_| numbers.vector(dimension)).collect();
    check(model.clone(), queries.clone()).await;

    // New vectors for some rows, others deleted: the search sees each row's latest vector.
    for id in (0..400).step_by(7) {
        let v = numbers.vector(dimension);
        rows(
            &ctx,
            &format!("UPDATE t SET e = {} WHERE id = {id}", literal(&v)),
        )
        .await;
        model.insert(id, v);
    }
    rows(&ctx, "DELETE FROM t WHERE id % 5 = 0").await;
    model.retain(|id, _| id % 5 != 0);
    check(model.clone(), queries.clone()).await;
    rows(&ctx, "SELECT * FROM natal_compact('t')").await;
    check(model.clone(), queries).await;

    // The distance read back equals the kernel's.
    let query = numbers.vector(dimension);
    let sql = format!(
        "SELECT id, l2_distance(e, {}) AS d FROM t ORDER BY d LIMIT 1",
        literal(&query)
    );
    let batches = rows(&ctx, &sql).await;
    let id = batches[0].column(0).as_primitive::<Int64Type>().value(0);
    let d = batches[0].column(1).as_primitive::<Float32Type>().value(0);
    assert_eq!(d, Metric::L2.distance(&model[&id], &query));
    assert!(batches[0].column(1).null_count() == 0);
}

/// Without an index, natal's exact search stands in for the scan under a top-k by a
/// distance: it reads the vector column (and the filter's) for every row and the other
/// columns for the `k` rows only, and answers as DataFusion's own top-k over the scan does
/// (`natal.use_index = false`) — rows without a vector last when fewer than `k` have one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exact_search_reads_the_other_columns_of_the_rows_it_returns_only() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, store) = crate::common::counted_session(dir.path());
    rows(
        &ctx,
        "CREATE TABLE t (id BIGINT, e VECTOR(4), body VARCHAR)",
    )
    .await;
    // A body of 512 hex digits a row beside a vector of 16 bytes.
    let body: Vec<String> = (0..16)
        .map(|i| format!("md5(CAST(value * 16 + {i} AS VARCHAR))"))
        .collect();
    rows(
        &ctx,
        &format!(
            "INSERT INTO t SELECT value, [CAST(sin(value) AS FLOAT), CAST(cos(value) AS FLOAT), \
             CAST(value % 7 AS FLOAT), 1.0], concat({}) FROM generate_series(0, 19999)",
            body.join(", ")
        ),
    )
    .await;
    let mut answers = Vec::new();
    let mut read = Vec::new();
    let searches = [
        "SELECT id, body FROM t ORDER BY l2_distance(e, [0.5, 0.5, 3.0, 1.0]) LIMIT 5",
        "SELECT id, l2_distance(e, [0.5, 0.5, 3.0, 1.0]) AS d, body FROM t WHERE id % 2 = 0 \
         ORDER BY d LIMIT 5",
        "SELECT id, body FROM t ORDER BY inner_product(e, [0.5, 0.5, 3.0, 1.0]) DESC NULLS LAST \
         LIMIT 3",
    ];
    for use_index in [true, false] {
        rows(&ctx, &format!("SET natal.use_index = {use_index}")).await;
        for search in searches {
            let shown = answer(&ctx, &format!("EXPLAIN {search}")).await.unwrap();
            assert_eq!(shown.contains("exact metric="), use_index, "{shown}");
            store.reset();
            answers.push(answer(&ctx, search).await.unwrap());
            read.push(store.tally().bytes_read);
        }
    }
    assert_eq!(answers[..3], answers[3..]);
    for (search, (exact, scanned)) in searches.iter().zip(read.iter().zip(&read[3..])) {
        assert!(
            exact * 3 < *scanned,
            "{search}: {exact} bytes read, {scanned} by the scan"
        );
    }
    // DESC puts NULL distances first: the sort's own answer. Nor does a search stand in for
    // a scan of narrow rows (an id beside the vector): it would read as much, and take.
    rows(&ctx, "SET natal.use_index = true").await;
    for scan in [
        "SELECT id, body FROM t ORDER BY inner_product(e, [1.0, 0.0, 0.0, 0.0]) DESC LIMIT 3",
        "SELECT id FROM t ORDER BY l2_distance(e, [1.0, 0.0, 0.0, 0.0]) LIMIT 3",
    ] {
        let shown = answer(&ctx, &format!("EXPLAIN {scan}")).await.unwrap();
        assert!(!shown.contains("NatalNearestExec"), "{shown}");
    }

    // Fewer rows with a vector than asked for: those, then rows without one.
    rows(
        &ctx,
        "CREATE TABLE few (id BIGINT, e VECTOR(2), note VARCHAR)",
    )
    .await;
    rows(
        &ctx,
        "INSERT INTO few VALUES (1, [0.0, 1.0], repeat(md5('1'), 3)), \
         (2, NULL, repeat(md5('2'), 3)), (3, [2.0, 2.0], repeat(md5('3'), 3)), \
         (4, NULL, repeat(md5('4'), 3)), (5, [0.0, 0.5], repeat(md5('5'), 3))",
    )
    .await;
    let search = "SELECT id, l2_distance(e, [0.0, 0.0]) AS d, note FROM few ORDER BY d LIMIT 4";
    let shown = answer(&ctx, &format!("EXPLAIN {search}")).await.unwrap();
    assert!(shown.contains("exact metric=l2"), "{shown}");
    let found = answer(&ctx, search).await.unwrap();
    let cells: Vec<(String, String)> = (found.lines())
        .filter(|l| l.starts_with("| "))
        .skip(1)
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].to_string(), cells[2].chars().take(5).collect())
        })
        .collect();
    let expected = [("5", "0.5"), ("1", "1.0"), ("3", "2.828")];
    for (at, (id, d)) in expected.iter().enumerate() {
        assert_eq!(
            (cells[at].0.as_str(), cells[at].1.as_str()),
            (*id, *d),
            "{found}"
        );
    }
    assert_eq!(cells.len(), 4, "{found}");
    assert!(
        ["2", "4"].contains(&cells[3].0.as_str()) && cells[3].1.is_empty(),
        "{found}"
    );
}
