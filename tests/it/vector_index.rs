//! Vector indexes against a model: random sequences of inserts, vector updates, updates of
//! another column (`tag`), deletes, compactions, index builds, index optimizations and
//! restores on a table with a vector column, its updates written as row patches or as
//! rewritten rows; after each step the
//! indexed search with every partition probed answers exactly as brute force over the model
//! does (`ivf_flat`: no quantization; `ivf_pq`: every candidate refined by its exact
//! vector), and a search probing one partition never returns a deleted row or a row's vector
//! from before its update.

use std::collections::BTreeMap;

use arrow::array::AsArray;
use arrow::datatypes::{Float32Type, Int64Type};
use datafusion::prelude::SessionContext;
use natal::{Metric, NearestOptions, Table};
use proptest::prelude::*;

const DIMENSION: usize = 6;

#[derive(Debug, Clone)]
enum Step {
    Insert(Vec<Vec<f32>>),
    Update {
        every: i64,
        seed: u32,
    },
    /// `tag` of some rows changed: under `patches`, a row patch the vector index's segments
    /// do not hold, the vectors unchanged.
    Retag {
        every: i64,
    },
    Delete {
        every: i64,
    },
    Compact,
    Index {
        partitions: u32,
    },
    Optimize {
        stale_share: u8,
    },
    Restore {
        back: usize,
    },
}

fn vector() -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(-10f32..10.0, DIMENSION)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => proptest::collection::vec(vector(), 1..40).prop_map(Step::Insert),
        2 => (2i64..6, any::<u32>()).prop_map(|(every, seed)| Step::Update { every, seed }),
        2 => (2i64..5).prop_map(|every| Step::Retag { every }),
        1 => (3i64..9).prop_map(|every| Step::Delete { every }),
        1 => Just(Step::Compact),
        2 => (1u32..6).prop_map(|partitions| Step::Index { partitions }),
        1 => (0usize..4).prop_map(|back| Step::Restore { back }),
        2 => (0u8..3).prop_map(|stale_share| Step::Optimize { stale_share }),
    ]
}

fn literal(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", parts.join(", "))
}

/// A vector made from `seed` and `id`, deterministically.
fn seeded(seed: u32, id: i64) -> Vec<f32> {
    (0..DIMENSION)
        .map(|d| (((seed as i64 * 31 + id * 17 + d as i64 * 7) % 200) as f32) / 10.0 - 10.0)
        .collect()
}

async fn sql(ctx: &SessionContext, text: &str) {
    natal::datafusion::sql(ctx, text)
        .await
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{text}: {e}"));
}

/// The ids (first column) `sql` answers.
async fn ids_of(ctx: &SessionContext, sql: &str) -> Vec<i64> {
    let batches = natal::datafusion::sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    (batches.iter())
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

/// The keys `nearest` returns, with their distances.
async fn nearest(
    table: &Table,
    query: &[f32],
    k: usize,
    (nprobes, refine_factor): (usize, Option<usize>),
) -> Vec<(i64, f32)> {
    let snapshot = table.latest().await.unwrap();
    let options = NearestOptions {
        nprobes,
        refine_factor,
        ..Default::default()
    };
    ids_and_distances(&snapshot.nearest("e", query, k, options).await.unwrap())
}

/// The `id` and `_distance` of each row a nearest-rows search answered.
pub fn ids_and_distances(rows: &arrow::array::RecordBatch) -> Vec<(i64, f32)> {
    let ids = rows
        .column_by_name("id")
        .unwrap()
        .as_primitive::<Int64Type>();
    let distances = (rows.column_by_name(natal::DISTANCE).unwrap()).as_primitive::<Float32Type>();
    (0..rows.num_rows())
        .map(|i| (ids.value(i), distances.value(i)))
        .collect()
}

/// An empty table `t (id, e VECTOR, tag)` in a fresh catalog, and a handle on it.
async fn tagged_table() -> (tempfile::TempDir, SessionContext, Table) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    sql(
        &ctx,
        &format!("CREATE TABLE t (id BIGINT, e VECTOR({DIMENSION}), tag BIGINT)"),
    )
    .await;
    let table =
        natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display())).unwrap();
    (dir, ctx, table)
}

