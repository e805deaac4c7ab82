//! The `natal` binary: the README's main job, object-store roots, and bad `--root`s.

use std::process::{Command, Output};

fn natal(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_natal"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run natal")
}

/// DataFusion's settings come from `DATAFUSION_*` variables, as datafusion-cli takes them;
/// a value that does not parse stops the CLI with the setting's name.
#[test]
fn datafusion_settings_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let show = |value: &str| {
        let show = "SHOW datafusion.execution.batch_size";
        Command::new(env!("CARGO_BIN_EXE_natal"))
            .args(["--root", root, "-q", "--format", "csv", "-c", show])
            .env("DATAFUSION_EXECUTION_BATCH_SIZE", value)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run natal")
    };
    let out = show("1234");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("datafusion.execution.batch_size,1234"),
        "{stdout}"
    );
    let out = show("many");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("batch_size"), "{stderr}");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_walkthrough_runs_on_a_local_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let out = natal(&["--root", root, "-q", "-f", "examples/walkthrough.sql"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        dir.path().join("items").join("_versions").is_dir(),
        "the walkthrough's table is on disk"
    );
    // Its change read answers, a preimage from the update's change data included.
    let stdout = text(&out.stdout);
    assert!(stdout.contains("update_preimage"), "{stdout}");
}

