//! Row patches (`Table::patch_rows`): the rows keep their ids and addresses, every read
//! sees the new values (SQL scans and filters whose statistics the patch made stale,
//! aggregates, takes, older versions, lineage), compaction folds them, bad input writes
//! nothing, and concurrent writers of the same cells or rows get typed conflicts.

use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::UInt64Type;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use natal::internals::format::flags;
use natal::{CompactOptions, RowId, ScanRequest, Table};

use crate::common::{addr, answer, run};

/// `val` and `name` columns for patches.
fn values(vals: &[i64], names: &[&str]) -> RecordBatch {
    RecordBatch::try_from_iter([
        ("val", Arc::new(Int64Array::from(vals.to_vec())) as ArrayRef),
        ("name", Arc::new(StringArray::from(names.to_vec())) as _),
    ])
    .unwrap()
}

fn only(name: &str, column: ArrayRef) -> RecordBatch {
    RecordBatch::try_from_iter([(name, column)]).unwrap()
}

fn ids(addrs: &[u64]) -> Vec<RowId> {
    addrs.iter().map(|a| RowId::from_u64(*a)).collect()
}

/// `t (k, val, name)` in two fragments (keys 0..100, 100..200), `val` = k, `name` =
/// `n<k>`, row 5 deleted; and a handle on it.
pub(crate) async fn table() -> (tempfile::TempDir, SessionContext, Table) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, val BIGINT, name VARCHAR)",
    )
    .await;
    for (from, to) in [(0, 99), (100, 199)] {
        let insert = format!(
            "INSERT INTO t SELECT value AS k, value AS val, concat('n', CAST(value AS VARCHAR)) \
             FROM generate_series({from}, {to})"
        );
        run(&ctx, &insert).await;
    }
    run(&ctx, "DELETE FROM t WHERE k = 5").await;
    let table =
        natal::datafusion::open_table(&ctx, &format!("{}/t", dir.path().display())).unwrap();
    (dir, ctx, table)
}

