//! natal on an in-process Ballista cluster (cargo feature `ballista`): one scheduler and two
//! executors, each on its own runtime, none sharing the client's, built from Ballista's own
//! library with natal's codecs, settings and functions installed. natal SQL on the cluster
//! answers row for row (duplicates counted) as a local session does — change reads and
//! lineage columns too; writes are refused.

#[path = "../../benches/cluster/mod.rs"]
mod harness;

use datafusion::prelude::{SessionConfig, SessionContext};
use harness::Cluster;

/// `sql`'s rows on `ctx` as sorted lines (a multiset: duplicates kept).
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = natal::datafusion::sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    crate::common::sorted_rows(&batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natal_sql_on_a_ballista_cluster_answers_as_a_local_session() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let local = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(4));
    natal::datafusion::register(&local, root).unwrap();
    let mut statements = crate::common::fragmented_table(8);
    statements.extend([
        "UPDATE t SET v = v + 10 WHERE k % 9 = 0".to_string(),
        "DELETE FROM t WHERE k % 11 = 0".to_string(),
        "CREATE TABLE u (k BIGINT, name VARCHAR)".to_string(),
        "INSERT INTO u SELECT value * 3, 'n' || value FROM generate_series(0, 2999)".to_string(),
        "SELECT * FROM natal_create_index('u', 'name')".to_string(),
        "ALTER TABLE u ADD COLUMN extra BIGINT DEFAULT 7".to_string(),
        "INSERT INTO u (k, name, extra) VALUES (-1, 'late', 8)".to_string(),
        // Blob values of every stored kind: inline, packed in a sidecar, dedicated.
        "CREATE TABLE d (id BIGINT, body BLOB)".to_string(),
        "INSERT INTO d VALUES (1, X'CAFE'), (2, NULL), \
         (3, CAST(repeat('ab', 40000) AS BYTEA)), (4, CAST(repeat('cd', 2600000) AS BYTEA))"
            .to_string(),
    ]);
    for sql in &statements {
        crate::common::answer(&local, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let cluster = Cluster::start(2, 2);
    let remote = cluster.client(root).await;
    let planned = natal::datafusion::sql(&remote, "SELECT k FROM t")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    assert_eq!(
        planned.name(),
        "DistributedQueryExec",
        "the cluster runs it"
    );
    let queries = [
        "SELECT k, v FROM t",
        "SELECT count(*), sum(k), min(v), max(v) FROM t",
        "SELECT v, count(*) FROM t WHERE k BETWEEN 1500 AND 6500 GROUP BY v",
        "SELECT _rowid, _rowaddr, k FROM \"t$rows\" WHERE v >= 10",
        "SELECT _rowid, k, v FROM \"t$rows\" WHERE _rowid IN (9, 18, 4294967296, 12884901895)",
        "SELECT t.k, t.v, u.name FROM t JOIN u ON t.k = u.k WHERE t.v < 4",
        "SELECT count(*) FROM \"t@v4\"",
        "SELECT k, name FROM u WHERE name = 'n1234'",
        "SELECT k FROM t ORDER BY k DESC LIMIT 25",
        "SELECT k, name, extra FROM u WHERE k < 30",
        "SELECT id, octet_length(body), md5(body) FROM d",
        "SELECT \"column\", kind, count(*), sum(size) FROM \"d$blobs\" GROUP BY 1, 2",
        "SELECT version, operation FROM \"t$versions\"",
        "SELECT fragment_id, live_rows, deleted_rows FROM \"t$fragments\"",
        "SELECT name, data_type FROM \"u$schema\"",
        "SELECT segment_seq, node FROM natal_segment_placement('u', 'name_idx', 2)",
    ];
    // Change reads and lineage, from the version before the UPDATE.
    let versions = rows(&local, "SELECT version, operation FROM \"t$versions\"").await;
    let before_update = (versions.iter())
        .find(|row| row.contains("update"))
        .and_then(|row| row.split('|').nth(1)?.trim().parse::<u64>().ok())
        .map(|v| v - 1)
        .expect("an update version");
    let lineage_queries = [
        "SELECT k, v, _rowid, _change_type, _commit_version FROM natal_changes('t', 1)".to_string(),
        format!(
            "SELECT _rowid, k, _commit_version FROM natal_changes('t', {before_update}) \
             WHERE _change_type = 'delete'"
        ),
        format!(
            "SELECT k, _row_created_version, _row_updated_version FROM \"t$rows\" \
             WHERE _row_updated_version > {before_update}"
        ),
    ];
    let queries = (queries.iter().map(|q| q.to_string())).chain(lineage_queries);
    for query in queries {
        let query = query.as_str();
        let expected = rows(&local, query).await;
        assert!(!expected.is_empty(), "{query}");
        assert_eq!(rows(&remote, query).await, expected, "{query}");
    }
    // Writes stay with a local session: refused on the cluster, and nothing changes.
    let before = rows(&local, "SELECT count(*) FROM t").await;
    for write in [
        "INSERT INTO t VALUES (1, 1)",
        "DELETE FROM t WHERE k = 5",
        "UPDATE t SET v = 0 WHERE k = 5",
    ] {
        let refused = async {
            natal::datafusion::sql(&remote, write)
                .await?
                .collect()
                .await
        }
        .await;
        let message = refused.expect_err(write).to_string();
        assert!(message.contains("Ballista cluster"), "{write}: {message}");
    }
    assert_eq!(rows(&local, "SELECT count(*) FROM t").await, before);
    drop(remote);
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_22_tpch_queries_answer_on_the_cluster_as_locally() {
    use crate::tpch::harness;
    const SF: f64 = 0.01;
    let dir = tempfile::tempdir().unwrap();
    let dirs = harness::Dirs::under(dir.path());
    harness::load(&dirs, SF).await.expect("load");
    let local = harness::natal_session(&dirs).expect("session");
    let cluster = Cluster::start(2, 2);
    let remote = cluster.client(&dirs.natal.to_string_lossy()).await;
    for q in 1..=22 {
        let query = harness::query(q, SF);
        let expected =
            harness::canonical(&local.sql(&query).await.unwrap().collect().await.unwrap()).unwrap();
        let on_cluster = async { remote.sql(&query).await?.collect().await }
            .await
            .unwrap_or_else(|e| panic!("q{q} on the cluster: {e}"));
        assert_eq!(harness::canonical(&on_cluster).unwrap(), expected, "q{q}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_reads_a_root_in_an_s3_bucket_as_a_local_session() {
    let endpoint = crate::s3_server::Endpoint::from_env_or_start()
        .await
        .unwrap();
    let bucket_url = url::Url::parse(&format!("s3://{}", endpoint.bucket)).unwrap();
    let stores = {
        let (endpoint, bucket_url) = (endpoint.clone(), bucket_url.clone());
        move || {
            let runtime =
                std::sync::Arc::new(datafusion::execution::runtime_env::RuntimeEnv::default());
            let store = std::sync::Arc::new(endpoint.client().expect("an S3 client"));
            runtime.register_object_store(&bucket_url, store);
            runtime
        }
    };
    let root = format!("s3://{}/cluster-{}", endpoint.bucket, uuid::Uuid::new_v4());
    let local = SessionContext::new_with_config_rt(SessionConfig::new(), stores());
    natal::datafusion::register(&local, &root).unwrap();
    let mut statements = crate::common::fragmented_table(3);
    statements.push("UPDATE t SET v = v + 10 WHERE k % 9 = 0".into());
    for sql in &statements {
        crate::common::answer(&local, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let cluster = Cluster::start_with(2, 1, stores.clone());
    let remote = cluster.client_with(&root, stores()).await;
    for query in [
        "SELECT k, v FROM t",
        "SELECT v, count(*) FROM t GROUP BY v",
        "SELECT _rowid, k FROM \"t$rows\" WHERE _rowid IN (9, 18, 4294967296)",
    ] {
        let expected = rows(&local, query).await;
        assert!(!expected.is_empty(), "{query}");
        assert_eq!(rows(&remote, query).await, expected, "{query}");
    }
    // A cluster whose processes were not given the bucket's store says what to do. (A
    // table no process here has opened yet: each keeps the handles it opened.)
    crate::common::answer(&local, "CREATE TABLE w AS SELECT 1 AS x")
        .await
        .unwrap();
    let blind = Cluster::start(1, 1);
    let remote = blind.client_with(&root, stores()).await;
    let failed = async {
        natal::datafusion::sql(&remote, "SELECT x FROM w")
            .await?
            .collect()
            .await
    };
    let message = failed
        .await
        .expect_err("no store for the bucket")
        .to_string();
    assert!(
        message.contains("not reachable from this Ballista process"),
        "{message}"
    );
    assert!(message.contains("--root"), "{message}");
}

/// A client's `natal.*` settings reach the scheduler and every executor: Ballista sends a
/// session's entries as key/value pairs and sets each by its key on the other side, where
/// a key it cannot place is dropped.
#[test]
fn natal_settings_travel_with_a_clients_session() {
    use ballista_core::extension::SessionConfigHelperExt;
    use ballista_core::serde::protobuf::KeyValuePair;
    use natal::datafusion::{cluster, NatalOptions};

    let mut client = cluster::session_config();
    let options = client.options_mut();
    options.set("natal.late_materialization", "false").unwrap();
    options.set("natal.merge_fan_in", "3").unwrap();
    let sent: Vec<KeyValuePair> = (client.options().entries().into_iter())
        .map(|entry| KeyValuePair {
            key: entry.key,
            value: entry.value,
        })
        .collect();
    let received = cluster::session_config().update_from_key_value_pair(&sent);
    let natal = received.options().extensions.get::<NatalOptions>().unwrap();
    assert!(!natal.late_materialization);
    assert_eq!(natal.merge_fan_in, 3);
}

/// `octet_length` of a blob column on the cluster reads the values' sizes from their
/// descriptors, as a local session does (`BlobSizes`, run by the scheduler's planner): the
/// executors fetch none of the payloads, and the answers are the local ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_sizes_on_the_cluster_fetch_no_payload() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let local = SessionContext::new();
    natal::datafusion::register(&local, root).unwrap();
    for sql in [
        "CREATE TABLE d (id BIGINT, body BLOB)",
        "INSERT INTO d VALUES (1, X'CAFE'), (2, NULL), \
         (3, CAST(repeat('ab', 40000) AS BYTEA)), (4, CAST(repeat('cd', 2600000) AS BYTEA))",
    ] {
        crate::common::answer(&local, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let (store, stores) = counted_stores();
    let cluster = Cluster::start_with(2, 1, stores);
    let remote = cluster.client(root).await;
    let payload: u64 = 80_000 + 5_200_000;
    for (query, payload_read) in [
        ("SELECT id, octet_length(body) FROM d", false),
        (
            "SELECT id + 1, octet_length(body) * 2 FROM d WHERE id > 1",
            false,
        ),
        ("SELECT id, octet_length(body), md5(body) FROM d", true),
    ] {
        let expected = rows(&local, query).await;
        store.reset();
        assert_eq!(rows(&remote, query).await, expected, "{query}");
        let read = store.tally().bytes_read;
        assert_eq!(read > payload, payload_read, "{query}: {read} bytes read");
    }
}

/// An indexed top-k runs on the cluster as a search (the scheduler plans it; the executors
/// decode it): the executors read the probed partitions and the rows returned, not the
/// vector column, and the answer is the local session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_search_on_the_cluster_reads_the_index_not_every_vector() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let local = SessionContext::new();
    natal::datafusion::register(&local, root).unwrap();
    let components: Vec<String> = (0..32)
        .map(|d| format!("CAST(sin(value * 0.37 + {d}) AS FLOAT)"))
        .collect();
    for sql in [
        "CREATE TABLE v (id BIGINT, e VECTOR(32))".to_string(),
        format!(
            "INSERT INTO v SELECT value, [{}] FROM generate_series(0, 19999)",
            components.join(", ")
        ),
        "SELECT * FROM natal_create_index('v', 'e', 'e_idx', 'ivf_flat', 'partitions=16')"
            .to_string(),
        "SET natal.nprobes = 2".to_string(),
    ] {
        crate::common::answer(&local, &sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let (store, stores) = counted_stores();
    let cluster = Cluster::start_with(2, 1, stores);
    let remote = cluster.client(root).await;
    natal::datafusion::sql(&remote, "SET natal.nprobes = 2")
        .await
        .unwrap();
    let query: Vec<String> = (0..32)
        .map(|d| format!("{:?}", (d as f32 * 0.3).sin()))
        .collect();
    for filter in ["", "WHERE id % 3 = 1"] {
        let search = format!(
            "SELECT id, l2_distance(e, [{}]) AS d FROM v {filter} ORDER BY d LIMIT 7",
            query.join(", ")
        );
        let expected = rows(&local, &search).await;
        assert_eq!(expected.len(), 7);
        let mut read = Vec::new();
        for use_index in [true, false] {
            let set = format!("SET natal.use_index = {use_index}");
            natal::datafusion::sql(&remote, &set).await.unwrap();
            store.reset();
            let found = rows(&remote, &search).await;
            read.push(store.tally().bytes_read);
            if use_index {
                assert_eq!(found, expected, "{search}");
            }
        }
        // The exact search reads every vector (20,000 of 128 bytes); the indexed one, two
        // partitions of 16 and the rows it returns.
        assert!(read[1] >= 20_000 * 128, "{read:?}");
        assert!(
            read[0] * 2 < read[1],
            "{search}: {read:?} bytes, indexed and exact"
        );
    }
}

/// Runtimes for the cluster's processes whose local files are all read through one
/// counting store, and that store.
fn counted_stores() -> (
    std::sync::Arc<natal::internals::io::InstrumentedStore>,
    impl Fn() -> std::sync::Arc<datafusion::execution::runtime_env::RuntimeEnv> + Clone + Send + 'static,
) {
    let store = crate::common::counted_local_store();
    let shared = store.clone();
    let stores = move || crate::common::runtime_reading_through(shared.clone());
    (store, stores)
}
