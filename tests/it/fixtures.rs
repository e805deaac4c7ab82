//! Tables written by earlier natal keep opening: checked-in tables under `tests/fixtures/`,
//! each written once by the natal of its date and never rewritten, are read back version by
//! version and compared with what that natal recorded beside them (`expected.txt`), then
//! written to (append, delete, update, compact, index, checkpoint) by today's natal.
//!
//! Each fixture's history has every kind of file the format had on its date: data files,
//! deletion vectors of several files with moves and outright deletions, row ids in `_rowids/`
//! files, fragment segments and their patches, an index of two segments, and a relocation
//! checkpoint; since 2026-12-01-alter, schema changes (a column added, renamed, widened,
//! dropped); since 2026-12-02-columns, a column added with values (a file per fragment) and
//! a column default; since 2026-12-02-nested, a second table `n` of nested columns (structs,
//! lists, maps) written before nested fields had field ids of their own; since
//! 2026-12-02-nested-ids, `n` with nested ids and nested fields renamed, added, moved,
//! widened and dropped; since 2026-12-03-declared, a third table `d` with what a `CREATE TABLE`
//! declares beyond columns (defaults, a default expression, constraints, Arrow metadata);
//! since 2026-12-03-blobs, a fourth table `b` with a blob column (inline, packed and
//! dedicated values in sidecars); since 2026-12-03-external, a fifth table `e` with external
//! blob values beside the other kinds and Arrow metadata on nested fields; since
//! 2026-12-03-reuse, `b` compacted with a Blob Reuse Index (its files name the sidecars of
//! the files they replaced); since 2026-12-04-clones, shallow clones `c` (of `t`, then
//! changed), `cc` (of `c`) and `bc` (of `b`), whose manifests name storage bases; since
//! 2026-12-04-lineage, `t`'s fragments record row lineage (`expected-l.txt`: every version's
//! `_row_created_version` and `_row_updated_version`); older fixtures' rows read them as
//! NULL until today's natal rewrites them; since 2026-12-05-changes, `t` records change data
//! (its deletes and updates list the rows they removed) and `expected-x.txt` holds every
//! version's change read; since 2026-12-05-shared, an update's capture names the fragment
//! whose row ids it shares; since 2026-12-06-lineage-files, compaction merges fragments in
//! id order, and their rows' last-change versions are in `_lineage/` files; since
//! 2026-12-06-shapes, a table `s` of unions and dictionaries of nested values; since
//! 2026-12-06-vectors, a table `v` with a vector column and an `ivf_flat` index; since
//! 2026-12-07-quantized, a table `q` as `v` with an `ivf_pq` index; since
//! 2026-12-07-patches, a table `p` with row patches at several depths of its history; since
//! 2026-12-07-patch-share, `p` also sets its patch share (writer flag `PATCH_SHARE`) and
//! holds a version of patches beside inserted rows (a MERGE's).
//!
//! A format change adds a fixture; it never regenerates one. To write a new one (with the
//! natal of today) run
//! `RUST_MIN_STACK=67108864 NATAL_WRITE_FIXTURE=tests/fixtures/<date> cargo test --test it fixtures::`
//! (writing every table nests deep futures: a debug build needs the larger stack);
//! the run then checks the new fixture as it checks the old ones.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::AsArray;
use arrow::datatypes::DataType;
use arrow::datatypes::Int64Type;
use natal::ManifestLayout;
use natal::{CompactOptions, SchemaChange, Table, TableOptions};
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;

use crate::common::{add_to_val, batch, key_matches, read_rows, run, schema};
use crate::model_schema::{pad, padded_update};

/// Every checked-in fixture, oldest first.
const FIXTURES: &[&str] = &[
    "2026-12-01",
    "2026-12-01-alter",
    "2026-12-02-columns",
    "2026-12-02-nested",
    "2026-12-02-nested-ids",
    "2026-12-03-declared",
    "2026-12-03-blobs",
    "2026-12-03-external",
    "2026-12-03-reuse",
    "2026-12-04-clones",
    "2026-12-04-lineage",
    "2026-12-05-changes",
    "2026-12-05-shared",
    "2026-12-06-lineage-files",
    "2026-12-06-shapes",
    "2026-12-06-vectors",
    "2026-12-07-quantized",
    "2026-12-07-patches",
    "2026-12-07-patch-share",
];

