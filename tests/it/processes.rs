//! Several `natal` processes on one table, and processes killed (SIGKILL) mid-write.
//!
//! Races and crashes land at chosen moments through the commit's pause points
//! (`NATAL_TEST_PAUSE`, see `src/table/commit/pause.rs`): a process stops with its files
//! written and its manifest not yet put (or just put), and the test lets the others commit
//! first or kills it there. After every crash the table must hold exactly the rows of the
//! versions that exist, stay writable, and lose the killed write's files to cleanup.
//!
//! The races run twice: on a local directory, and on an S3 bucket of the in-process server
//! (`s3_server`), the processes reaching it over HTTP with the endpoint and keys in their
//! environment, as a user's would.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;

/// A catalog root, driven through the `natal` binary: a temporary directory, or a prefix of
/// a bucket of an S3 server.
struct Warehouse {
    root: String,
    /// The processes' environment beyond the test's (the S3 endpoint and keys).
    environment: Vec<(&'static str, String)>,
    /// The root's store and its path there, to list what the processes wrote.
    store: Arc<dyn ObjectStore>,
    prefix: object_store::path::Path,
    /// Runs the S3 server and the listings.
    runtime: tokio::runtime::Runtime,
    /// The local root, when it is one.
    dir: Option<tempfile::TempDir>,
    _server: Option<crate::s3_server::S3Server>,
}

/// Where a process pauses: a commit point, the operation whose first commit stops there,
/// and the directory of its `reached` and `resume` files.
struct Pause<'a> {
    point: &'a str,
    operation: &'a str,
    dir: &'a Path,
}