pub(crate) async fn lines(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let text = answer(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    (text.lines())
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Every patched row's `_row_updated_version`, by id.
async fn updated_versions(table: &Table, of: &[u64]) -> Vec<u64> {
    let request = ScanRequest {
        columns: Some(vec![]),
        with_row_id: true,
        with_lineage: true,
        ..Default::default()
    };
    let batches: Vec<RecordBatch> = (table.latest().await.unwrap().scan(request).await.unwrap())
        .try_collect()
        .await
        .unwrap();
    let mut found = Vec::new();
    for batch in &batches {
        let id = batch.column_by_name(natal::ROW_ID).unwrap();
        let updated = batch.column_by_name(natal::ROW_UPDATED_VERSION).unwrap();
        let (id, updated) = (
            id.as_primitive::<UInt64Type>(),
            updated.as_primitive::<UInt64Type>(),
        );
        for i in 0..batch.num_rows() {
            if of.contains(&id.value(i)) {
                found.push((id.value(i), updated.value(i)));
            }
        }
    }
    found.sort_unstable();
    found.into_iter().map(|(_, v)| v).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patched_cells_are_read_everywhere_and_folded_by_compaction() {
    let (_dir, ctx, table) = table().await;
    let before = table.latest().await.unwrap().version();
    let (three, hundred_fifty) = (addr(0, 3), addr(1, 50));
    let patched = table
        .patch_rows(
            &ids(&[hundred_fifty, three]),
            values(&[2000, 1000], &["x150", "x3"]),
        )
        .await
        .unwrap();
    let latest = table.latest().await.unwrap();
    assert_eq!(latest.version(), patched.version);
    assert_ne!(latest.manifest().reader_flags() & flags::ROW_PATCHES, 0);
    let query = "SELECT k, val, name, _rowid FROM \"t$rows\" WHERE k IN (3, 4, 150) \
                 ORDER BY k";
    // The three rows, row 3's `val` as given.
    let expected = |val: i64| {
        [
            format!("| 3 | {val} | x3 | {three} |"),
            format!("| 4 | 4 | n4 | {} |", addr(0, 4)),
            format!("| 150 | 2000 | x150 | {hundred_fifty} |"),
        ]
    };
    assert_eq!(lines(&ctx, query).await, expected(1000));
    assert_eq!(
        lines(
            &ctx,
            "SELECT fragment_id, patches, patched_rows FROM \"t$fragments\" ORDER BY 1"
        )
        .await,
        ["| 0 | 1 | 1 |", "| 1 | 1 | 1 |"]
    );
    // The fragments' statistics say val < 200: the filter and the aggregate must not trust
    // them for a patched column.
    assert_eq!(
        lines(&ctx, "SELECT k FROM t WHERE val > 500 ORDER BY k").await,
        ["| 3 |", "| 150 |"]
    );
    assert_eq!(
        lines(&ctx, "SELECT count(*), max(val), min(name) FROM t").await,
        ["| 199 | 2000 | n0 |"]
    );
    // A read of the unpatched column alone, the version before, and a take.
    assert_eq!(
        lines(&ctx, "SELECT sum(k) FROM t").await,
        [format!("| {} |", (0..200).sum::<i64>() - 5)]
    );
    assert_eq!(
        lines(
            &ctx,
            &format!("SELECT val, name FROM \"t@v{before}\" WHERE k = 3")
        )
        .await,
        ["| 3 | n3 |"]
    );
    let taken = latest
        .take(&ids(&[three]), ScanRequest::default())
        .await
        .unwrap();
    let val = taken.column_by_name("val").unwrap();
    assert_eq!(
        val.as_primitive::<arrow::datatypes::Int64Type>().value(0),
        1000
    );
    assert_eq!(
        updated_versions(&table, &[three, addr(0, 4)]).await,
        [patched.version, 1 + 1]
    );

    // A later patch of one cell wins; the other cell of the earlier patch stays.
    let again = table
        .patch_rows(
            &ids(&[three]),
            only("val", Arc::new(Int64Array::from(vec![3000]))),
        )
        .await
        .unwrap();
    assert_eq!(
        lines(&ctx, "SELECT val, name FROM t WHERE k = 3").await,
        ["| 3000 | x3 |"]
    );
    assert_eq!(updated_versions(&table, &[three]).await, [again.version]);

    // Change reads report patched rows as updates, from the ends and version by version
    // (a restore taking a patch back too).
    let changes = format!(
        "SELECT k, val, name, _change_type, _commit_version FROM natal_changes('t', {before}) \
         ORDER BY k, _change_type"
    );
    let (v1, v2) = (patched.version, again.version);
    assert_eq!(
        lines(&ctx, &changes).await,
        [
            format!("| 3 | 3000 | x3 | update_postimage | {v2} |"),
            format!("| 3 | 3 | n3 | update_preimage | {v2} |"),
            format!("| 150 | 2000 | x150 | update_postimage | {v1} |"),
            format!("| 150 | 150 | n150 | update_preimage | {v1} |"),
        ]
    );
    let between = |from: u64, to: u64| {
        format!(
            "SELECT k, val, _change_type FROM natal_changes('t', {from}, {to}) \
             ORDER BY k, _change_type"
        )
    };
    assert_eq!(
        lines(&ctx, &between(v1, v2)).await,
        [
            "| 3 | 3000 | update_postimage |",
            "| 3 | 1000 | update_preimage |"
        ]
    );
    table.restore(v1).await.unwrap();
    let restored = table.latest().await.unwrap().version();
    assert_eq!(
        lines(&ctx, &between(v2, restored)).await,
        [
            "| 3 | 1000 | update_postimage |",
            "| 3 | 3000 | update_preimage |"
        ]
    );
    table.restore(v2).await.unwrap();

    // Compaction writes the patched values into its files and drops the patches; the rows
    // keep their ids.
    let compacted = table
        .compact(CompactOptions {
            target_rows_per_fragment: Some(1000),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(compacted.published);
    let latest = table.latest().await.unwrap();
    assert_eq!(crate::common::patched_fragments(&latest), 0);
    assert_eq!(latest.manifest().reader_flags() & flags::ROW_PATCHES, 0);
    assert_eq!(lines(&ctx, query).await, expected(3000));
    assert_eq!(
        lines(
            &ctx,
            &format!(
                "SELECT val, name FROM \"t@v{}\" WHERE k = 3",
                patched.version
            )
        )
        .await,
        ["| 1000 | x3 |"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_patches_are_refused_and_write_nothing() {
    let (dir, ctx, table) = table().await;
    let version = table.latest().await.unwrap().version();
    let files = || {
        let data = dir.path().join("t").join("data");
        std::fs::read_dir(data).unwrap().count()
    };
    let before = files();
    let one = |column: ArrayRef| only("val", column);
    let cases: Vec<(Vec<u64>, RecordBatch, &str)> = vec![
        (
            vec![addr(0, 1)],
            only("nope", Arc::new(Int64Array::from(vec![1]))),
            "no column",
        ),
        (
            vec![addr(0, 1), addr(0, 1)],
            one(Arc::new(Int64Array::from(vec![1, 2]))),
            "twice",
        ),
        (
            vec![addr(0, 1)],
            one(Arc::new(Int64Array::from(vec![1, 2]))),
            "2 rows",
        ),
        (
            vec![addr(0, 1)],
            only("k", Arc::new(Int64Array::from(vec![None]))),
            "NOT NULL",
        ),
        (
            vec![addr(0, 1)],
            one(Arc::new(StringArray::from(vec!["x"]))),
            "do not cast",
        ),
        (
            vec![addr(0, 1)],
            values(&[1], &["a"]).project(&[]).unwrap(),
            "no column",
        ),
    ];
    for (rows, batch, says) in cases {
        let error = table.patch_rows(&ids(&rows), batch).await.unwrap_err();
        assert!(
            matches!(&error, natal::Error::InvalidInput(m) if m.contains(says)),
            "{says}: {error}"
        );
    }
    // A deleted row, and an id no row was given.
    for gone in [addr(0, 5), addr(7, 0)] {
        let error = table
            .patch_rows(
                &ids(&[addr(0, 1), gone]),
                one(Arc::new(Int64Array::from(vec![1, 2]))),
            )
            .await
            .unwrap_err();
        assert!(matches!(error, natal::Error::RowNotFound(_)), "{error}");
    }
    assert_eq!(table.latest().await.unwrap().version(), version);
    assert_eq!(files(), before, "a refused patch leaves no file");

    // A blob column is what patches do not hold yet: refused so, and an UPDATE rewrites.
    let blob_table = "CREATE TABLE b (k BIGINT, body BLOB)";
    answer(&ctx, blob_table).await.unwrap();
    answer(&ctx, "INSERT INTO b VALUES (1, CAST('x' AS BYTEA))")
        .await
        .unwrap();
    let root = dir.path().display();
    let b = natal::datafusion::open_table(&ctx, &format!("{root}/b")).unwrap();
    let body = Arc::new(arrow::array::BinaryArray::from(vec![&b"y"[..]])) as ArrayRef;
    let error = (b.patch_rows(&ids(&[addr(0, 0)]), only("body", body)).await).unwrap_err();
    assert!(
        error.to_string().contains("update the rows instead"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_of_the_same_cells_or_rows_conflict() {
    let (dir, ctx, table) = table().await;
    let root = format!("{}/t", dir.path().display());
    let at = Arc::new(table.latest().await.unwrap());
    let planned = || table.planned_at(at.clone());
    let val = |v: i64| only("val", Arc::new(Int64Array::from(vec![v])));
    let name = |n: &str| only("name", Arc::new(StringArray::from(vec![n.to_string()])));
    let (one, two) = (ids(&[addr(0, 1)]), ids(&[addr(0, 2)]));
    planned().patch_rows(&one, val(100)).await.unwrap();
    // The same cell: the later is refused; another column or another row rebases.
    let error = planned().patch_rows(&one, val(200)).await.unwrap_err();
    assert!(error.is_conflict(), "{error}");
    planned().patch_rows(&one, name("one")).await.unwrap();
    planned().patch_rows(&two, val(300)).await.unwrap();
    // Writers planned before the patches: a delete or update of a patched row, and a
    // compaction of a patched fragment, give way.
    let error = planned().delete_rows(&one).await.unwrap_err();
    assert!(error.is_conflict(), "{error}");
    // (An update of `val`, more than the table's patch share: a rewrite.)
    let bump = |b: &RecordBatch| {
        let val = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
        let val: Int64Array = val.iter().map(|v| v.map(|v| v + 1)).collect();
        let columns = vec![b.column(0).clone(), Arc::new(val), b.column(2).clone()];
        Ok(RecordBatch::try_new(
            Arc::new(b.schema().project(&[0, 1, 2])?),
            columns,
        )?)
    };
    let error = planned().update_rows(&two, &bump).await.unwrap_err();
    assert!(error.is_conflict(), "{error}");
    let options = || CompactOptions {
        target_rows_per_fragment: Some(1000),
        ..Default::default()
    };
    let error = planned().compact(options()).await.unwrap_err();
    assert!(error.is_conflict(), "{error}");
    // A delete of another row rebases; a patch planned before a compaction follows its
    // rows to where the compaction carried them (their ids say where), from both fragments
    // into one; one of a row deleted before the compaction gives way, leaving no file.
    planned().delete_rows(&ids(&[addr(0, 3)])).await.unwrap();
    let before_compaction = table.planned_at(table.latest().await.unwrap());
    run(&ctx, "DELETE FROM t WHERE k = 8").await;
    run(&ctx, "UPDATE t SET val = 900 WHERE k = 9").await;
    table.compact(options()).await.unwrap();
    let files = data_files(&root);
    // The rows deleted and rewritten before the compaction: the rewritten row's id lives on
    // in the compacted fragment, but the row the patch was planned on does not.
    for row in [8, 9] {
        let planned = ids(&[addr(0, row)]);
        let error = (before_compaction.patch_rows(&planned, val(800)).await).unwrap_err();
        assert!(error.is_conflict(), "{error}");
    }
    assert_eq!(data_files(&root), files);
    assert_eq!(
        lines(&ctx, "SELECT val FROM t WHERE k = 9").await,
        ["| 900 |"]
    );
    let moved = ids(&[addr(0, 2), addr(0, 4), addr(1, 7)]);
    let names = Arc::new(StringArray::from(vec!["two", "four", "one-o-seven"]));
    let committed = before_compaction
        .patch_rows(&moved, only("name", names))
        .await
        .unwrap();
    assert_eq!(
        lines(
            &ctx,
            "SELECT k, val, name FROM t WHERE k < 5 OR k = 107 ORDER BY k"
        )
        .await,
        [
            "| 0 | 0 | n0 |",
            "| 1 | 100 | one |",
            "| 2 | 300 | two |",
            "| 4 | 4 | four |",
            "| 107 | 107 | one-o-seven |"
        ]
    );
    assert_eq!(
        lines(&ctx, "SELECT patches, patched_rows FROM t$fragments").await,
        ["| 1 | 3 |"]
    );
    // The rows kept their ids and took the patch's version as their last update.
    let version = committed.version;
    assert_eq!(
        updated_versions(&table, &[addr(0, 2), addr(0, 4), addr(1, 7)]).await,
        [version; 3]
    );
    // The file planned for the compacted fragments was replaced by one, not left behind.
    assert_eq!(data_files(&root).len(), files.len() + 1);
}

/// The Parquet files under the table's root, by path.
fn data_files(root: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(root)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => dirs.push(path),
                false if path.extension().is_some_and(|e| e == "parquet") => {
                    found.push(path.display().to_string())
                }
                false => {}
            }
        }
    }
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_patch_file_is_an_error_that_names_it() {
    let (dir, ctx, table) = table().await;
    let val = only("val", Arc::new(Int64Array::from(vec![7])));
    table.patch_rows(&ids(&[addr(0, 1)]), val).await.unwrap();
    let latest = table.latest().await.unwrap();
    let patch = (latest.manifest().fragments.iter())
        .flat_map(|f| &f.patches)
        .next()
        .expect("a patch")
        .file
        .path
        .to_string();
    let on_disk = dir.path().join("t").join(&patch);
    let bytes = std::fs::read(&on_disk).unwrap();
    std::fs::write(&on_disk, &bytes[..bytes.len() / 2]).unwrap();
    // A fresh session: no footer or value of the patch kept.
    let fresh = SessionContext::new();
    natal::datafusion::register(&fresh, dir.path().to_str().unwrap()).unwrap();
    let error = answer(&fresh, "SELECT val FROM t WHERE k = 1")
        .await
        .unwrap_err()
        .to_string();
    // A file shorter than its entry is refused by the store's ranged read, which names it
    // (as for any data file; not yet a `Corrupt`).
    assert!(error.contains(&patch), "{error}");
    // Reads of the columns it does not hold never open it.
    assert_eq!(
        lines(&fresh, "SELECT name FROM t WHERE k = 1").await,
        ["| n1 |"]
    );
    drop(ctx);
}

/// Table `p` of the fixtures (since 2026-12-07-patches): three fragments of 50 rows, then
/// patches at several depths (two columns, one cell patched again, a patch of a fragment
/// added later), a delete between them, and a compaction that folds one fragment's
/// patches and keeps the others'.
pub async fn write_fixture_table(dir: &std::path::Path) {
    let options = natal::TableOptions {
        max_rows_per_fragment: 50,
        ..Default::default()
    };
    let store = crate::fixtures::local_store(dir);
    let table = Table::create(store, "p".into(), &crate::common::schema(), options)
        .await
        .unwrap();
    let rows: Vec<(i64, i64)> = (0..150).map(|k| (k, k)).collect();
    table
        .append(vec![crate::common::batch(&rows)])
        .await
        .unwrap();
    let (one, fifty_two) = (addr(0, 1), addr(1, 2));
    table
        .patch_rows(
            &ids(&[one, fifty_two]),
            values(&[1001, 1052], &["x1", "x52"]),
        )
        .await
        .unwrap();
    table.delete_rows(&ids(&[addr(0, 10)])).await.unwrap();
    let val = |v: i64| only("val", Arc::new(Int64Array::from(vec![v])));
    table.patch_rows(&ids(&[one]), val(3001)).await.unwrap();
    let rows: Vec<(i64, i64)> = (150..160).map(|k| (k, k)).collect();
    table
        .append(vec![crate::common::batch(&rows)])
        .await
        .unwrap();
    table
        .patch_rows(
            &ids(&[addr(2, 0), addr(3, 0)]),
            values(&[1100, 1150], &["x100", "x150"]),
        )
        .await
        .unwrap();
    table.compact(CompactOptions::default()).await.unwrap();
    // Since 2026-12-07-patch-share: the table's patch share (writer flag `PATCH_SHARE`), and
    // updates as patches beside inserted rows in one version (a MERGE's).
    table.set_patch_max_share(Some(0.25)).await.unwrap();
    let id = RowId::from_u64(addr(0, 5));
    let at = table.latest().await.unwrap().resolve(id).await.unwrap();
    let changes = natal::RowChangeSet {
        updated: vec![(crate::common::batch(&[(5, 5005)]), vec![(id, at.unwrap())])],
        inserted: vec![crate::common::batch(&[(160, 160)])],
        ..Default::default()
    };
    (table.patch_changes(&[1, 2], changes).await).unwrap();
}

/// Every version of table `p` under `dir`: each live row's id, key, val and name, and the
/// table's patch share where it has one.
pub async fn describe_fixture_table(dir: &std::path::Path) -> String {
    let table = Table::open(crate::fixtures::local_store(dir), "p".into());
    let mut out = String::new();
    for manifest in table.versions().await.unwrap() {
        let snapshot = table.at_version(manifest.version).await.unwrap();
        let request = ScanRequest {
            with_row_id: true,
            ..Default::default()
        };
        let batches: Vec<RecordBatch> = (snapshot.scan(request).await.unwrap())
            .try_collect()
            .await
            .unwrap();
        let mut rows = Vec::new();
        for batch in &batches {
            let column = |name: &str| batch.column_by_name(name).unwrap().clone();
            let (id, key, val, name) = (
                column(natal::ROW_ID),
                column("key"),
                column("val"),
                column("name"),
            );
            let string =
                |a: &ArrayRef, i: usize| arrow::util::display::array_value_to_string(a, i).unwrap();
            for i in 0..batch.num_rows() {
                let id = id.as_primitive::<UInt64Type>().value(i);
                let row = [&key, &val, &name].map(|c| string(c, i)).join(" ");
                rows.push((id, row));
            }
        }
        rows.sort();
        for (id, row) in rows {
            writeln!(out, "v{} {id} {row}", manifest.version).unwrap();
        }
        if let Some(share) = manifest.patch_max_share {
            writeln!(out, "v{} patch_max_share {share}", manifest.version).unwrap();
        }
    }
    out
}

/// After today's natal opened the fixture's `p`: it patches a row of a fragment that
/// still carries patches and compacts every fragment, folding them all.
pub async fn write_to_fixture_table(dir: &std::path::Path) {
    let table = Table::open(crate::fixtures::local_store(dir), "p".into());
    let val = |v: i64| only("val", Arc::new(Int64Array::from(vec![v])));
    table
        .patch_rows(&ids(&[addr(0, 1)]), val(5001))
        .await
        .unwrap();
    let options = CompactOptions {
        target_rows_per_fragment: Some(1000),
        ..Default::default()
    };
    table.compact(options).await.unwrap();
    let latest = table.latest().await.unwrap();
    assert_eq!(crate::common::patched_fragments(&latest), 0);
    let found = describe_fixture_table(dir).await;
    let last = latest.version();
    let row = |id: u64| {
        (found.lines())
            .find(|l| l.starts_with(&format!("v{last} {id} ")))
            .map(str::to_string)
    };
    assert_eq!(
        row(addr(0, 1)).unwrap(),
        format!("v{last} {} 1 5001 x1", addr(0, 1))
    );
    assert_eq!(
        row(addr(1, 2)).unwrap(),
        format!("v{last} {} 52 1052 x52", addr(1, 2))
    );
    assert_eq!(row(addr(0, 10)), None);
}