#[test]
fn an_object_store_url_can_be_the_root() {
    let out = natal(&[
        "--root",
        "memory:///warehouse",
        "-q",
        "--format",
        "csv",
        "-c",
        "CREATE TABLE t (a BIGINT NOT NULL)",
        "INSERT INTO t VALUES (1), (2), (3)",
        "SELECT count(*) AS n FROM t",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).lines().any(|l| l.trim() == "3"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn an_unsupported_root_scheme_is_a_clear_error() {
    let out = natal(&["--root", "ftp://example.com/x", "-q", "-c", "SELECT 1"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("unsupported scheme 'ftp'"), "{stderr}");
}

/// `--staleness-limit` takes a duration (its own commits are still seen at once); anything
/// else is refused before a statement runs.
#[test]
fn the_staleness_limit_is_a_duration() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let out = natal(&[
        "--root",
        root,
        "--staleness-limit",
        "1h",
        "-q",
        "--format",
        "csv",
        "-c",
        "CREATE TABLE t (a BIGINT)",
        "SELECT count(*) AS n FROM t",
        "INSERT INTO t VALUES (1), (2)",
        "SELECT count(*) AS n FROM t",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.lines().any(|l| l.trim() == "2"), "{stdout}");
    let out = natal(&[
        "--root",
        root,
        "--staleness-limit",
        "soon",
        "-c",
        "SELECT 1",
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--staleness-limit"), "{stderr}");
}

/// `natal` in directory `cwd` (where the REPL keeps its `.history`) with `stdin` as its
/// input (the REPL reads piped lines).
fn natal_with_input(cwd: &std::path::Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_natal"))
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run natal");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().expect("wait for natal")
}

#[test]
fn a_system_column_beside_a_star_works_in_commands_files_and_the_repl() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let setup = natal(&[
        "--root",
        root,
        "-q",
        "-c",
        "CREATE TABLE t (a BIGINT NOT NULL)",
        "INSERT INTO t VALUES (10), (20)",
    ]);
    assert!(setup.status.success(), "{}", text(&setup.stderr));
    let query = "SELECT *, _rowid FROM \"t$rows\" ORDER BY a;";
    let expected = "a,_rowaddr,_row_created_version,_row_updated_version,_rowid\n\
                    10,0,2,2,0\n20,1,2,2,1\n";

    let command = natal(&["--root", root, "-q", "--format", "csv", "-c", query]);
    assert!(command.status.success(), "{}", text(&command.stderr));
    assert_eq!(text(&command.stdout), expected);

    let file = dir.path().join("q.sql");
    std::fs::write(&file, format!("-- a comment\nSELECT 1 AS one;\n{query}\n")).unwrap();
    let from_file = natal(&[
        "--root",
        root,
        "-q",
        "--format",
        "csv",
        "-f",
        file.to_str().unwrap(),
    ]);
    assert!(from_file.status.success(), "{}", text(&from_file.stderr));
    assert_eq!(text(&from_file.stdout), format!("one\n1\n{expected}"));

    let repl = natal_with_input(
        dir.path(),
        &["--root", root, "-q", "--format", "csv"],
        &format!("{query}\n\\q\n"),
    );
    assert!(repl.status.success(), "{}", text(&repl.stderr));
    assert_eq!(text(&repl.stdout), expected);
}

#[test]
fn a_missing_sql_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = natal(&[
        "--root",
        dir.path().to_str().unwrap(),
        "-q",
        "-f",
        "no/such/file.sql",
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cannot read SQL file 'no/such/file.sql'"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn alter_table_works_in_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let out = natal(&[
        "--root",
        root,
        "-q",
        "--format",
        "csv",
        "-c",
        "CREATE TABLE t (a INT NOT NULL)",
        "INSERT INTO t VALUES (1)",
        "ALTER TABLE t ADD COLUMN b VARCHAR; ALTER TABLE t RENAME COLUMN a TO id",
        "INSERT INTO t VALUES (2, 'two')",
        "SELECT * FROM t ORDER BY id",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).ends_with("id,b\n1,\n2,two\n"),
        "{}",
        text(&out.stdout)
    );
    let refused = natal(&[
        "--root",
        root,
        "-q",
        "-c",
        "ALTER TABLE t ALTER COLUMN id SET DATA TYPE SMALLINT",
    ]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("not a lossless widening"),
        "{}",
        text(&refused.stderr)
    );
    // ALTER answers as DataFusion's DDL does: no rows, no columns.
    let printed = natal(&["--root", root, "-c", "ALTER TABLE t ADD COLUMN c INT"]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let shown = text(&printed.stdout);
    assert!(shown.contains("0 row(s) fetched"), "{shown}");
    assert!(!shown.contains('|') && !shown.contains("\"\""), "{shown}");
    // A field inside a column: sqlparser cannot read the path, natal says what can.
    let nested = natal(&[
        "--root",
        root,
        "-q",
        "-c",
        "ALTER TABLE t RENAME COLUMN s.a TO b",
    ]);
    assert!(!nested.status.success());
    assert!(
        text(&nested.stderr).contains("natal_rename_column('t', 's.a', 'b')"),
        "{}",
        text(&nested.stderr)
    );
}

/// Blob columns through the CLI: a `BLOB` column, a local file kept as an external value and
/// read back through the CLI session's stores, sizes from descriptors, and `t$blobs`.
#[test]
fn blob_columns_work_in_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tables");
    let object = dir.path().join("photo.bin");
    std::fs::write(&object, vec![7u8; 300]).unwrap();
    let insert = format!(
        "INSERT INTO t VALUES (1, X'0102'), (2, CAST(repeat('x', 100000) AS BYTEA)), \
         (3, natal_external_blob('file://{}'))",
        object.display()
    );
    let out = natal(&[
        "--root",
        root.to_str().unwrap(),
        "-q",
        "--format",
        "csv",
        "-c",
        "CREATE TABLE t (id INT, body BLOB)",
        &insert,
        "SELECT id, octet_length(body) FROM t ORDER BY id",
        "SELECT kind FROM \"t$blobs\" ORDER BY _rowid",
        "SELECT octet_length(encode(body, 'hex')) AS hex FROM t WHERE id = 3",
    ]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("1,2\n2,100000\n3,300\n"),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("inline\npacked\nexternal\n"), "{stdout}");
    assert!(
        stdout.ends_with("hex\n600\n"),
        "the external bytes, read: {stdout}"
    );
}
