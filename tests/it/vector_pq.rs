//! `ivf_pq` vector indexes: product-quantized codes, their reader flag and listing, exact
//! answers for every metric once every partition is probed and every candidate refined,
//! `natal.refine_factor` in SQL, and what bad options and damaged segments get.

use datafusion::prelude::SessionContext;
use natal::{Metric, NearestOptions, Snapshot};

use crate::common::answer;

async fn sql(ctx: &SessionContext, text: &str) {
    natal::datafusion::sql(ctx, text)
        .await
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{text}: {e}"));
}

/// Component `d` of row `id`'s vector: spread, deterministic, never all zero.
fn component(id: i64, d: i64) -> f32 {
    ((id * 37 + d * 11 + id * d) % 29) as f32 / 4.0 - 3.0 + if d == 0 { 0.3 } else { 0.0 }
}

/// A table `t` of 300 rows (`id`, `e VECTOR(8)`) over three fragments.
async fn table_of_vectors(ctx: &SessionContext) {
    sql(ctx, "CREATE TABLE t (id BIGINT, e VECTOR(8))").await;
    for part in 0..3i64 {
        let values: Vec<String> = (part * 100..(part + 1) * 100)
            .map(|id| {
                let v: Vec<String> = (0..8).map(|d| format!("{:?}", component(id, d))).collect();
                format!("({id}, [{}])", v.join(", "))
            })
            .collect();
        sql(ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
    }
}

/// The ids and distances `nearest` answers.
async fn nearest(snapshot: &Snapshot, query: &[f32], options: NearestOptions) -> Vec<(i64, f32)> {
    let rows = snapshot.nearest("e", query, 7, options).await.unwrap();
    crate::vector_index::ids_and_distances(&rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quantized_indexes_refined_in_full_answer_exactly_for_every_metric() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    table_of_vectors(&ctx).await;
    for metric in ["l2", "cosine", "dot"] {
        let create = format!(
            "SELECT * FROM natal_create_index('t', 'e', 'pq_{metric}', 'ivf_pq', \
             'partitions=4, sub_vectors=4, metric={metric}')"
        );
        sql(&ctx, &create).await;
    }
    let listed = answer(
        &ctx,
        "SELECT index_name, kind, metric, dimension, partitions, sub_vectors, rows \
         FROM \"t$indexes\" ORDER BY index_name",
    )
    .await
    .unwrap();
    assert!(
        listed.contains(
            "| pq_cosine  | ivf_pq | cosine | 8         | 4          | 4           | 300  |"
        ),
        "{listed}"
    );
    let table =
        natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display())).unwrap();
    let snapshot = table.latest().await.unwrap();
    let flags = snapshot.manifest().reader_flags();
    let wanted = natal::internals::format::flags::QUANTIZED_VECTORS
        | natal::internals::format::flags::VECTOR_INDEXES;
    assert_eq!(flags & wanted, wanted);
    // An entry is its row id and 4 code bytes, not 32 bytes of vector; the head holds 4
    // centroids and 4 books of (at most 256) 2-component codewords.
    let segment = &snapshot.manifest().indexes.segments[0];
    let head = 16 + 24 + 4 * 8 * 4 + 4 * 256 * 2 * 4 + 4 * 8;
    assert_eq!(segment.file_size_bytes, head + 300 * (8 + 4) + 4 * 4);

    for (q, metric) in [Metric::L2, Metric::Cosine, Metric::Dot]
        .into_iter()
        .enumerate()
    {
        let query: Vec<f32> = (0..8).map(|d| component(1000 + q as i64, d)).collect();
        let exact = NearestOptions {
            metric,
            use_index: false,
            ..Default::default()
        };
        let expected = nearest(&snapshot, &query, exact).await;
        let refined = NearestOptions {
            metric,
            nprobes: usize::MAX,
            refine_factor: Some(usize::MAX),
            ..Default::default()
        };
        assert_eq!(
            nearest(&snapshot, &query, refined).await,
            expected,
            "{metric:?}"
        );
        // Unrefined: the codes' estimates, of live rows, as many as asked.
        let estimated = NearestOptions {
            metric,
            nprobes: 2,
            ..Default::default()
        };
        let found = nearest(&snapshot, &query, estimated).await;
        assert_eq!(found.len(), 7);
        assert!(found.windows(2).all(|w| w[0].1 <= w[1].1), "{found:?}");
        // Refined by 2: the distances are the rows' own.
        let twice = NearestOptions {
            refine_factor: Some(2),
            ..estimated
        };
        for (id, distance) in nearest(&snapshot, &query, twice).await {
            let v: Vec<f32> = (0..8).map(|d| component(id, d)).collect();
            assert_eq!(distance, metric.distance(&v, &query), "{metric:?} row {id}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_refines_by_its_session_option_and_refuses_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    table_of_vectors(&ctx).await;
    let table =
        natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display())).unwrap();
    let version = table.latest().await.unwrap().version();
    for (text, error) in [
        ("'ivf_pq', 'sub_vectors=3'", "does not divide"),
        ("'ivf_pq', 'sub_vectors=16'", "does not divide"),
        ("'ivf_pq', 'sub_vectors=0'", "positive number"),
        ("'ivf_flat', 'sub_vectors=2'", "unknown vector index option"),
    ] {
        let create = format!("SELECT * FROM natal_create_index('t', 'e', 'x', {text})");
        let found = answer(&ctx, &create).await.unwrap_err().to_string();
        assert!(found.contains(error), "{create}: {found}");
    }
    assert_eq!(table.latest().await.unwrap().version(), version);

    sql(
        &ctx,
        "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_pq', 'partitions=4')",
    )
    .await;
    let listed = answer(&ctx, "SELECT sub_vectors FROM \"t$indexes\"")
        .await
        .unwrap();
    assert!(
        listed.contains("| 1           |"),
        "default: one per 8 components {listed}"
    );
    let query = "SELECT id, l2_distance(e, [1.0, 0.5, 0.0, -1.0, 2.0, 1.0, 0.0, 0.5]) AS d \
                 FROM t ORDER BY d, id LIMIT 5";
    sql(&ctx, "SET natal.refine_factor = 8").await;
    sql(&ctx, "SET natal.nprobes = 4").await;
    let plan = answer(&ctx, &format!("EXPLAIN {query}")).await.unwrap();
    assert!(
        plan.contains("index=e_idx") && plan.contains("refine=8"),
        "{plan}"
    );
    let refined = answer(&ctx, query).await.unwrap();
    sql(&ctx, "SET natal.use_index = false").await;
    assert_eq!(answer(&ctx, query).await.unwrap(), refined);

    // Optimizing keeps the index's kind; sub_vectors must still divide the dimension.
    let optimize = "SELECT * FROM natal_optimize_index('t', 'e_idx', 'sub_vectors=5')";
    let found = answer(&ctx, optimize).await.unwrap_err().to_string();
    assert!(found.contains("does not divide"), "{found}");

    // A damaged code (its partition's checksum no longer fits): Corrupt, naming the file
    // (read through a new handle, which has cached none of it).
    let fresh = natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display()));
    let latest = fresh.unwrap().latest().await.unwrap();
    let segment = &latest.manifest().indexes.segments[0];
    let file = dir.path().join("t").join(segment.path.as_str());
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 6;
    bytes[last] ^= 0x01;
    std::fs::write(&file, bytes).unwrap();
    let every = NearestOptions {
        nprobes: usize::MAX,
        ..Default::default()
    };
    let error = latest.nearest("e", &[0.0; 8], 3, every).await.unwrap_err();
    assert!(
        matches!(&error, natal::Error::Corrupt { path, .. } if path == segment.path.as_str()),
        "{error}"
    );
}

