//! natal on a Ballista cluster of processes (cargo feature `ballista`): `natal-scheduler` and
//! two `natal-executor`s on 127.0.0.1, the `natal` CLI with `--ballista` against them giving
//! the answers the CLI gives locally — over a local directory and over an S3 bucket (the
//! in-process server, or the one `NATAL_TEST_S3_ENDPOINT` names; tasks pushed to executors
//! on the first, pulled by them on the second) — a write refused with
//! what to do instead, and one executor killed during a long query: the query fails with an
//! error or answers in full, never with missing or repeated rows. Every process is killed
//! when the test ends, and every wait is bounded.

use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Child processes, killed when dropped.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Where the processes find the tables, and the environment they run in: a local
/// directory in the test's own, or an `s3://` root with its endpoint's.
struct Root {
    url: String,
    environment: Option<Vec<(&'static str, String)>>,
}

impl Root {
    fn local(path: &std::path::Path) -> Self {
        Self {
            url: path.to_str().expect("a UTF-8 path").to_string(),
            environment: None,
        }
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        if let Some(environment) = &self.environment {
            crate::s3_server::with_environment(&mut command, environment);
        }
        command
    }
}

fn spawn(root: &Root, program: &str, args: &[String], log: &std::path::Path) -> Child {
    let log = std::fs::File::create(log).expect("a log file");
    root.command(program)
        .args(args)
        .stdout(log.try_clone().expect("the log again"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

/// The `natal` CLI over `root` running `sql`, on the cluster at `scheduler` if given.
fn natal_command(root: &Root, scheduler: Option<u16>, sql: &str) -> Command {
    let mut command = root.command(env!("CARGO_BIN_EXE_natal"));
    command.args([
        "--root",
        &root.url,
        "-q",
        "--maxrows",
        "inf",
        "--format",
        "csv",
        "-c",
        sql,
    ]);
    if let Some(port) = scheduler {
        command.args(["--ballista", &format!("df://127.0.0.1:{port}")]);
    }
    command
}

/// [`natal_command`], run to its end.
fn natal(root: &Root, scheduler: Option<u16>, sql: &str) -> Output {
    natal_command(root, scheduler, sql)
        .output()
        .expect("the natal CLI runs")
}

/// [`natal_command`] started, its output captured.
fn natal_started(root: &Root, scheduler: Option<u16>, sql: &str) -> Child {
    natal_command(root, scheduler, sql)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the natal CLI runs")
}

/// A scheduler and two executors over `root`, logging into `dir`, that answer `probe`;
/// tasks reach executors as `scheduling` says (`push` or `pull`), and executors get
/// `executor_args` too.
struct ProcessCluster {
    processes: Processes,
    port: u16,
    scheduler_log: std::path::PathBuf,
}

impl ProcessCluster {
    fn start(
        dir: &std::path::Path,
        root: &Root,
        (scheduling, executor_args): (&str, &[&str]),
        probe: &str,
    ) -> Self {
        let port = free_port();
        let scheduler_log = dir.join("scheduler.log");
        let mut processes = Processes(Vec::new());
        let shared = || {
            let scheduling = ["--scheduling".to_string(), scheduling.to_string()];
            scheduling
                .into_iter()
                .chain(["--root".to_string(), root.url.clone()])
        };
        let mut args: Vec<String> = vec![
            "--bind-port".into(),
            port.to_string(),
            // A lost executor is noticed within seconds, not Ballista's default 3 minutes.
            "--executor-timeout-seconds".into(),
            "5".into(),
            "--expire-dead-executor-interval-seconds".into(),
            "1".into(),
        ];
        args.extend(shared());
        let scheduler = env!("CARGO_BIN_EXE_natal-scheduler");
        processes
            .0
            .push(spawn(root, scheduler, &args, &scheduler_log));
        for executor in 0..2 {
            let work_dir = dir.join(format!("work{executor}"));
            std::fs::create_dir_all(&work_dir).unwrap();
            let mut args: Vec<String> = vec![
                "--scheduler-port".into(),
                port.to_string(),
                "--bind-port".into(),
                free_port().to_string(),
                "--bind-grpc-port".into(),
                free_port().to_string(),
                "--vcores".into(),
                "2".into(),
                // Heard from well within the scheduler's 5 seconds.
                "--heartbeat-interval-seconds".into(),
                "1".into(),
                "--work-dir".into(),
                work_dir.to_string_lossy().into_owned(),
            ];
            args.extend(shared());
            args.extend(executor_args.iter().map(|a| a.to_string()));
            let log = dir.join(format!("executor{executor}.log"));
            processes.0.push(spawn(
                root,
                env!("CARGO_BIN_EXE_natal-executor"),
                &args,
                &log,
            ));
        }
        // The cluster answers once the scheduler listens and an executor has asked for work.
        let started = Instant::now();
        loop {
            let answer = natal(root, Some(port), probe);
            if answer.status.success() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the cluster did not answer: {}",
                String::from_utf8_lossy(&answer.stderr)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        Self {
            processes,
            port,
            scheduler_log,
        }
    }
}

/// `query` on the cluster at `port` answers as the CLI does locally, with rows.
fn same_answers(root: &Root, port: u16, query: &str) {
    let local = natal(root, None, query);
    succeeded(&local, query);
    let remote = natal(root, Some(port), query);
    succeeded(&remote, query);
    assert!(sorted_lines(&local).len() > 1, "{query}");
    assert_eq!(sorted_lines(&remote), sorted_lines(&local), "{query}");
}

/// Its output lines, sorted (a multiset of rows: duplicates kept).
fn sorted_lines(output: &Output) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

fn succeeded(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_cli_on_a_cluster_of_processes_answers_as_locally_and_survives_a_lost_executor() {
    let dir = tempfile::tempdir().unwrap();
    let root = &Root::local(&dir.path().join("root"));
    let setup = [
        "CREATE TABLE t (k BIGINT, v BIGINT)",
        "INSERT INTO t SELECT value, value % 7 FROM generate_series(0, 29999)",
        "INSERT INTO t SELECT value, value % 5 FROM generate_series(30000, 59999)",
        "UPDATE t SET v = v + 10 WHERE k % 9 = 0",
        "DELETE FROM t WHERE k % 11 = 0",
        "CREATE TABLE big (k BIGINT, v BIGINT)",
        "INSERT INTO big SELECT value, value % 1000 FROM generate_series(0, 2999999)",
    ];
    for sql in setup {
        succeeded(&natal(root, None, sql), sql);
    }
    let mut cluster =
        ProcessCluster::start(dir.path(), root, ("push", &[]), "SELECT count(*) FROM t");
    let scheduler_port = cluster.port;
    for query in [
        "SELECT k, v FROM t",
        "SELECT v, count(*), sum(k) FROM t WHERE k > 12345 GROUP BY v",
        "SELECT _rowid, _rowaddr, k FROM \"t$rows\" WHERE v >= 10",
        "SELECT _rowid, k FROM \"t$rows\" WHERE _rowid IN (9, 18, 4294967296, 4294967302)",
        "SELECT a.k, b.v FROM t a JOIN t b ON a.k = b.k + 1 WHERE a.v = 3",
        "SELECT count(*) FROM \"t@v2\"",
    ] {
        same_answers(root, scheduler_port, query);
    }

    let refused = natal(root, Some(scheduler_port), "INSERT INTO t VALUES (1, 1)");
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("without --ballista"), "{message}");
    let count = natal(root, None, "SELECT count(*) FROM t");
    assert_eq!(sorted_lines(&count), ["54545", "count(*)"]);

    // An executor dies while a long query runs (a join of 3M rows with 3M, shuffled).
    let long = "SELECT a.v, count(*), sum(b.k) FROM big a JOIN big b ON a.k = b.k + 1 \
                WHERE a.k % 3 <> 1 GROUP BY a.v";
    let expected = natal(root, None, long);
    succeeded(&expected, long);
    let jobs_before = submitted_jobs(&cluster.scheduler_log);
    let query = natal_started(root, Some(scheduler_port), long);
    // Killed once the scheduler has the job, while its tasks run.
    let started = Instant::now();
    while submitted_jobs(&cluster.scheduler_log) <= jobs_before {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the job never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(150));
    let executor = cluster.processes.0.last_mut().expect("an executor");
    executor.kill().expect("the executor is killed");
    let _ = executor.wait();
    let answered = wait_bounded(query, Duration::from_secs(240));
    // natal's scheduler cancels a job that loses an executor (`cluster::run_scheduler`), or
    // a task fetching the lost executor's shuffle output fails the job first; one that
    // finished first answers in full.
    if answered.status.success() {
        assert_eq!(sorted_lines(&answered), sorted_lines(&expected));
    } else {
        let message = String::from_utf8_lossy(&answered.stderr);
        // A fetch of the lost executor's shuffle output says so in its own words, or the
        // client's connection to the lost executor is refused or broken mid-answer.
        let says_so = [
            "Cancelled",
            "failed",
            "Shuffle fetch partition error",
            "Error connecting to Ballista scheduler or executor",
            "broken pipe",
        ];
        assert!(
            says_so.iter().any(|words| message.contains(words)),
            "a failure says so: {message}"
        );
        assert!(answered.stdout.is_empty(), "no partial answer");
    }
    // The remaining executor answers once the scheduler has noticed the loss (a query sent
    // before may still be given to the lost executor, and be cancelled with it).
    let started = Instant::now();
    while !std::fs::read_to_string(&cluster.scheduler_log)
        .unwrap_or_default()
        .contains("Removing executor")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the scheduler never noticed the lost executor"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = natal_started(
        root,
        Some(scheduler_port),
        "SELECT v, count(*) FROM t GROUP BY v",
    );
    let after = wait_bounded(after, Duration::from_secs(120));
    succeeded(&after, "after the loss");
    let local = natal(root, None, "SELECT v, count(*) FROM t GROUP BY v");
    assert_eq!(sorted_lines(&after), sorted_lines(&local));
}

/// The same cluster over an `s3://` root: the CLI, the scheduler and each executor build the
/// bucket's store from their own environment, and the cluster answers as the CLI does
/// locally — blob values in sidecars of the bucket included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_on_a_cluster_of_processes_reads_an_s3_root() {
    let endpoint = crate::s3_server::Endpoint::from_env_or_start()
        .await
        .expect("an S3 endpoint");
    let root = &Root {
        url: format!(
            "s3://{}/cluster-processes-{}",
            endpoint.bucket,
            uuid::Uuid::new_v4().simple()
        ),
        environment: Some(endpoint.environment()),
    };
    let dir = tempfile::tempdir().unwrap();
    // The in-process server answers on the runtime's other worker meanwhile.
    tokio::task::block_in_place(|| {
        for sql in [
            "CREATE TABLE t (k BIGINT, v BIGINT)",
            "INSERT INTO t SELECT value, value % 7 FROM generate_series(0, 19999)",
            "INSERT INTO t SELECT value, value % 5 FROM generate_series(20000, 39999)",
            "UPDATE t SET v = v + 10 WHERE k % 9 = 0",
            "DELETE FROM t WHERE k % 11 = 0",
            "CREATE TABLE d (id BIGINT, body BLOB)",
            "INSERT INTO d VALUES (1, X'CAFE'), (2, CAST(repeat('ab', 40000) AS BYTEA)), \
             (3, CAST(repeat('cd', 2600000) AS BYTEA))",
        ] {
            succeeded(&natal(root, None, sql), sql);
        }
        // Executors that ask for their tasks, Ballista's other way, listening on every
        // interface and telling the others to fetch their shuffle output at 127.0.0.1.
        let executors = ["--bind-host", "0.0.0.0", "--external-host", "127.0.0.1"];
        let how = ("pull", executors.as_slice());
        let cluster = ProcessCluster::start(dir.path(), root, how, "SELECT count(*) FROM t");
        for query in [
            "SELECT k, v FROM t",
            "SELECT v, count(*), sum(k) FROM t WHERE k > 1234 GROUP BY v",
            "SELECT _rowid, k FROM \"t$rows\" WHERE _rowid IN (9, 18, 4294967296, 4294967302)",
            "SELECT count(*) FROM \"t@v2\"",
            "SELECT id, octet_length(body), md5(body) FROM d",
        ] {
            same_answers(root, cluster.port, query);
        }
    });
}

/// How many jobs the scheduler has logged as submitted.
fn submitted_jobs(log: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.matches("Job submitted").count()
}

/// `child`'s output, killing it if it runs longer than `limit`.
fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("the query's status").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("a query ran longer than {limit:?} after an executor was lost");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().expect("the query's output")
}
