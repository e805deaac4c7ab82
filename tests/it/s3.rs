//! natal over the S3 protocol, against the in-process server (`s3_server`) or an external
//! endpoint (`NATAL_TEST_S3_ENDPOINT`, `NATAL_TEST_S3_BUCKET`, with `AWS_ACCESS_KEY_ID` and
//! `AWS_SECRET_ACCESS_KEY`), through `object_store`'s `AmazonS3` client configured as a user
//! configures it: the SQL workload gives the answers it gives on a local directory, the CLI
//! takes `--root s3://`, and a bad bucket, bad credentials or an endpoint that refuses
//! connections are errors naming what is wrong, within seconds, leaving nothing behind.

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use object_store::ObjectStore;

use crate::s3_server::{Endpoint, Fault};

/// Where the tests' objects go: a bucket of an S3 endpoint, and a prefix no other test uses.
struct Target {
    endpoint: Endpoint,
    prefix: String,
    /// What the CLI is started with (the endpoint's environment, unless a test changes it).
    environment: Vec<(&'static str, String)>,
}

impl Target {
    /// The external endpoint the environment names, or a fresh in-process server.
    async fn new() -> Self {
        let endpoint = Endpoint::from_env_or_start().await.expect("S3 endpoint");
        Self {
            environment: endpoint.environment(),
            endpoint,
            prefix: format!("natal-test-{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// A client of the bucket, with quick retries.
    fn client(&self) -> Arc<dyn ObjectStore> {
        Arc::new(self.endpoint.client().expect("S3 client"))
    }

    /// `s3://<bucket>/<prefix>/<name>`.
    fn url(&self, name: &str) -> String {
        format!("s3://{}/{}/{name}", self.endpoint.bucket, self.prefix)
    }

    /// A session whose natal root is `<url>/root`, the bucket's store registered.
    fn session(&self) -> SessionContext {
        let ctx = SessionContext::new();
        let bucket = url::Url::parse(&format!("s3://{}", self.endpoint.bucket)).unwrap();
        ctx.register_object_store(&bucket, self.client());
        natal::datafusion::register(&ctx, &self.url("root")).unwrap();
        ctx
    }

    /// Every key under the test's prefix.
    async fn keys(&self) -> Vec<String> {
        let prefix = object_store::path::Path::from(self.prefix.as_str());
        let listed: Vec<_> = self
            .client()
            .list(Some(&prefix))
            .try_collect()
            .await
            .unwrap();
        let mut keys: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
        keys.sort();
        keys
    }

    /// The `natal` CLI with this server's environment (and no AWS settings of the machine).
    fn natal(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_natal"));
        crate::s3_server::with_environment(&mut command, &self.environment);
        command.args(args).output().expect("run natal")
    }
}

/// The whole SQL workload over S3 answers exactly as on a local directory, the table
/// registered by `CREATE EXTERNAL TABLE` at an `s3://` location included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workload_over_s3_answers_as_on_a_local_directory() {
    let target = Target::new().await;
    let ctx = target.session();
    let over_s3 = crate::workload::run_workload(&ctx, &target.url("ext")).await;

    let (_root, local) = crate::common::catalog_session();
    let elsewhere = tempfile::tempdir().unwrap();
    let on_disk = crate::workload::run_workload(&local, elsewhere.path().to_str().unwrap()).await;
    assert_eq!(over_s3.len(), on_disk.len());
    for ((sql, s3), (_, disk)) in over_s3.iter().zip(&on_disk) {
        // A removed version's error names its location, which differs.
        if s3.starts_with("error:") && disk.starts_with("error:") {
            assert!(s3.contains("version 3"), "{sql}: {s3}");
            continue;
        }
        assert_eq!(s3, disk, "{sql}");
    }
    let keys = target.keys().await;
    let external = format!("{}/ext/w/_versions/", target.prefix);
    assert!(keys.iter().any(|k| k.starts_with(&external)), "{keys:?}");
    let blobs = format!("{}/ext/w/data/", target.prefix);
    assert!(
        keys.iter()
            .any(|k| k.starts_with(&blobs) && k.ends_with(".blob")),
        "blob sidecars went to S3 too"
    );
}

/// `natal --root s3://bucket/prefix` with the endpoint and keys in the environment (no
/// region: none is asked of AWS) runs statements against the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_takes_an_s3_root() {
    let target = Target::new().await;
    let root = target.url("cli");
    let run = |statements: Vec<String>| {
        let target = &target;
        let root = root.clone();
        async move {
            let mut args = vec!["--root".to_string(), root, "-q".into(), "--format".into()];
            args.extend(["csv".to_string(), "-c".into()]);
            args.extend(statements);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            tokio::task::block_in_place(|| target.natal(&args))
        }
    };
    let out = run(vec![
        "CREATE TABLE t AS SELECT value AS id, value * 2 AS v FROM generate_series(1, 100)".into(),
        "UPDATE t SET v = 0 WHERE id <= 10".into(),
        "DELETE FROM t WHERE id > 90".into(),
        "SELECT * FROM natal_compact('t')".into(),
        "SELECT count(*), sum(v) FROM t".into(),
        "SELECT count(*) FROM \"t@v1\"".into(),
    ])
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected_sum: i64 = (11..=90).map(|v| v * 2).sum();
    assert!(stdout.contains(&format!("90,{expected_sum}")), "{stdout}");
    assert!(stdout.lines().any(|l| l.trim() == "100"), "{stdout}");
    let keys = target.keys().await;
    assert!(
        keys.iter().any(|k| k.contains("/cli/t/_versions/")),
        "{keys:?}"
    );
}

/// A bucket that does not exist, an `s3://` URL with no bucket, wrong keys, an endpoint that
/// refuses connections: errors that say so, within seconds, and no table half-created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_buckets_keys_and_endpoints_are_errors_that_say_so() {
    let target = Target::new().await;
    let Some(server) = target.endpoint.server.clone() else {
        return; // An external endpoint's refusals are its own.
    };
    let create = "CREATE TABLE t (a BIGINT)".to_string();
    // The root, the processes' environment, and what the error must say.
    type Case = (String, Vec<(&'static str, String)>, &'static str);
    let cases: Vec<Case> = vec![
        ("s3:///x".into(), server.environment(), "bucket name"),
        (
            "s3://no-such-bucket/x".into(),
            server.environment(),
            "NoSuchBucket",
        ),
        (
            target.url("keys"),
            with(server.environment(), "AWS_SECRET_ACCESS_KEY", "wrong"),
            "Signature",
        ),
        (
            target.url("refused"),
            with(
                server.environment(),
                "AWS_ENDPOINT_URL",
                "http://127.0.0.1:9",
            ),
            "127.0.0.1:9",
        ),
    ];
    for (root, environment, says) in cases {
        let started = Instant::now();
        let probe = Target {
            environment,
            endpoint: target.endpoint.clone(),
            prefix: target.prefix.clone(),
        };
        let args = ["--root", root.as_str(), "-q", "-c", create.as_str()];
        let out = tokio::task::block_in_place(|| probe.natal(&args));
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{root}: {stderr}");
        assert!(stderr.contains(says), "{root}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{root}: {:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        target.keys().await,
        Vec::<String>::new(),
        "nothing half-created"
    );
}

fn with(
    mut environment: Vec<(&'static str, String)>,
    key: &'static str,
    value: &str,
) -> Vec<(&'static str, String)> {
    environment.retain(|(k, _)| *k != key);
    environment.push((key, value.to_string()));
    environment
}

/// A request the server fails (throttled, failed or its connection dropped after storing,
/// delayed past the client's timeout) fails the operation that made it or is retried by the client; nothing is
/// half-committed: the table reads its last committed version, and a write that stored
/// its manifest before the failure is found committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_failed_over_http_leave_the_table_whole() {
    let target = Target::new().await;
    let Some(server) = target.endpoint.server.clone() else {
        return;
    };
    let table = natal::Table::create(
        target.client(),
        object_store::path::Path::from(format!("{}/faults/t", target.prefix)),
        &crate::common::schema(),
        natal::TableOptions::default(),
    )
    .await
    .unwrap();
    let mut committed = 0u64;
    for (step, fault) in [
        Fault::SlowDown,
        Fault::Internal,
        Fault::StoredThenFailed,
        Fault::StoredThenDropped,
        Fault::Delay(Duration::from_secs(4)),
    ]
    .into_iter()
    .cycle()
    .take(10)
    .enumerate()
    {
        // An append makes a few requests (its data file, its manifest, the listing of
        // versions); each of them fails in turn.
        server.fail_request(1 + step as u64 % 3, fault);
        let rows = [(step as i64, step as i64)];
        let result = table.append(vec![crate::common::batch(&rows)]).await;
        server.clear_fault();
        let latest = table.latest().await.unwrap();
        let count = latest.count_rows();
        // Committed or not, never half: a failed append added no row, a landed one its one.
        match result {
            // Once: a manifest PUT retried by the client is never published twice.
            Ok(_) => assert_eq!(count, committed + 1, "step {step}: {fault:?}"),
            Err(_) => assert!(count == committed || count == committed + 1, "{count}"),
        }
        committed = count;
    }
    assert!(committed > 0);
    // Each request of an append in turn stored and then left unanswered, the connection
    // closed: the listing, the data file's PUT, the manifest's (which the client then
    // retries, or natal reads back).
    let dropped = server.connections_dropped();
    for n in 1..=4 {
        server.fail_request(n, Fault::StoredThenDropped);
        let result = table
            .append(vec![crate::common::batch(&[(100 + n as i64, 0)])])
            .await;
        server.clear_fault();
        let count = table.latest().await.unwrap().count_rows();
        match result {
            Ok(_) => assert_eq!(count, committed + 1, "dropped request {n}"),
            Err(_) => assert!(count == committed || count == committed + 1, "{count}"),
        }
        committed = count;
    }
    assert_eq!(
        server.connections_dropped(),
        dropped + 2,
        "both PUTs dropped"
    );
}

/// Clones between a local root and S3: a shallow clone in the bucket reads the local
/// table's files by their store's URL; a deep one copies them into the bucket (streamed
/// across stores) and outlives the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_cross_from_a_local_root_into_s3() {
    let target = Target::new().await;
    let (root, ctx) = crate::common::catalog_session();
    let bucket = url::Url::parse(&format!("s3://{}", target.endpoint.bucket)).unwrap();
    ctx.register_object_store(&bucket, target.client());
    let answer = |sql: String| {
        let ctx = ctx.clone();
        async move { crate::common::answer(&ctx, &sql).await }
    };
    answer("CREATE TABLE t (k BIGINT, v VARCHAR)".into())
        .await
        .unwrap();
    answer("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')".into())
        .await
        .unwrap();
    answer("UPDATE t SET v = 'B' WHERE k = 2".into())
        .await
        .unwrap();
    let rows = "SELECT _rowid, k, v FROM \"{}$rows\" ORDER BY k";
    let expected = answer(rows.replace("{}", "t")).await.unwrap();
    for (name, kind) in [("shallow", "shallow"), ("deep", "deep")] {
        let location = target.url(name);
        answer(format!(
            "SELECT * FROM natal_clone('t', '{location}', 3, '{kind}')"
        ))
        .await
        .unwrap();
        answer(format!(
            "CREATE EXTERNAL TABLE {name} STORED AS NATAL LOCATION '{location}'"
        ))
        .await
        .unwrap();
        assert_eq!(
            answer(rows.replace("{}", name)).await.unwrap(),
            expected,
            "{name}"
        );
    }
    let keys = target.keys().await;
    let copied = format!("{}/deep/data/", target.prefix);
    assert!(keys.iter().any(|k| k.starts_with(&copied)), "{keys:?}");
    let referenced = format!("{}/shallow/data/", target.prefix);
    assert!(!keys.iter().any(|k| k.starts_with(&referenced)), "{keys:?}");

    // The local table goes away: the deep clone reads on, the shallow one says why not.
    std::fs::remove_dir_all(root.path().join("t")).unwrap();
    assert_eq!(answer(rows.replace("{}", "deep")).await.unwrap(), expected);
    let error = answer(rows.replace("{}", "shallow"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("shallow-cloned"), "{error}");
}

/// Clones within a bucket: a deep clone copies each file with the server's own copy (no
/// byte through the client), a shallow one references the files in place, and the deep
/// one outlives its source's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_within_a_bucket_copy_on_the_server() {
    let target = Target::new().await;
    let ctx = target.session();
    let answer = |sql: String| {
        let ctx = ctx.clone();
        async move { crate::common::answer(&ctx, &sql).await }
    };
    for sql in [
        "CREATE TABLE t (k BIGINT, v VARCHAR)",
        "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "UPDATE t SET v = 'B' WHERE k = 2",
        "SELECT * FROM natal_clone('t', 'd', 3, 'deep')",
        "SELECT * FROM natal_clone('t', 's', 3, 'shallow')",
    ] {
        answer(sql.into()).await.unwrap();
    }
    let rows = "SELECT _rowid, k, v FROM \"{}$rows\" ORDER BY k";
    let expected = answer(rows.replace("{}", "t")).await.unwrap();
    for name in ["d", "s"] {
        assert_eq!(answer(rows.replace("{}", name)).await.unwrap(), expected);
    }
    let keys = target.keys().await;
    let under = |table: &str| {
        let prefix = format!("{}/root/{table}/data/", target.prefix);
        keys.iter().filter(|k| k.starts_with(&prefix)).count()
    };
    assert!(under("d") > 0 && under("d") == under("t"), "{keys:?}");
    assert_eq!(under("s"), 0, "{keys:?}");

    use object_store::ObjectStoreExt;
    let source = object_store::path::Path::from(format!("{}/root/t", target.prefix));
    let store = target.client();
    let listed: Vec<_> = store.list(Some(&source)).try_collect().await.unwrap();
    for meta in listed {
        store.delete(&meta.location).await.unwrap();
    }
    assert_eq!(answer(rows.replace("{}", "d")).await.unwrap(), expected);
    let error = answer(rows.replace("{}", "s"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("shallow-cloned"), "{error}");
}