/// Where the fixtures live.
fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The history every fixture holds: 13 versions touching every kind of file.
async fn write_history(table: &Table) -> natal::Result<()> {
    let rows =
        |keys: std::ops::Range<i64>| -> Vec<(i64, i64)> { keys.map(|k| (k, k * 10)).collect() };
    table.append(vec![batch(&rows(0..90))]).await?;
    table.append(vec![batch(&rows(90..120))]).await?;
    table.delete_where(key_matches(|k| k % 7 == 0)).await?;
    table
        .update_where(key_matches(|k| k % 5 == 1), &add_to_val(1000))
        .await?;
    table.create_index("by_key", "key").await?;
    table.checkpoint().await?;
    table.append(vec![batch(&rows(120..150))]).await?;
    table
        .update_where(key_matches(|k| k % 9 == 2), &add_to_val(7))
        .await?;
    table.delete_where(key_matches(|k| k % 11 == 3)).await?;
    table.create_index("by_key", "key").await?;
    table
        .compact(CompactOptions {
            max_deleted_fraction: 0.05,
            ..Default::default()
        })
        .await?;
    table
        .update_where(key_matches(|k| k % 13 == 4), &add_to_val(3))
        .await?;
    table.delete_where(key_matches(|k| k == 60)).await?;
    // Schema changes (since 2026-12-01-alter): a column added, written (NULL), renamed,
    // widened and dropped, so the latest version's files hold a field id its schema lost.
    let add = SchemaChange::AddColumn {
        name: "x".into(),
        data_type: DataType::Int32,
    };
    table.alter(vec![add]).await?;
    let padded = pad(batch(&rows(150..160)), table.latest().await?.schema());
    table.append(vec![padded]).await?;
    let rename = SchemaChange::RenameColumn {
        from: "x".into(),
        to: "y".into(),
    };
    table.alter(vec![rename]).await?;
    let widen = SchemaChange::SetDataType {
        name: "y".into(),
        data_type: DataType::Int64,
    };
    table.alter(vec![widen]).await?;
    table
        .alter(vec![SchemaChange::DropColumn { name: "y".into() }])
        .await?;
    // Columns added with values (since 2026-12-02-columns): each fragment gains a file of
    // its own for `k2` (each row's key); a column `d` with a default comes and goes.
    crate::model_schema::add_valued(table, "k2", DataType::Int32).await?;
    let padded = pad(batch(&rows(160..170)), table.latest().await?.schema());
    table.append(vec![padded]).await?;
    table.delete_where(key_matches(|k| k % 17 == 5)).await?;
    let with_default = natal::NewColumn {
        name: "d".into(),
        data_type: DataType::Int32,
        nullable: true,
        inputs: vec![],
        default_value: Some("5".into()),
        blob: None,
    };
    let nulls = |b: &arrow::array::RecordBatch| {
        Ok(arrow::array::new_null_array(&DataType::Int32, b.num_rows()))
    };
    table.add_column_with_values(with_default, &nulls).await?;
    table
        .alter(vec![SchemaChange::DropColumn { name: "d".into() }])
        .await?;
    Ok(())
}

/// Small files of every kind: fragments of 40 rows, row ids in files past 16 bytes, two
/// fragments a segment.
fn fixture_options() -> TableOptions {
    TableOptions {
        max_rows_per_fragment: 40,
        layout: ManifestLayout {
            row_ids_inline_limit: 16,
            lineage_inline_limit: 16,
            fragments_per_segment: 2,
        },
        merge: None,
        // Since 2026-12-05-changes: every delete and update captures its rows.
        change_data_feed: true,
        ..Default::default()
    }
}