/// A search probes the partitions it read before from memory: with the segment file gone,
/// the handle that searched still answers the same query; a new handle cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_keeps_the_index_partitions_it_probed() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    table_of_vectors(&ctx).await;
    sql(
        &ctx,
        "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_pq', 'partitions=4')",
    )
    .await;
    let location = format!("{}/t", dir.path().display());
    let snapshot = (natal::datafusion::open_table(&ctx, &location)
        .unwrap()
        .latest())
    .await
    .unwrap();
    let search = NearestOptions {
        nprobes: 2,
        ..Default::default()
    };
    let query = [0.5; 8];
    let first = nearest(&snapshot, &query, search).await;
    let segment = &snapshot.manifest().indexes.segments[0];
    std::fs::remove_file(dir.path().join("t").join(segment.path.as_str())).unwrap();
    assert_eq!(nearest(&snapshot, &query, search).await, first);
    let fresh = (natal::datafusion::open_table(&ctx, &location)
        .unwrap()
        .latest())
    .await
    .unwrap();
    assert!(fresh.nearest("e", &query, 7, search).await.is_err());
}

/// SQL's indexed search reads the index and the rows it returns, not the column: the
/// top-k above it pushes its bound on the distance into the scan as hints, which are not
/// the search's pre-filter (as one, they had every vector read at each query).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_search_reads_the_probed_partitions_not_every_vector() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, store) = crate::common::counted_session(dir.path());
    sql(&ctx, "CREATE TABLE t (id BIGINT, e VECTOR(32))").await;
    let components: Vec<String> = (0..32)
        .map(|d| format!("CAST(sin(value * 0.37 + {d}) AS FLOAT)"))
        .collect();
    let insert = format!(
        "INSERT INTO t SELECT value, [{}] FROM generate_series(0, 19999)",
        components.join(", ")
    );
    sql(&ctx, &insert).await;
    let create = "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_flat', 'partitions=16')";
    sql(&ctx, create).await;
    sql(&ctx, "SET natal.nprobes = 1").await;
    let query: Vec<String> = (0..32).map(|d| format!("{}.5", d % 7)).collect();
    let vector_bytes = 20_000 * 32 * 4;
    for filter in ["", "WHERE id % 2 = 0"] {
        let search = format!(
            "SELECT id FROM t {filter} ORDER BY l2_distance(e, [{}]) LIMIT 5",
            query.join(", ")
        );
        let plan = answer(&ctx, &format!("EXPLAIN {search}")).await.unwrap();
        assert!(plan.contains("index=e_idx"), "{plan}");
        for _ in 0..2 {
            store.reset();
            let found = answer(&ctx, &search).await.unwrap();
            assert_eq!(
                found.lines().filter(|l| l.starts_with("| ")).count(),
                6,
                "{found}"
            );
            let read = store.tally().bytes_read;
            assert!(
                read < vector_bytes / 2,
                "{search}: {read} bytes read for {vector_bytes} of vectors"
            );
        }
    }
}