impl Warehouse {
    /// A root in a temporary directory.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        Self {
            root: dir.path().to_str().unwrap().to_string(),
            environment: Vec::new(),
            store: Arc::new(store),
            prefix: object_store::path::Path::default(),
            runtime: tokio::runtime::Runtime::new().unwrap(),
            dir: Some(dir),
            _server: None,
        }
    }

    /// A root in a bucket of an S3 server: the external endpoint the environment names,
    /// or a new in-process server (`s3_server::Endpoint`).
    fn on_s3() -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let endpoint = runtime
            .block_on(crate::s3_server::Endpoint::from_env_or_start())
            .unwrap();
        let prefix = format!("warehouse-{}", uuid::Uuid::new_v4().simple());
        Self {
            root: format!("s3://{}/{prefix}", endpoint.bucket),
            environment: endpoint.environment(),
            store: Arc::new(endpoint.client().unwrap()),
            prefix: object_store::path::Path::from(prefix),
            runtime,
            dir: None,
            _server: endpoint.server,
        }
    }

    /// Both kinds of root.
    fn each() -> [Self; 2] {
        [Self::new(), Self::on_s3()]
    }

    fn command(&self, sql: &[String], pause: Option<&Pause>) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_natal"));
        crate::s3_server::with_environment(&mut command, &self.environment);
        command
            .arg("--root")
            .arg(&self.root)
            .args(["-q", "--format", "csv", "-c"])
            .args(sql)
            .stdin(Stdio::null());
        if let Some(pause) = pause {
            command.env(
                "NATAL_TEST_PAUSE",
                format!(
                    "{}:{}:{}",
                    pause.point,
                    pause.operation,
                    pause.dir.display()
                ),
            );
        }
        command
    }

    /// Runs `sql` in a new process to its end.
    fn run(&self, sql: &[&str]) -> Output {
        let sql: Vec<String> = sql.iter().map(|s| s.to_string()).collect();
        self.command(&sql, None).output().expect("run natal")
    }

    /// Runs `sql`, which must succeed, and returns its output lines without CSV headers.
    fn query(&self, sql: &str) -> Vec<String> {
        let out = self.run(&[sql]);
        assert!(out.status.success(), "{sql}: {}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect()
    }

    /// The one value `sql` returns.
    fn value(&self, sql: &str) -> u64 {
        let lines = self.query(sql);
        assert_eq!(lines.len(), 1, "{sql}: {lines:?}");
        lines[0]
            .parse()
            .unwrap_or_else(|_| panic!("{sql}: {lines:?}"))
    }

    /// Starts `sql` in a process that pauses as `pause` says.
    fn spawn(&self, sql: &[String], pause: Option<&Pause>) -> Child {
        self.command(sql, pause)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start natal")
    }

    /// The table's directory, on a local root.
    fn table_dir(&self, table: &str) -> PathBuf {
        let dir = self.dir.as_ref().expect("a local root");
        dir.path().join(table)
    }

    /// The names of the table's files (and sidecar directories) under `data/`.
    fn data_files(&self, table: &str) -> BTreeSet<String> {
        let data = self.prefix.clone().join(table).join("data");
        let listed = match (self.runtime).block_on(self.store.list_with_delimiter(Some(&data))) {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => return BTreeSet::new(),
            Err(e) => panic!("listing {data}: {e}"),
        };
        let files = listed.objects.into_iter().map(|m| m.location);
        (files.chain(listed.common_prefixes))
            .filter_map(|p| p.filename().map(str::to_string))
            .collect()
    }

    fn latest_version(&self, table: &str) -> u64 {
        self.value(&format!("SELECT max(version) FROM \"{table}$versions\""))
    }

    /// `(rowid, id, v)` of every row of `table` (`t`, `t@v3`), in id order.
    fn rows(&self, table: &str) -> Vec<String> {
        self.query(&format!(
            "SELECT _rowid, id, v FROM \"{table}$rows\" ORDER BY _rowid"
        ))
    }

    /// Removes files no version references, however young.
    fn cleanup_orphans(&self, table: &str) -> u64 {
        let lines = self.query(&format!(
            "SELECT files_removed FROM natal_cleanup('{table}', 1000000, 0, 0)"
        ));
        lines[0].parse().unwrap()
    }

    /// Creates `t (id BIGINT, v BIGINT)` holding ids `1..=rows` with `v = 0`.
    fn create_table(&self, rows: u64) {
        let out = self.run(&[
            "CREATE TABLE t (id BIGINT NOT NULL, v BIGINT NOT NULL)",
            &format!("INSERT INTO t SELECT value, 0 FROM generate_series(1, {rows})"),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until `path` exists: a paused process has reached its point. A bound, not a
/// timing assertion: a process that never gets there fails the test instead of hanging it.
fn wait_for(path: &Path, child: &mut Child) {
    let started = Instant::now();
    while !path.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.stderr.take().map(std::io::read_to_string);
            panic!(
                "the process ended ({status}) before {}: {out:?}",
                path.display()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "never reached {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pause directory per process.
fn pause_dirs(n: usize) -> Vec<tempfile::TempDir> {
    (0..n).map(|_| tempfile::tempdir().unwrap()).collect()
}

fn resume(dir: &Path) {
    std::fs::write(dir.join("resume"), b"").unwrap();
}

fn finish(child: Child) -> Output {
    child.wait_with_output().expect("wait for natal")
}

#[test]
fn appends_from_several_processes_all_land() {
    for warehouse in Warehouse::each() {
        appends_land(&warehouse);
    }
}

fn appends_land(warehouse: &Warehouse) {
    warehouse.create_table(0);
    let processes = 4;
    let statements = 6;
    // Merges stay on: the processes' merges race their appends and each other.
    let children: Vec<Child> = (0..processes)
        .map(|p| {
            let sql: Vec<String> = (0..statements)
                .map(|s| {
                    let first = (p * statements + s) * 10 + 1;
                    format!(
                        "INSERT INTO t SELECT value, {p} FROM generate_series({first}, {})",
                        first + 9
                    )
                })
                .collect();
            warehouse.spawn(&sql, None)
        })
        .collect();
    for child in children {
        let out = finish(child);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let total = processes * statements * 10;
    assert_eq!(
        warehouse.value("SELECT count(DISTINCT id) FROM t WHERE id BETWEEN 1 AND 240"),
        total as u64
    );
    assert_eq!(warehouse.value("SELECT count(*) FROM t"), total as u64);
    for p in 0..processes {
        assert_eq!(
            warehouse.value(&format!("SELECT count(*) FROM t WHERE v = {p}")),
            (statements * 10) as u64
        );
    }
    assert_eq!(
        warehouse.value(
            "SELECT count(*) FROM \"t$versions\" WHERE operation = 'append' AND rows_added = 10"
        ),
        (processes * statements) as u64,
        "one version per statement"
    );
}

#[test]
fn disjoint_updates_planned_at_one_version_all_land_and_keep_their_ids() {
    for warehouse in Warehouse::each() {
        disjoint_updates_land(&warehouse);
    }
}

fn disjoint_updates_land(warehouse: &Warehouse) {
    warehouse.create_table(400);
    let before = warehouse.rows("t");
    let version = warehouse.latest_version("t");
    let processes = 4;
    let dirs = pause_dirs(processes);
    let mut children: Vec<Child> = (0..processes)
        .map(|k| {
            let sql = vec![
                "SET natal.merge_fan_in = 0".to_string(),
                format!("UPDATE t SET v = {} WHERE id % {processes} = {k}", k + 1),
            ];
            let pause = Pause {
                point: "before-publish",
                operation: "update",
                dir: dirs[k].path(),
            };
            warehouse.spawn(&sql, Some(&pause))
        })
        .collect();
    // Every update has planned against `version` and written its rows before any publishes.
    for (child, dir) in children.iter_mut().zip(&dirs) {
        wait_for(&dir.path().join("reached"), child);
    }
    for dir in &dirs {
        resume(dir.path());
    }
    for child in children {
        let out = finish(child);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    assert_eq!(warehouse.latest_version("t"), version + processes as u64);
    let after = warehouse.rows("t");
    assert_eq!(after.len(), 400);
    for (old, new) in before.iter().zip(&after) {
        let (old_id, new_fields): (Vec<&str>, Vec<&str>) =
            (old.split(',').collect(), new.split(',').collect());
        assert_eq!(old_id[..2], new_fields[..2], "an update keeps the row's id");
        let id: u64 = new_fields[1].parse().unwrap();
        assert_eq!(
            new_fields[2],
            (id % processes as u64 + 1).to_string(),
            "{new}"
        );
    }
}

#[test]
fn same_row_updates_from_two_processes_one_gets_a_typed_conflict() {
    for warehouse in Warehouse::each() {
        same_row_updates_conflict(&warehouse);
    }
}

fn same_row_updates_conflict(warehouse: &Warehouse) {
    warehouse.create_table(10);
    let version = warehouse.latest_version("t");
    let dirs = pause_dirs(2);
    let mut children: Vec<Child> = [100, 200]
        .iter()
        .zip(&dirs)
        .map(|(value, dir)| {
            let pause = Pause {
                point: "before-publish",
                operation: "update",
                dir: dir.path(),
            };
            warehouse.spawn(
                &[format!("UPDATE t SET v = {value} WHERE id = 7")],
                Some(&pause),
            )
        })
        .collect();
    for (child, dir) in children.iter_mut().zip(&dirs) {
        wait_for(&dir.path().join("reached"), child);
    }
    let mut children = children.into_iter();
    let (first, second) = (children.next().unwrap(), children.next().unwrap());
    resume(dirs[0].path());
    let out = finish(first);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let data_files = warehouse.data_files("t");
    resume(dirs[1].path());
    let out = finish(second);
    assert!(!out.status.success(), "the second update must not land");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("commit conflict: update planned at version")
            && stderr.contains("conflicts with the update committed as version"),
        "{stderr}"
    );
    assert_eq!(warehouse.latest_version("t"), version + 1);
    assert_eq!(warehouse.value("SELECT v FROM t WHERE id = 7"), 100);
    assert_eq!(warehouse.value("SELECT count(*) FROM t WHERE v <> 0"), 1);
    // Both updates wrote their rows before either published; the refused one deletes its.
    let after = warehouse.data_files("t");
    assert!(after.is_subset(&data_files), "{after:?} {data_files:?}");
    assert_eq!(
        after.len() + 1,
        data_files.len(),
        "the refused update removes the rows it wrote"
    );
}

/// Kills a process paused at `point` of its first `operation` commit while running `sql`.
fn kill_at(warehouse: &Warehouse, sql: &str, point: &str, operation: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let pause = Pause {
        point,
        operation,
        dir: dir.path(),
    };
    let mut child = warehouse.spawn(
        &["SET natal.merge_fan_in = 0".into(), sql.into()],
        Some(&pause),
    );
    wait_for(&dir.path().join("reached"), &mut child);
    child.kill().expect("SIGKILL natal");
    finish(child)
}

#[test]
fn an_insert_killed_before_it_publishes_leaves_no_rows_and_cleanup_takes_its_files() {
    let warehouse = Warehouse::new();
    warehouse.create_table(10);
    let version = warehouse.latest_version("t");
    let rows = warehouse.rows("t");
    let files = warehouse.data_files("t");
    // Three fragments of 1M rows' worth, all written before the kill.
    let killed = kill_at(
        &warehouse,
        "INSERT INTO t SELECT value, 1 FROM generate_series(1, 2500000)",
        "before-publish",
        "append",
    );
    assert!(!killed.status.success());
    let orphans: BTreeSet<String> = warehouse
        .data_files("t")
        .difference(&files)
        .cloned()
        .collect();
    assert_eq!(
        orphans.len(),
        3,
        "the killed write's data files are on disk"
    );
    assert_eq!(warehouse.latest_version("t"), version);
    assert_eq!(warehouse.rows("t"), rows);

    // Writable: the next write takes the next version.
    let out = warehouse.run(&["INSERT INTO t VALUES (11, 0)"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(warehouse.latest_version("t"), version + 1);
    assert_eq!(warehouse.value("SELECT count(*) FROM t"), 11);

    assert!(warehouse.cleanup_orphans("t") >= 3);
    let left = warehouse.data_files("t");
    assert!(
        left.is_disjoint(&orphans),
        "cleanup removes the orphans: {left:?}"
    );
    assert_eq!(left.len(), files.len() + 1);
    assert_eq!(warehouse.value("SELECT count(*) FROM t"), 11);
}

#[test]
fn an_insert_killed_after_it_publishes_keeps_its_rows() {
    let warehouse = Warehouse::new();
    warehouse.create_table(10);
    let version = warehouse.latest_version("t");
    let killed = kill_at(
        &warehouse,
        "INSERT INTO t SELECT value, 1 FROM generate_series(11, 1010)",
        "after-publish",
        "append",
    );
    assert!(!killed.status.success());
    assert!(
        killed.stdout.is_empty(),
        "the process was killed before it reported the write"
    );
    assert_eq!(warehouse.latest_version("t"), version + 1);
    assert_eq!(warehouse.value("SELECT count(*) FROM t"), 1010);
    assert_eq!(
        warehouse.cleanup_orphans("t"),
        0,
        "a published write has no orphans"
    );
}

#[test]
fn an_insert_killed_while_its_files_appear_holds_what_its_versions_say() {
    let warehouse = Warehouse::new();
    warehouse.create_table(10);
    let files = warehouse.data_files("t");
    let mut child = warehouse.spawn(
        &["INSERT INTO t SELECT value, 1 FROM generate_series(1, 3000000)".into()],
        None,
    );
    let started = Instant::now();
    while warehouse.data_files("t").len() == files.len() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no data file appeared"
        );
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the insert ended ({status}) before writing a data file");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL natal");
    finish(child);
    // Whatever the process managed, the rows are those of the versions that exist.
    let published = warehouse.value(
        "SELECT count(*) FROM \"t$versions\" WHERE operation = 'append' AND rows_added = 3000000",
    );
    assert_eq!(
        warehouse.value("SELECT count(*) FROM t"),
        10 + published * 3_000_000
    );
    warehouse.cleanup_orphans("t");
    let out = warehouse.run(&["INSERT INTO t VALUES (0, 0)"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        warehouse.value("SELECT count(*) FROM t"),
        11 + published * 3_000_000
    );
    let referenced = warehouse.value("SELECT sum(data_files) FROM \"t$fragments\"");
    assert_eq!(
        warehouse.data_files("t").len() as u64,
        referenced,
        "after cleanup, every data file is a fragment's: {:?}",
        warehouse.data_files("t")
    );
}

#[test]
fn a_compaction_killed_before_it_publishes_changes_nothing() {
    let warehouse = Warehouse::new();
    warehouse.create_table(0);
    for first in [1, 101, 201, 301] {
        let out = warehouse.run(&[
            "SET natal.merge_fan_in = 0",
            &format!(
                "INSERT INTO t SELECT value, 0 FROM generate_series({first}, {})",
                first + 99
            ),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = warehouse.run(&["DELETE FROM t WHERE id % 10 = 0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let version = warehouse.latest_version("t");
    let rows = warehouse.rows("t");
    let files = warehouse.data_files("t");
    let killed = kill_at(
        &warehouse,
        "SELECT * FROM natal_compact('t')",
        "before-publish",
        "compaction",
    );
    assert!(!killed.status.success());
    assert!(
        warehouse.data_files("t").len() > files.len(),
        "its output was written"
    );
    assert_eq!(warehouse.latest_version("t"), version);
    assert_eq!(warehouse.value("SELECT count(*) FROM \"t$fragments\""), 4);
    assert_eq!(warehouse.rows("t"), rows);

    // A second compaction lands, and cleanup leaves only its output.
    let out = warehouse.run(&["SELECT * FROM natal_compact('t')"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(warehouse.latest_version("t"), version + 1);
    assert_eq!(warehouse.rows("t"), rows, "compaction keeps every id");
    warehouse.cleanup_orphans("t");
    let referenced = warehouse.value("SELECT sum(data_files) FROM \"t$fragments\"");
    assert_eq!(referenced, 1);
    assert_eq!(warehouse.data_files("t").len(), 1 + files.len());
}

#[test]
fn cleanup_removes_the_unfinished_uploads_a_killed_writer_leaves_on_a_local_disk() {
    let warehouse = Warehouse::new();
    warehouse.create_table(10);
    let rows = warehouse.rows("t");
    // What object_store's local store leaves of a write killed mid-upload: a staging file
    // its listings never show. Landing a kill inside one upload is left to chance, so the
    // test makes them.
    let table = warehouse.table_dir("t");
    let staged = [
        table.join("data").join("killed.parquet#3"),
        table
            .join("_versions")
            .join("00000000000000000009.manifest#1"),
    ];
    for file in &staged {
        std::fs::write(file, vec![7u8; 1000]).unwrap();
    }
    let kept = warehouse.query("SELECT files_removed FROM natal_cleanup('t')");
    assert_eq!(kept, ["0"], "young staging files may be uploads under way");
    assert!(staged.iter().all(|f| f.exists()));
    assert_eq!(warehouse.cleanup_orphans("t"), 2);
    assert!(staged.iter().all(|f| !f.exists()));
    assert_eq!(warehouse.rows("t"), rows);
}