/// Every version's change from the one before it, and the whole history's: (kind, version,
/// id, key, val) per reported row.
async fn describe_changes(table: &Table) -> natal::Result<String> {
    let versions: Vec<u64> = (table.versions().await?.iter())
        .map(|m| m.version)
        .collect();
    let mut ranges: Vec<(u64, u64)> = versions.windows(2).map(|w| (w[0], w[1])).collect();
    if let (Some(&first), Some(&last)) = (versions.first(), versions.last()) {
        ranges.push((first, last));
    }
    let mut out = String::new();
    for (from, to) in ranges {
        writeln!(out, "changes {from}..{to}").ok();
        let read = table.changes(from, to).await?;
        for batch in &read.batches {
            let column = |name: &str| batch.column_by_name(name).expect(name).clone();
            let (kinds, versions, ids) = (
                column(natal::CHANGE_TYPE),
                column(natal::COMMIT_VERSION),
                column(natal::ROW_ID),
            );
            let (keys, vals) = (column("key"), column("val"));
            for i in 0..batch.num_rows() {
                use arrow::datatypes::UInt64Type;
                writeln!(
                    out,
                    "  {} {} {} {} {}",
                    kinds.as_string::<i32>().value(i),
                    versions.as_primitive::<UInt64Type>().value(i),
                    ids.as_primitive::<UInt64Type>().value(i),
                    keys.as_primitive::<Int64Type>().value(i),
                    vals.as_primitive::<Int64Type>().value(i),
                )
                .ok();
            }
        }
    }
    Ok(out)
}

pub fn local_store(root: &Path) -> Arc<dyn ObjectStore> {
    Arc::new(LocalFileSystem::new_with_prefix(root).expect("a local store"))
}

/// Every version's operation and rows (id, address, key, val), one line each.
pub async fn describe(table: &Table) -> natal::Result<String> {
    let mut out = String::new();
    for manifest in table.versions().await? {
        let snapshot = table.at_version(manifest.version).await?;
        writeln!(
            out,
            "version {} {:?} rows={}",
            manifest.version,
            manifest.transaction.operation,
            snapshot.count_rows()
        )
        .ok();
        for (id, row) in read_rows(&snapshot).await? {
            writeln!(out, "  {id} {:#x} {} {}", row.addr, row.key, row.val).ok();
        }
    }
    Ok(out)
}

/// Every version's rows' lineage (id, created, last updated; `-` for not recorded), one
/// line each.
async fn describe_lineage(table: &Table) -> natal::Result<String> {
    let mut out = String::new();
    for manifest in table.versions().await? {
        writeln!(out, "version {}", manifest.version).ok();
        let snapshot = table.at_version(manifest.version).await?;
        for (id, (created, updated)) in read_lineage(&snapshot).await? {
            let shown = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            writeln!(out, "  {id} {} {}", shown(created), shown(updated)).ok();
        }
    }
    Ok(out)
}

/// Each live row's lineage, by id.
async fn read_lineage(
    snapshot: &natal::Snapshot,
) -> natal::Result<BTreeMap<u64, (Option<u64>, Option<u64>)>> {
    use arrow::datatypes::UInt64Type;
    let request = natal::ScanRequest {
        columns: Some(vec![]),
        with_row_id: true,
        with_lineage: true,
        ..Default::default()
    };
    let batches: Vec<arrow::array::RecordBatch> =
        futures::TryStreamExt::try_collect(snapshot.scan(request).await?).await?;
    let mut out = BTreeMap::new();
    for batch in &batches {
        let ids = batch.column(0).as_primitive::<UInt64Type>();
        let (created, updated) = (
            batch.column(1).as_primitive::<UInt64Type>(),
            batch.column(2).as_primitive::<UInt64Type>(),
        );
        for (i, id) in ids.values().iter().enumerate() {
            let at = |c: &arrow::array::UInt64Array| {
                arrow::array::Array::is_valid(c, i).then(|| c.value(i))
            };
            out.insert(*id, (at(created), at(updated)));
        }
    }
    Ok(out)
}

