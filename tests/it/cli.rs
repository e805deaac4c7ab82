//! The `natal` binary: the README's main job, object-store roots, and bad `--root`s.

use std::process::{Command, Output};

fn natal(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_natal"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run natal")
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