/// `kind`: the index kind every `Index` step builds; `patches`: updates write row patches
/// (of `tag`, and of `e` too), or rewrite rows.
async fn run_steps(steps: Vec<Step>, queries: Vec<Vec<f32>>, kind: &str, patches: bool) {
    let (_dir, ctx, table) = tagged_table().await;
    let share = if patches { 1 } else { 0 };
    sql(&ctx, &format!("SET natal.patch_max_share = {share}")).await;
    // Every partition probed and every candidate refined: the indexed SQL search is exact.
    sql(&ctx, "SET natal.nprobes = 1000000").await;
    sql(&ctx, "SET natal.refine_factor = 1000000").await;
    let mut model: BTreeMap<i64, Vec<f32>> = BTreeMap::new();
    // Every version's rows, for restores.
    let mut history: Vec<(u64, BTreeMap<i64, Vec<f32>>)> = Vec::new();
    let mut next = 0i64;
    for step in steps {
        match step {
            Step::Insert(vectors) => {
                let values: Vec<String> = (vectors.iter())
                    .enumerate()
                    .map(|(i, v)| format!("({}, {}, 0)", next + i as i64, literal(v)))
                    .collect();
                sql(&ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
                for v in vectors {
                    model.insert(next, v);
                    next += 1;
                }
            }
            Step::Update { every, seed } => {
                let ids: Vec<i64> = model.keys().copied().filter(|id| id % every == 1).collect();
                for id in ids.iter().take(4) {
                    let v = seeded(seed, *id);
                    sql(
                        &ctx,
                        &format!("UPDATE t SET e = {} WHERE id = {id}", literal(&v)),
                    )
                    .await;
                    model.insert(*id, v);
                }
            }
            Step::Retag { every } => {
                let retag = format!("UPDATE t SET tag = tag + 1 WHERE id % {every} = 2");
                sql(&ctx, &retag).await;
            }
            Step::Delete { every } => {
                sql(&ctx, &format!("DELETE FROM t WHERE id % {every} = 0")).await;
                model.retain(|id, _| id % every != 0);
            }
            Step::Compact => sql(&ctx, "SELECT * FROM natal_compact('t')").await,
            Step::Index { partitions } => {
                let shape = match kind {
                    "ivf_pq" => ", sub_vectors=3",
                    _ => "",
                };
                let create = format!(
                    "SELECT * FROM natal_create_index('t', 'e', 'e_idx', '{kind}', \
                     'partitions={partitions}{shape}')"
                );
                sql(&ctx, &create).await;
            }
            Step::Optimize { stale_share } => {
                let optimize = format!(
                    "SELECT * FROM natal_optimize_index('t', 'e_idx', \
                     'stale_share=0.{stale_share}, partitions=3')"
                );
                let indexed = table
                    .latest()
                    .await
                    .unwrap()
                    .manifest()
                    .indexes
                    .field_of("e_idx");
                let outcome = match natal::datafusion::sql(&ctx, &optimize).await {
                    Ok(frame) => frame.collect().await.map(drop),
                    Err(e) => Err(e),
                };
                match (indexed, outcome) {
                    (Some(_), Ok(())) => {}
                    (None, Err(e)) => assert!(e.to_string().contains("no vector index"), "{e}"),
                    (Some(_), Err(e)) => panic!("{optimize}: {e}"),
                    (None, Ok(_)) => panic!("{optimize} ran without an index"),
                }
            }
            Step::Restore { back } => {
                if history.is_empty() {
                    continue;
                }
                let (version, rows) = history[history.len() - 1 - back % history.len()].clone();
                sql(
                    &ctx,
                    &format!("SELECT * FROM natal_restore('t', {version})"),
                )
                .await;
                model = rows;
            }
        }
        let version = table.latest().await.unwrap().version();
        history.push((version, model.clone()));
        for query in &queries {
            let k = 5;
            let mut expected: Vec<(f32, i64)> = (model.iter())
                .map(|(id, v)| (Metric::L2.distance(v, query), *id))
                .collect();
            expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let distances: Vec<f32> = expected.iter().take(k).map(|(d, _)| *d).collect();
            let expected: Vec<i64> = expected.iter().take(k).map(|(_, id)| *id).collect();
            // One sort key (the search stands in for the scan, exactly or through the
            // index; ties are the sort's to break): the same distances.
            let by_sql = format!(
                "SELECT l2_distance(e, {}) AS d FROM t ORDER BY d LIMIT {k}",
                literal(query)
            );
            let batches = natal::datafusion::sql(&ctx, &by_sql)
                .await
                .unwrap()
                .collect();
            let found: Vec<f32> = (batches.await.unwrap().iter())
                .flat_map(|b| b.column(0).as_primitive::<Float32Type>().values().to_vec())
                .collect();
            assert_eq!(found, distances, "{by_sql}");
            let all = nearest(&table, query, k, (usize::MAX, Some(usize::MAX))).await;
            let found: Vec<i64> = all.iter().map(|(id, _)| *id).collect();
            assert_eq!(found, expected, "every partition probed");
            // SQL finds the same, through the index where one covers the table.
            let by_sql = format!(
                "SELECT id FROM t ORDER BY l2_distance(e, {}), id LIMIT {k}",
                literal(query)
            );
            let found = ids_of(&ctx, &by_sql).await;
            assert_eq!(found, expected, "{by_sql}");
            // With a filter: the nearest of the rows that pass.
            let mut passing: Vec<(f32, i64)> = (model.iter())
                .filter(|(id, _)| *id % 3 != 0)
                .map(|(id, v)| (Metric::L2.distance(v, query), *id))
                .collect();
            passing.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let expected: Vec<i64> = passing.iter().take(k).map(|(_, id)| *id).collect();
            let by_sql = format!(
                "SELECT id FROM t WHERE id % 3 <> 0 ORDER BY l2_distance(e, {}), id LIMIT {k}",
                literal(query)
            );
            let found = ids_of(&ctx, &by_sql).await;
            assert_eq!(found, expected, "{by_sql}");
            // One partition: maybe not the nearest, never a dead row or a stale vector.
            for (id, distance) in nearest(&table, query, k, (1, Some(1))).await {
                let v = model.get(&id).expect("a live row");
                assert_eq!(distance, Metric::L2.distance(v, query), "row {id}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn indexed_search_answers_as_brute_force_through_every_step(
        steps in proptest::collection::vec(step(), 1..10),
        queries in proptest::collection::vec(vector(), 2),
        quantized in any::<bool>(),
        patches in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let kind = if quantized { "ivf_pq" } else { "ivf_flat" };
        runtime.block_on(run_steps(steps, queries, kind, patches));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vector_index_is_flagged_listed_and_compaction_writes_none_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    sql(
        &ctx,
        "CREATE TABLE t (id BIGINT, e VECTOR(2), name VARCHAR)",
    )
    .await;
    for part in 0..3 {
        let values: Vec<String> = (0..30)
            .map(|i| {
                let id = part * 30 + i;
                format!("({id}, [{}.0, {}.5], 'n{id}')", id % 9, id % 4)
            })
            .collect();
        sql(&ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
    }
    sql(&ctx, "INSERT INTO t VALUES (90, NULL, 'no vector')").await;
    let create = "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_flat', \
                  'partitions=4, metric=l2')";
    let shown = crate::common::answer(&ctx, create).await.unwrap();
    assert!(
        shown.contains("| 90 "),
        "NULL vectors are not indexed: {shown}"
    );
    let listed = crate::common::answer(
        &ctx,
        "SELECT index_name, kind, metric, dimension, partitions, rows FROM \"t$indexes\"",
    )
    .await
    .unwrap();
    assert!(
        listed.contains("| e_idx      | ivf_flat | l2     | 2         | 4          | 90   |"),
        "{listed}"
    );
    let table =
        natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display())).unwrap();
    let flags = table.latest().await.unwrap().manifest().reader_flags();
    assert_ne!(flags & natal::internals::format::flags::VECTOR_INDEXES, 0);

    // Compaction keeps the segment covering the rewritten fragments; no index file is new.
    let indices = dir.path().join("t/_indices");
    let files_before = std::fs::read_dir(&indices).unwrap().count();
    sql(&ctx, "SELECT * FROM natal_compact('t')").await;
    assert_eq!(std::fs::read_dir(&indices).unwrap().count(), files_before);
    let snapshot = table.latest().await.unwrap();
    let segment = &snapshot.manifest().indexes.segments[0];
    let live: Vec<u32> = snapshot.manifest().fragments.iter().map(|f| f.id).collect();
    assert!(
        live.iter().all(|f| segment.fragments.contains(*f)),
        "{live:?}"
    );
    let rows = snapshot
        .nearest("e", &[4.0, 1.5], 3, NearestOptions::default())
        .await
        .unwrap();
    assert_eq!(rows.num_rows(), 3);
    assert!(rows.column_by_name("name").is_some() && rows.column_by_name("_rowid").is_some());

    // Bad input: clear errors, nothing committed.
    let version = snapshot.version();
    for (sql_text, error) in [
        (
            "SELECT * FROM natal_create_index('t', 'name', 'x', 'ivf_flat')",
            "not a vector column",
        ),
        (
            "SELECT * FROM natal_create_index('t', 'e', 'x', 'ivf_pq9')",
            "unknown vector index kind",
        ),
        (
            "SELECT * FROM natal_create_index('t', 'e', 'x', 'ivf_flat', 'colour=red')",
            "unknown vector index option",
        ),
        (
            "SELECT * FROM natal_create_index('t', 'e')",
            "is a vector column",
        ),
        (
            "SELECT * FROM natal_create_index('t', 'id', 'e_idx')",
            "is a vector index",
        ),
    ] {
        let found = crate::common::answer(&ctx, sql_text)
            .await
            .unwrap_err()
            .to_string();
        assert!(found.contains(error), "{sql_text}: {found}");
    }
    assert_eq!(table.latest().await.unwrap().version(), version);
    let latest = table.latest().await.unwrap();
    for (query, k) in [
        (vec![1.0], 3),
        (vec![1.0, 2.0], 0),
        (vec![f32::NAN, 1.0], 1),
    ] {
        assert!(latest
            .nearest("e", &query, k, NearestOptions::default())
            .await
            .is_err());
    }
    assert!(latest
        .nearest("name", &[1.0], 1, NearestOptions::default())
        .await
        .is_err());

    // A damaged segment file: Corrupt, naming it.
    let segment = &latest.manifest().indexes.segments[0];
    let file = dir.path().join("t").join(segment.path.as_str());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    // Through a new handle: this one keeps the head it read before the damage.
    let latest = natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display()))
        .unwrap()
        .latest()
        .await
        .unwrap();
    let error = latest
        .nearest("e", &[1.0, 2.0], 1, NearestOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, natal::Error::Corrupt { path, .. } if path == segment.path.as_str()),
        "{error}"
    );
    // Without the index, the search still answers.
    let exact = NearestOptions {
        use_index: false,
        ..Default::default()
    };
    assert_eq!(
        latest
            .nearest("e", &[1.0, 2.0], 2, exact)
            .await
            .unwrap()
            .num_rows(),
        2
    );
}

/// Writes table `v` under `dir`: a vector column of 8 components over 3 fragments, an
/// `ivf_flat` index of 4 partitions, then an update and a delete (for the fixtures).
pub async fn write_fixture_table(dir: &std::path::Path) {
    write_vector_table(dir, "v", "'ivf_flat', 'partitions=4'").await
}

/// Table `q` under `dir`: as `v`, its index `ivf_pq` with 4 sub-vectors.
pub async fn write_quantized_fixture_table(dir: &std::path::Path) {
    write_vector_table(dir, "q", "'ivf_pq', 'partitions=4, sub_vectors=4'").await
}

/// Table `name` of [`write_fixture_table`], its index `e_idx` built as `index` says (kind
/// and options, as SQL literals).
async fn write_vector_table(dir: &std::path::Path, name: &str, index: &str) {
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.to_str().unwrap()).unwrap();
    sql(
        &ctx,
        &format!("CREATE TABLE {name} (id BIGINT, e VECTOR(8))"),
    )
    .await;
    for part in 0..3i64 {
        let values: Vec<String> = (part * 40..(part + 1) * 40)
            .map(|id| {
                let v: Vec<f32> = (0..8)
                    .map(|d| ((id * 7 + d * 13) % 23) as f32 - 11.0)
                    .collect();
                format!("({id}, {})", literal(&v))
            })
            .collect();
        let insert = format!("INSERT INTO {name} VALUES {}", values.join(", "));
        sql(&ctx, &insert).await;
    }
    let create = format!("SELECT * FROM natal_create_index('{name}', 'e', 'e_idx', {index})");
    sql(&ctx, &create).await;
    let update = format!("UPDATE {name} SET e = [1, 1, 1, 1, 1, 1, 1, 1] WHERE id = 5");
    sql(&ctx, &update).await;
    sql(&ctx, &format!("DELETE FROM {name} WHERE id % 10 = 3")).await;
}