/// Writes a fixture into `dir` (a catalog root holding table `t`) with today's natal.
async fn write_fixture(dir: &Path) {
    std::fs::create_dir_all(dir).expect("fixture directory");
    let store = local_store(dir);
    let table = Table::create(store, "t".into(), &schema(), fixture_options())
        .await
        .expect("create");
    write_history(&table).await.expect("history");
    let expected = describe(&table).await.expect("describe");
    std::fs::write(dir.join("expected.txt"), expected).expect("expected.txt");
    // Row lineage (since 2026-12-04-lineage).
    let expected = describe_lineage(&table).await.expect("lineage");
    std::fs::write(dir.join("expected-l.txt"), expected).expect("expected-l.txt");
    // Change data (since 2026-12-05-changes).
    let expected = describe_changes(&table).await.expect("changes");
    std::fs::write(dir.join("expected-x.txt"), expected).expect("expected-x.txt");
    // Nested columns (since 2026-12-02-nested), written through SQL.
    let ctx = datafusion::prelude::SessionContext::new();
    natal::datafusion::register(&ctx, dir.to_str().expect("a UTF-8 path")).expect("catalog");
    crate::nested::write_history(&ctx).await;
    let nested = Table::open(local_store(dir), "n".into());
    let expected = crate::nested::describe(&ctx, &nested).await;
    std::fs::write(dir.join("expected-n.txt"), expected).expect("expected-n.txt");
    // Declarations (since 2026-12-03-declared).
    crate::declared::write_fixture_table(&ctx, dir).await;
    let expected = crate::declared::describe_fixture_table(&ctx).await;
    std::fs::write(dir.join("expected-d.txt"), expected).expect("expected-d.txt");
    // Blob columns (since 2026-12-03-blobs).
    crate::blob::write_fixture_table(local_store(dir)).await;
    let blobs = Table::open(local_store(dir), "b".into());
    let expected = crate::blob::describe_fixture_table(&blobs).await;
    std::fs::write(dir.join("expected-b.txt"), expected).expect("expected-b.txt");
    // External blobs and nested fields' metadata (since 2026-12-03-external).
    crate::blob_external::write_fixture_table(local_store(dir)).await;
    let external = open_external_fixture(dir).await;
    let expected = crate::blob_external::describe_fixture_table(&external).await;
    std::fs::write(dir.join("expected-e.txt"), expected).expect("expected-e.txt");
    // Shallow clones (since 2026-12-04-clones).
    crate::clone::write_fixture_tables(dir).await;
    let expected = crate::clone::describe_fixture_tables(dir).await;
    std::fs::write(dir.join("expected-c.txt"), expected).expect("expected-c.txt");
    // Unions and dictionaries of nested values (since 2026-12-06-shapes).
    crate::parity::write_shapes_table(dir).await;
    let expected = crate::parity::describe_shapes_table(&ctx).await;
    std::fs::write(dir.join("expected-s.txt"), expected).expect("expected-s.txt");
    // A vector column and its index (since 2026-12-06-vectors).
    crate::vector_index::write_fixture_table(dir).await;
    let expected = crate::vector_index::describe_fixture_table(dir, "v").await;
    std::fs::write(dir.join("expected-v.txt"), expected).expect("expected-v.txt");
    // A product-quantized vector index (since 2026-12-07-quantized).
    crate::vector_index::write_quantized_fixture_table(dir).await;
    let expected = crate::vector_index::describe_fixture_table(dir, "q").await;
    std::fs::write(dir.join("expected-q.txt"), expected).expect("expected-q.txt");
    // Row patches (since 2026-12-07-patches).
    crate::row_patch::write_fixture_table(dir).await;
    let expected = crate::row_patch::describe_fixture_table(dir).await;
    std::fs::write(dir.join("expected-p.txt"), expected).expect("expected-p.txt");
}