/// Rows no segment covers are searched exactly from the vectors the handle kept: with their
/// data file gone, the handle that searched still answers; a new handle cannot; and a
/// delete among them (a new deletion file) has them read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_keeps_the_vectors_of_fragments_no_segment_covers() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    table_of_vectors(&ctx).await;
    sql(
        &ctx,
        "SELECT * FROM natal_create_index('t', 'e', 'e_idx', 'ivf_flat', 'partitions=4')",
    )
    .await;
    // Far from the indexed rows: never among the nearest of an indexed row's vector.
    let values: Vec<String> = (300..320i64)
        .map(|id| format!("({id}, [{}.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])", id * 10))
        .collect();
    sql(&ctx, &format!("INSERT INTO t VALUES {}", values.join(", "))).await;
    let location = format!("{}/t", dir.path().display());
    let open = || natal::datafusion::open_table(&ctx, &location).unwrap();
    let table = open();
    let snapshot = table.latest().await.unwrap();
    let search = NearestOptions {
        nprobes: 4,
        ..Default::default()
    };
    let query: Vec<f32> = (0..8).map(|d| component(20, d)).collect();
    let first = nearest(&snapshot, &query, search).await;
    assert!(first.iter().all(|(id, _)| *id < 300), "{first:?}");
    let uncovered = snapshot.manifest().fragments.last().unwrap();
    let file = dir.path().join("t").join(uncovered.files[0].path.as_str());
    let bytes = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(nearest(&snapshot, &query, search).await, first);
    let fresh = open().latest().await.unwrap();
    assert!(fresh.nearest("e", &query, 7, search).await.is_err());
    std::fs::write(&file, &bytes).unwrap();
    sql(&ctx, "DELETE FROM t WHERE id = 310").await;
    std::fs::remove_file(&file).unwrap();
    let after = table.latest().await.unwrap();
    assert!(after.nearest("e", &query, 7, search).await.is_err());
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(nearest(&after, &query, search).await, first);
}