/// Table `name`'s nearest rows to three queries, through its index (every partition probed
/// and every candidate refined, and one partition, refined) and without: what a fixture
/// holding it answers.
pub async fn describe_fixture_table(dir: &std::path::Path, name: &str) -> String {
    let store = crate::fixtures::local_store(dir);
    let table = Table::open(store, name.into());
    let snapshot = table.latest().await.unwrap();
    let mut out = String::new();
    for q in 0..3 {
        let query: Vec<f32> = (0..8)
            .map(|d| ((q * 5 + d * 3) % 17) as f32 - 8.0)
            .collect();
        for (label, options) in [
            (
                "all",
                NearestOptions {
                    nprobes: usize::MAX,
                    refine_factor: Some(usize::MAX),
                    ..Default::default()
                },
            ),
            (
                "one",
                NearestOptions {
                    nprobes: 1,
                    refine_factor: Some(1),
                    ..Default::default()
                },
            ),
            (
                "exact",
                NearestOptions {
                    use_index: false,
                    ..Default::default()
                },
            ),
        ] {
            let rows = snapshot.nearest("e", &query, 5, options).await.unwrap();
            let found: Vec<String> = (ids_and_distances(&rows).iter())
                .map(|(id, d)| format!("{id}:{d:.4}"))
                .collect();
            out.push_str(&format!("q{q} {label}: {}\n", found.join(" ")));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_top_k_by_a_distance_searches_the_index_that_ranks_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    sql(
        &ctx,
        "CREATE TABLE t (id BIGINT, e VECTOR(2), name VARCHAR)",
    )
    .await;
    let values: Vec<String> = (0..60)
        .map(|id| format!("({id}, [{}.0, {}.0], 'n{id}')", id % 11, id % 7))
        .collect();
    sql(&ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
    let plan = |sql_text: &str| {
        let ctx = ctx.clone();
        let text = format!("EXPLAIN {sql_text}");
        async move { crate::common::answer(&ctx, &text).await.unwrap() }
    };
    let query = "SELECT id, l2_distance(e, [3.0, 2.0]) AS d FROM t ORDER BY d, id LIMIT 4";
    let exact = crate::common::answer(&ctx, query).await.unwrap();
    assert!(!plan(query).await.contains("NatalNearestExec"));
    sql(
        &ctx,
        "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_flat', 'partitions=3')",
    )
    .await;
    sql(&ctx, "SET natal.nprobes = 3").await;
    let shown = plan(query).await;
    assert!(
        shown.contains("NatalNearestExec") && shown.contains("index=e_idx"),
        "{shown}"
    );
    assert_eq!(crate::common::answer(&ctx, query).await.unwrap(), exact);
    // A filter is the search's pre-filter: the nearest of the rows that pass.
    let filtered = "SELECT id, name FROM t WHERE name NOT IN ('n58', 'n3') AND id < 50 \
                    ORDER BY l2_distance(e, [3.0, 2.0]), id LIMIT 3";
    let shown = plan(filtered).await;
    assert!(shown.contains("prefilter="), "{shown}");
    let with_index = crate::common::answer(&ctx, filtered).await.unwrap();
    assert!(with_index.contains("| 2  | n2   |"), "{with_index}");
    // Another metric than the index's: exact, and EXPLAIN says why. The other direction is
    // no search at all.
    let other = "SELECT id FROM t ORDER BY cosine_distance(e, [3.0, 2.0]) LIMIT 4";
    let shown = plan(other).await;
    assert!(
        shown.contains("exact metric=cosine (no index on e ranks by it in 2 components)"),
        "{shown}"
    );
    let other = "SELECT id FROM t ORDER BY l2_distance(e, [3.0, 2.0]) DESC LIMIT 4";
    assert!(!plan(other).await.contains("NatalNearestExec"), "{other}");
    sql(&ctx, "SET natal.use_index = false").await;
    assert!(!plan(query).await.contains("NatalNearestExec"));
    assert_eq!(crate::common::answer(&ctx, query).await.unwrap(), exact);
    assert_eq!(
        crate::common::answer(&ctx, filtered).await.unwrap(),
        with_index
    );
    // The rows' other columns and system columns come with them.
    sql(&ctx, "SET natal.use_index = true").await;
    let rows = crate::common::answer(
        &ctx,
        "SELECT id, name, _rowid FROM \"t$rows\" ORDER BY l2_distance(e, [3.0, 2.0]), id LIMIT 2",
    )
    .await
    .unwrap();
    assert!(rows.contains("| 58 | n58  | 58     |"), "{rows}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimize_rebuilds_a_stale_segment_with_the_uncovered_fragments_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    sql(&ctx, "CREATE TABLE t (id BIGINT, e VECTOR(2))").await;
    let index = "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_flat', 'partitions=2')";
    for part in 0..2i64 {
        let values: Vec<String> = (part * 20..(part + 1) * 20)
            .map(|id| format!("({id}, [{id}.0, 1.0])"))
            .collect();
        sql(&ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
        sql(&ctx, index).await;
    }
    let table =
        natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display())).unwrap();
    let seqs = |snapshot: &natal::Snapshot| -> Vec<(u64, u64)> {
        (snapshot.manifest().indexes.segments.iter())
            .map(|s| (s.segment_seq.unwrap_or(0), s.row_count))
            .collect()
    };
    assert_eq!(seqs(&table.latest().await.unwrap()), [(1, 20), (2, 20)]);
    // A quarter of the first segment's rows change; new rows arrive.
    sql(&ctx, "UPDATE t SET e = [0.0, 0.0] WHERE id < 5").await;
    sql(&ctx, "INSERT INTO t VALUES (100, [3.0, 3.0])").await;
    let optimize = "SELECT segments_added, segments_replaced, rows_indexed \
                    FROM natal_optimize_index('t', 'e_idx', 'stale_share=0.2')";
    let shown = crate::common::answer(&ctx, optimize).await.unwrap();
    // The rebuilt segment: the first one's 15 unchanged rows, the 5 updated, the 1 new.
    assert!(
        shown.contains("| 1              | 1                 | 21           |"),
        "{shown}"
    );
    // Segment 2 keeps its number; the rebuilt one takes the next.
    let latest = table.latest().await.unwrap();
    assert_eq!(seqs(&latest), [(2, 20), (3, 21)]);
    let options = NearestOptions {
        nprobes: usize::MAX,
        ..Default::default()
    };
    let rows = latest.nearest("e", &[0.0, 0.0], 5, options).await.unwrap();
    let ids = rows
        .column_by_name("id")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(ids.values().to_vec(), [0, 1, 2, 3, 4]);
    // Nothing stale or uncovered: nothing to do.
    let again = crate::common::answer(&ctx, optimize).await.unwrap();
    assert!(
        again.contains("| 0              | 0                 | 0            |"),
        "{again}"
    );
    let error = crate::common::answer(&ctx, "SELECT * FROM natal_optimize_index('t', 'nope')")
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("no vector index named nope"),
        "{error}"
    );
}

/// A probe keeps only its nearest entries; when nearly all of them are stale (their rows
/// updated since), the search is run again keeping every entry, so the valid ones beyond
/// them are still found: the answer is the exact one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_whose_nearest_entries_are_stale_finds_the_valid_ones_beyond() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    sql(&ctx, "CREATE TABLE t (id BIGINT, e VECTOR(2))").await;
    sql(
        &ctx,
        "INSERT INTO t SELECT value, [CAST(value AS FLOAT) / 1000, 0.0] \
         FROM generate_series(0, 999)",
    )
    .await;
    let create = "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_flat', 'partitions=1')";
    sql(&ctx, create).await;
    // The 995 nearest rows move far away; the index still lists them where they were.
    sql(
        &ctx,
        "UPDATE t SET e = [100.0 + CAST(id AS FLOAT) / 1000, 0.0] WHERE id < 995",
    )
    .await;
    let search = "SELECT id FROM t ORDER BY l2_distance(e, [0.0, 0.0]) LIMIT 10";
    let indexed = ids_of(&ctx, search).await;
    sql(&ctx, "SET natal.use_index = false").await;
    let exact = ids_of(&ctx, search).await;
    assert_eq!(indexed, exact);
    assert_eq!(indexed, vec![995, 996, 997, 998, 999, 0, 1, 2, 3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_patched_in_another_column_is_still_found_through_the_index() {
    let (_dir, ctx, table) = tagged_table().await;
    let values: Vec<String> = (0..40)
        .map(|id| format!("({id}, {}, 0)", literal(&seeded(1, id))))
        .collect();
    sql(&ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
    sql(
        &ctx,
        "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_flat', 'partitions=2')",
    )
    .await;
    sql(&ctx, "SET natal.patch_max_share = 1").await;
    sql(&ctx, "UPDATE t SET tag = tag + 1 WHERE id % 2 = 0").await;
    let latest = table.latest().await.unwrap();
    let patches: usize = latest
        .manifest()
        .fragments
        .iter()
        .map(|f| f.patches.len())
        .sum();
    assert!(patches > 0, "the update wrote a patch");
    for id in [0i64, 2, 4, 5] {
        let query = seeded(1, id);
        let found = nearest(&table, &query, 1, (usize::MAX, None)).await;
        assert_eq!(found, [(id, 0.0)], "row {id}");
    }
}