/// Table `e` of the fixture at `dir`, reading its external values from the fixture's stores.
async fn open_external_fixture(dir: &Path) -> Table {
    let options = natal::TableOptions {
        external_stores: Some(crate::blob_external::fixture_stores().await),
        ..Default::default()
    };
    Table::open_with(local_store(dir), "e".into(), options)
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The `(key, val)` pairs of the latest version, by key.
async fn latest_by_key(table: &Table) -> BTreeMap<i64, i64> {
    let snapshot = table.latest().await.unwrap();
    read_rows(&snapshot)
        .await
        .unwrap()
        .values()
        .map(|r| (r.key, r.val))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_written_by_earlier_natal_open_read_and_take_writes() {
    let mut fixtures: Vec<PathBuf> = FIXTURES.iter().map(|f| fixtures_dir().join(f)).collect();
    if let Ok(new) = std::env::var("NATAL_WRITE_FIXTURE") {
        let new = Path::new(env!("CARGO_MANIFEST_DIR")).join(new);
        assert!(
            !new.exists(),
            "a fixture is never rewritten: {new:?} exists"
        );
        write_fixture(&new).await;
        if !fixtures.contains(&new) {
            fixtures.push(new);
        }
    }
    for fixture in fixtures {
        let scratch = tempfile::tempdir().unwrap();
        copy_dir(&fixture, scratch.path());
        let table = Table::open(local_store(scratch.path()), "t".into());

        // Every version reads as the natal that wrote it read it.
        let expected = std::fs::read_to_string(fixture.join("expected.txt")).unwrap();
        let found = describe(&table).await.unwrap();
        assert!(
            found == expected,
            "{fixture:?} reads differently:\n{}",
            first_difference(&expected, &found)
        );

        // Lineage as that natal recorded it; none before it recorded any.
        match std::fs::read_to_string(fixture.join("expected-l.txt")) {
            Ok(expected) => {
                let found = describe_lineage(&table).await.unwrap();
                assert!(
                    found == expected,
                    "{fixture:?} reads its lineage differently:\n{}",
                    first_difference(&expected, &found)
                );
            }
            Err(_) => {
                let latest = table.latest().await.unwrap();
                let lineage = read_lineage(&latest).await.unwrap();
                assert!(lineage.values().all(|l| *l == (None, None)), "{fixture:?}");
            }
        }
        let recorded_before = fixture.join("expected-l.txt").exists();

        // Change reads as that natal answered them, from its captures where it made any.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-x.txt")) {
            let found = describe_changes(&table).await.unwrap();
            assert!(
                found == expected,
                "{fixture:?} reads its changes differently:\n{}",
                first_difference(&expected, &found)
            );
            let versions = table.versions().await.unwrap();
            assert!(versions.iter().any(|m| m.change_data.is_some()));
        }

        // SQL over it, with the index probed.
        let ctx = datafusion::prelude::SessionContext::new();
        natal::datafusion::register(&ctx, scratch.path().to_str().unwrap()).unwrap();
        let before = latest_by_key(&table).await;
        let plan = ctx
            .sql("EXPLAIN SELECT key, val FROM t WHERE key = 83")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let shown = arrow::util::pretty::pretty_format_batches(&plan)
            .unwrap()
            .to_string();
        assert!(shown.contains("index=by_key"), "{shown}");
        let batches = ctx
            .sql("SELECT val FROM t WHERE key = 83")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let vals: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(
            vals,
            before.get(&83).copied().into_iter().collect::<Vec<_>>()
        );

        // Today's natal writes to it: every kind of write, then reads what it wrote.
        // (Its writes pad the fixture's extra columns with NULL.)
        let mut model = before;
        let schema = Arc::new(table.latest().await.unwrap().schema().clone());
        let appended = table
            .append(vec![pad(batch(&[(1000, 1), (1001, 2)]), &schema)])
            .await
            .unwrap()
            .version;
        model.extend([(1000, 1), (1001, 2)]);
        let updated = table
            .update_where(key_matches(|k| k % 4 == 0), &padded_update(5, schema))
            .await
            .unwrap()
            .version;
        for (k, v) in model.iter_mut() {
            if k % 4 == 0 {
                *v += 5;
            }
        }
        table
            .delete_where(key_matches(|k| k % 6 == 1))
            .await
            .unwrap();
        model.retain(|k, _| k % 6 != 1);
        table.create_index("by_key", "key").await.unwrap();
        table.checkpoint().await.unwrap();
        assert_eq!(latest_by_key(&table).await, model, "{fixture:?}");
        table.compact(CompactOptions::default()).await.unwrap();
        assert_eq!(latest_by_key(&table).await, model, "{fixture:?}");
        run(
            &ctx,
            "INSERT INTO t (key, val, name) VALUES (2000, 20, 'n2000-20')",
        )
        .await;
        model.insert(2000, 20);
        assert_eq!(latest_by_key(&table).await, model, "{fixture:?}");
        check_lineage_after_writes(&ctx, (appended, updated), recorded_before).await;

        // And the versions the old natal wrote still read as they did.
        let again = describe(&table).await.unwrap();
        assert!(again.starts_with(&expected), "{fixture:?}: history changed");

        // Nested columns, where the fixture has them, read as they did.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-n.txt")) {
            let nested = Table::open(local_store(scratch.path()), "n".into());
            let found = crate::nested::describe(&ctx, &nested).await;
            assert!(
                found == expected,
                "{fixture:?} reads n differently:\n{}",
                first_difference(&expected, &found)
            );
        }

        // Declarations, where the fixture has them, read as they did and still apply.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-d.txt")) {
            let found = crate::declared::describe_fixture_table(&ctx).await;
            assert!(
                found == expected,
                "{fixture:?} reads d differently:\n{}",
                first_difference(&expected, &found)
            );
            run(&ctx, "INSERT INTO d (id) VALUES (4)").await;
            let batches = ctx
                .sql("SELECT b, c FROM d WHERE id = 4")
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            let shown = arrow::util::pretty::pretty_format_batches(&batches)
                .unwrap()
                .to_string();
            assert!(
                shown.contains("500") && shown.contains("default_text"),
                "{shown}"
            );
        }

        // Blob columns, where the fixture has them: every version reads as it did, and
        // today's natal appends to and compacts the table.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-b.txt")) {
            let blobs = Table::open(local_store(scratch.path()), "b".into());
            let found = crate::blob::describe_fixture_table(&blobs).await;
            assert!(
                found == expected,
                "{fixture:?} reads b differently:\n{}",
                first_difference(&expected, &found)
            );
            // Since 2026-12-03-reuse, b's compaction reused its sidecars.
            let reuses = blobs
                .latest()
                .await
                .unwrap()
                .manifest()
                .fragments
                .iter()
                .any(|f| f.files.iter().any(|d| d.blob_reuse_index.is_some()));
            let name = fixture
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            assert_eq!(reuses, name >= "2026-12-03-reuse", "{fixture:?}");
            blobs
                .append(vec![crate::blob::blob_batch(100..120)])
                .await
                .unwrap();
            blobs.compact(CompactOptions::default()).await.unwrap();
            let latest = blobs.latest().await.unwrap();
            let rows = crate::blob::read_blobs(&latest).await.unwrap();
            assert!(
                rows.contains_key(&119) && !rows.contains_key(&2),
                "{fixture:?}"
            );
        }

        // External blobs and nested fields' metadata, where the fixture has them: every
        // version reads as it did; today's natal compacts the table keeping its references.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-e.txt")) {
            let external = open_external_fixture(scratch.path()).await;
            let found = crate::blob_external::describe_fixture_table(&external).await;
            assert!(
                found == expected,
                "{fixture:?} reads e differently:\n{}",
                first_difference(&expected, &found)
            );
        }

        // Shallow clones, where the fixture has them: every version of each reads as it
        // did through its storage bases; today's natal writes to and cleans up the clones,
        // and their sources' versions still read.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-c.txt")) {
            let found = crate::clone::describe_fixture_tables(scratch.path()).await;
            assert!(
                found == expected,
                "{fixture:?} reads its clones differently:\n{}",
                first_difference(&expected, &found)
            );
            crate::clone::write_to_fixture_clones(scratch.path()).await;
        }

        // Unions and dictionaries of nested values, where the fixture has them: they read
        // as declared, and today's natal updates and compacts them.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-s.txt")) {
            let found = crate::parity::describe_shapes_table(&ctx).await;
            assert!(
                found == expected,
                "{fixture:?} reads s differently:\n{}",
                first_difference(&expected, &found)
            );
            run(&ctx, "UPDATE s SET k = k + 100 WHERE k = 3").await;
            run(&ctx, "SELECT * FROM natal_compact('s')").await;
            let found = crate::parity::describe_shapes_table(&ctx).await;
            assert!(found.contains("| 103 |"), "{found}");
        }

        // Vector indexes, where the fixture has them: the nearest rows as that natal found
        // them; after today's compaction each index still answers, exactly with every
        // partition probed (and every candidate refined).
        for name in ["v", "q"] {
            let Ok(expected) =
                std::fs::read_to_string(fixture.join(format!("expected-{name}.txt")))
            else {
                continue;
            };
            let found = crate::vector_index::describe_fixture_table(scratch.path(), name).await;
            assert!(
                found == expected,
                "{fixture:?} reads {name} differently:\n{}",
                first_difference(&expected, &found)
            );
            run(&ctx, &format!("SELECT * FROM natal_compact('{name}')")).await;
            let found = crate::vector_index::describe_fixture_table(scratch.path(), name).await;
            for line in found.lines().filter(|l| l.contains(" all: ")) {
                let exact = line.replace(" all: ", " exact: ");
                assert!(found.contains(&exact), "{found}");
            }
        }

        // Row patches, where the fixture has them: every version reads as it did; today's
        // natal patches the table again and folds every patch.
        if let Ok(expected) = std::fs::read_to_string(fixture.join("expected-p.txt")) {
            let found = crate::row_patch::describe_fixture_table(scratch.path()).await;
            assert!(
                found == expected,
                "{fixture:?} reads p differently:\n{}",
                first_difference(&expected, &found)
            );
            crate::row_patch::write_to_fixture_table(scratch.path()).await;
        }
    }
}

/// After today's writes to a fixture (an append in `appended`, an update of every fourth
/// key in `updated`, a compaction, an INSERT last): rows written today say when, and so do
/// rows updated today; the others keep what the fixture recorded (nothing, before
/// lineage was recorded), compaction notwithstanding.
async fn check_lineage_after_writes(
    ctx: &datafusion::prelude::SessionContext,
    (appended, updated): (u64, u64),
    recorded_before: bool,
) {
    use arrow::datatypes::UInt64Type;
    let batches = ctx
        .sql("SELECT key, _row_created_version, _row_updated_version FROM \"t$rows\"")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let inserted = ctx
        .sql("SELECT max(version) FROM \"t$versions\"")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap()[0]
        .column(0)
        .as_primitive::<UInt64Type>()
        .value(0);
    for batch in &batches {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let (created, last) = (
            batch.column(1).as_primitive::<UInt64Type>(),
            batch.column(2).as_primitive::<UInt64Type>(),
        );
        for i in 0..batch.num_rows() {
            let key = keys.value(i);
            let at = |c: &arrow::array::UInt64Array| {
                arrow::array::Array::is_valid(c, i).then(|| c.value(i))
            };
            let (born, changed) = (at(created), at(last));
            // What the fixture's own rows read: what it recorded, or nothing.
            let old = |v: Option<u64>| v.filter(|_| recorded_before);
            let expected = match key {
                2000 => (Some(inserted), Some(inserted)),
                1000 => (Some(appended), Some(updated)),
                1001 => (Some(appended), Some(appended)),
                k if k % 4 == 0 => (old(born), Some(updated)),
                _ => (old(born), old(changed)),
            };
            assert_eq!((born, changed), expected, "key {key}: created, updated");
            if recorded_before {
                assert!(born.is_some() && changed.is_some(), "key {key}");
            }
        }
    }
}

/// The first line where two descriptions differ, with its neighbours.
fn first_difference(expected: &str, found: &str) -> String {
    let expected: Vec<&str> = expected.lines().collect();
    let found: Vec<&str> = found.lines().collect();
    let at = expected
        .iter()
        .zip(&found)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(found.len()));
    format!(
        "line {at}: expected {:?}, found {:?}",
        expected.get(at),
        found.get(at)
    )
}
