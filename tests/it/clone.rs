//! Shallow clones: a new table whose first version references another table's files in
//! place. Rows and ids equal the source's; each then changes and cleans up apart; a clone
//! of a clone names the original files directly; and what a user meets when the source's
//! cleanup removes files a clone still reads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use natal::{CleanupPolicy, CloneTarget, CompactOptions, Error, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::registry::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use object_store::{ObjectStore, ObjectStoreExt};

use crate::common::*;

const EAGER: CleanupPolicy = CleanupPolicy {
    keep_versions: 1,
    keep_newer_than: Duration::ZERO,
    min_file_age: Duration::ZERO,
};

/// Every file under `prefix`, as paths relative to the store.
async fn files(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    let listed: Vec<_> = store
        .list(Some(&Path::from(prefix)))
        .try_collect()
        .await
        .unwrap();
    let mut paths: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
    paths.sort();
    paths
}

/// `(key, val)` of every live row, by id.
async fn rows_of(table: &Table, version: Option<u64>) -> natal::Result<BTreeMap<u64, (i64, i64)>> {
    let snapshot = match version {
        Some(v) => table.at_version(v).await?,
        None => table.latest().await?,
    };
    Ok(read_rows(&snapshot)
        .await?
        .into_iter()
        .map(|(id, row)| (id, (row.key, row.val)))
        .collect())
}

/// A table `t` whose latest version has moved rows (an update), deletions, an index and a
/// checkpoint: every kind of file a clone references. Returns it at that version.
async fn source(store: &Arc<dyn ObjectStore>) -> (Table, u64) {
    let options = TableOptions {
        max_rows_per_fragment: 1000,
        merge: None,
        ..Default::default()
    };
    let table = Table::create(store.clone(), "t".into(), &schema(), options)
        .await
        .unwrap();
    for part in 0..3i64 {
        let rows: Vec<(i64, i64)> = (part * 1000..(part + 1) * 1000)
            .map(|k| (k, k % 13))
            .collect();
        table.append(vec![batch(&rows)]).await.unwrap();
    }
    table
        .update_where(key_matches(|k| k % 10 == 0), &add_to_val(1000))
        .await
        .unwrap();
    table.delete_where(key_matches(|k| k < 50)).await.unwrap();
    table.create_index("val_idx", "val").await.unwrap();
    let version = table.checkpoint().await.unwrap().version;
    (table, version)
}

/// A [`source`] table in a new store, and a shallow clone of its version at `root`.
async fn source_and_shallow_clone(root: &str) -> (Arc<dyn ObjectStore>, Table, u64, Table) {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (table, version) = source(&store).await;
    let (clone, _) = table
        .shallow_clone(version, target(&store, root))
        .await
        .unwrap();
    (store, table, version, clone)
}

fn target(store: &Arc<dyn ObjectStore>, root: &str) -> CloneTarget {
    CloneTarget {
        store: store.clone(),
        root: root.into(),
        options: TableOptions::default(),
        source_name: "t".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shallow_clone_reads_the_source_version_and_writes_only_metadata() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (table, version) = source(&store).await;
    table.append(vec![batch(&[(9000, 1)])]).await.unwrap();
    let source_files = files(&store, "t").await;

    let (clone, committed) = table
        .shallow_clone(version, target(&store, "c"))
        .await
        .unwrap();
    assert_eq!(
        committed.version, version,
        "a clone keeps the version's number"
    );
    assert_eq!(
        rows_of(&clone, None).await.unwrap(),
        rows_of(&table, Some(version)).await.unwrap()
    );
    let written = files(&store, "c").await;
    assert!(
        written
            .iter()
            .all(|f| f.starts_with("c/_versions/") || f.starts_with("c/_fragments/")),
        "a shallow clone writes its manifest (and fragment segments), no data: {written:?}"
    );
    assert_eq!(
        files(&store, "t").await,
        source_files,
        "the source is untouched"
    );
    let latest = clone.latest().await.unwrap();
    let manifest = latest.manifest();
    assert_eq!(manifest.bases.len(), 1);
    assert_eq!(manifest.bases[0].path, "t");
    assert!(manifest.transaction.origin.is_some());
    assert!(!manifest.indexes.segments.is_empty());
    assert!(manifest.relocation_checkpoint.is_some());
    assert!(manifest
        .file_references()
        .iter()
        .all(|p| p.as_str().starts_with("_bases/1/")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_and_its_source_change_and_clean_up_apart() {
    let (store, table, version, clone) = source_and_shallow_clone("c").await;
    let mut expected_clone = rows_of(&table, Some(version)).await.unwrap();

    clone
        .update_where(key_matches(|k| k % 7 == 0), &add_to_val(100))
        .await
        .unwrap();
    clone
        .delete_where(key_matches(|k| k % 11 == 0))
        .await
        .unwrap();
    let added = clone.append(vec![batch(&[(5000, 5)])]).await.unwrap();
    for (key, val) in expected_clone.values_mut() {
        if *key % 7 == 0 {
            *val += 100;
        }
    }
    expected_clone.retain(|_, (key, _)| *key % 11 != 0);
    let source_before = rows_of(&table, None).await.unwrap();
    table
        .delete_where(key_matches(|k| k % 3 == 0))
        .await
        .unwrap();
    let mut expected_source = source_before;
    expected_source.retain(|_, (key, _)| *key % 3 != 0);

    let clone_rows = rows_of(&clone, None).await.unwrap();
    let new_rows: Vec<_> = clone_rows
        .iter()
        .filter(|(id, _)| !expected_clone.contains_key(id))
        .collect();
    assert_eq!(new_rows.len(), 1, "the appended row, with a new id");
    assert!(added.version > version);
    let old_rows: BTreeMap<_, _> = clone_rows
        .into_iter()
        .filter(|(id, _)| expected_clone.contains_key(id))
        .collect();
    assert_eq!(old_rows, expected_clone, "the clone's ids and values");
    assert_eq!(rows_of(&table, None).await.unwrap(), expected_source);

    // The clone compacts its rows into its own files and cleans up: the source keeps
    // every file, and both still read.
    let source_files = files(&store, "t").await;
    clone
        .compact(CompactOptions {
            target_rows_per_fragment: Some(1 << 20),
            ..Default::default()
        })
        .await
        .unwrap();
    clone.cleanup(EAGER).await.unwrap();
    assert_eq!(files(&store, "t").await, source_files);
    let compacted = clone.latest().await.unwrap();
    let compacted_rows = rows_of(&clone, None).await.unwrap();
    assert_eq!(compacted_rows.len(), expected_clone.len() + 1);
    assert!(compacted
        .manifest()
        .fragments
        .iter()
        .flat_map(|f| &f.files)
        .all(|f| !f.path.as_str().starts_with("_bases/")));
    // Now the source may clean up all it likes: the clone no longer reads its files.
    table.compact(CompactOptions::default()).await.unwrap();
    table.cleanup(EAGER).await.unwrap();
    assert_eq!(rows_of(&clone, None).await.unwrap(), compacted_rows);
    assert_eq!(rows_of(&table, None).await.unwrap(), expected_source);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_of_a_clone_names_the_original_files_directly() {
    let (store, _, _, first) = source_and_shallow_clone("a").await;
    let appended = first.append(vec![batch(&[(7000, 7)])]).await.unwrap();
    let (second, _) = first
        .shallow_clone(appended.version, target(&store, "b"))
        .await
        .unwrap();
    assert_eq!(
        rows_of(&second, None).await.unwrap(),
        rows_of(&first, None).await.unwrap()
    );
    let latest = second.latest().await.unwrap();
    let manifest = latest.manifest();
    let places: Vec<&str> = manifest.bases.iter().map(|b| b.path.as_str()).collect();
    assert_eq!(
        places,
        ["a", "t"],
        "the first clone's own root, then the original's"
    );
    let original = manifest.bases.iter().find(|b| b.path == "t").unwrap().id;
    let first_fragment = &manifest.fragments[0].files[0].path;
    assert!(
        first_fragment
            .as_str()
            .starts_with(&format!("_bases/{original}/data/")),
        "{first_fragment}"
    );
    assert!(files(&store, "b")
        .await
        .iter()
        .all(|f| !f.starts_with("b/data/")));
}

/// The documented rule: a shallow clone reads its source's files while the source keeps
/// them. When the source's cleanup removes them, reading the clone is an error that says
/// whose file is gone and what to do; nothing else of the clone is harmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_whose_source_cleaned_up_its_files_says_so() {
    let (_, table, version, clone) = source_and_shallow_clone("c").await;
    table.compact(CompactOptions::default()).await.unwrap();
    table.cleanup(EAGER).await.unwrap();
    let error = rows_of(&clone, None).await.unwrap_err().to_string();
    assert!(error.contains("shallow-cloned"), "{error}");
    assert!(error.contains("deep-clone"), "{error}");
    assert_eq!(clone.latest().await.unwrap().version(), version);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_into_another_store_reaches_the_source_by_its_url() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (table, version) = source(&store).await;
    let other: Arc<dyn ObjectStore> = Arc::new(InMemory::new());

    let mut elsewhere = target(&other, "c");
    let error = table
        .shallow_clone(version, elsewhere.clone())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InvalidInput(_)), "{error}");
    assert!(files(&other, "").await.is_empty(), "nothing written");

    // Reachable through the clone's registry: the source's store by its URL.
    let registry = Arc::new(DefaultObjectStoreRegistry::new());
    registry.register(url::Url::parse("memory://source").unwrap(), store.clone());
    elsewhere.options.external_stores = Some(registry as Arc<dyn ObjectStoreRegistry>);
    let named = TableOptions {
        store_url: Some("memory://source".into()),
        ..Default::default()
    };
    let table = Table::open_with(store.clone(), "t".into(), named);
    let (clone, _) = table.shallow_clone(version, elsewhere).await.unwrap();
    assert_eq!(
        rows_of(&clone, None).await.unwrap(),
        rows_of(&table, Some(version)).await.unwrap()
    );

    // Opened without a way to reach it: an error naming the base's URL.
    let stranded = Table::open(other.clone(), "c".into());
    let error = rows_of(&stranded, None).await.unwrap_err().to_string();
    assert!(error.contains("memory://source/t"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_clones_are_refused_and_write_nothing() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (table, version) = source(&store).await;
    let source_files = files(&store, "t").await;

    let missing = table
        .shallow_clone(version + 50, target(&store, "c"))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, Error::VersionNotFound { .. }),
        "{missing}"
    );
    assert!(files(&store, "c").await.is_empty());

    Table::create(
        store.clone(),
        "taken".into(),
        &schema(),
        TableOptions::default(),
    )
    .await
    .unwrap();
    let taken_files = files(&store, "taken").await;
    let onto = table
        .shallow_clone(version, target(&store, "taken"))
        .await
        .unwrap_err();
    assert!(matches!(onto, Error::TableAlreadyExists { .. }), "{onto}");
    assert_eq!(files(&store, "taken").await, taken_files);
    assert_eq!(files(&store, "t").await, source_files);

    // A manifest naming a base it does not list is refused as damaged.
    let (clone, _) = table
        .shallow_clone(version, target(&store, "c"))
        .await
        .unwrap();
    let mut manifest =
        natal::internals::format::Manifest::clone(clone.latest().await.unwrap().manifest());
    manifest.rebase_file_references(|base| if base == 1 { 9 } else { base });
    manifest.version += 1;
    manifest.fragment_segments.clear();
    let path = clone.store().manifest_path(manifest.version);
    store.put(&path, manifest.encode().into()).await.unwrap();
    let error = clone.latest().await.unwrap_err();
    assert!(matches!(error, Error::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("storage base 9"), "{error}");
}

/// Every file path the latest version of `table` references, all under its own root.
async fn own_references(table: &Table) -> Vec<String> {
    let latest = table.latest().await.unwrap();
    let manifest = latest.manifest();
    assert!(manifest.bases.is_empty(), "a deep clone names no base");
    let paths: Vec<String> = (manifest.file_references().iter())
        .map(|p| p.as_str().to_string())
        .collect();
    assert!(paths.iter().all(|p| !p.starts_with("_bases/")), "{paths:?}");
    paths
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_clone_copies_what_the_version_reads_and_outlives_its_source() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (table, version) = source(&store).await;
    let expected = rows_of(&table, Some(version)).await.unwrap();
    // From a shallow clone, so the copies come from a base too.
    let (shallow, _) = table
        .shallow_clone(version, target(&store, "shallow"))
        .await
        .unwrap();
    shallow.append(vec![batch(&[(8000, 8)])]).await.unwrap();
    let expected_shallow = rows_of(&shallow, None).await.unwrap();

    let (deep, committed) = table
        .deep_clone(version, target(&store, "deep"))
        .await
        .unwrap();
    assert_eq!(committed.version, version);
    assert!(committed.figures.files_copied > 0);
    assert_eq!(committed.figures.live_rows, expected.len() as u64);
    let copied = files(&store, "deep").await;
    for reference in own_references(&deep).await {
        assert!(copied.contains(&format!("deep/{reference}")), "{reference}");
    }
    let latest = deep.latest().await.unwrap();
    let origin = latest.manifest().transaction.origin.clone().unwrap();
    assert!(origin.deep);

    // A deep clone of the shallow one, into another store: streamed, not copied in place.
    let other: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let latest_shallow = shallow.latest().await.unwrap().version();
    let (elsewhere, _) = shallow
        .deep_clone(latest_shallow, target(&other, "deep2"))
        .await
        .unwrap();
    own_references(&elsewhere).await;

    // The source and the shallow clone go away entirely: both deep clones still read.
    for root in ["t", "shallow"] {
        for file in files(&store, root).await {
            store.delete(&Path::from(file)).await.unwrap();
        }
    }
    assert_eq!(rows_of(&deep, None).await.unwrap(), expected);
    assert_eq!(rows_of(&elsewhere, None).await.unwrap(), expected_shallow);
    // And change on their own.
    deep.delete_where(key_matches(|k| k % 2 == 0))
        .await
        .unwrap();
    deep.compact(CompactOptions::default()).await.unwrap();
    deep.cleanup(EAGER).await.unwrap();
    let mut halved = expected;
    halved.retain(|_, (key, _)| *key % 2 != 0);
    assert_eq!(rows_of(&deep, None).await.unwrap(), halved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_clone_of_a_damaged_version_copies_nothing() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (table, version) = source(&store).await;
    let snapshot = table.at_version(version).await.unwrap();
    let data_file = snapshot.manifest().fragments[0].files[0].path.clone();
    store.delete(&table.store().path(&data_file)).await.unwrap();
    let error = table
        .deep_clone(version, target(&store, "c"))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("not there to copy"), "{error}");
    assert!(
        files(&store, "c").await.is_empty(),
        "nothing copied, nothing published"
    );
}

/// A shallow clone plans a filtered scan as its source does: the same fragments pruned by
/// their statistics, the same index probed, the same pieces read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shallow_clone_plans_scans_as_its_source() {
    let (_dir, ctx) = catalog_session();
    let mut statements = fragmented_table(5);
    statements.push("UPDATE t SET v = v + 1 WHERE k % 10 = 0".into());
    statements.push("SELECT * FROM natal_create_index('t', 'v', 'by_v')".into());
    statements.push("SELECT * FROM natal_clone('t', 'c')".into());
    for sql in statements {
        answer(&ctx, &sql).await.unwrap();
    }
    for query in [
        "SELECT count(*) AS n, sum(v) AS s FROM {} WHERE k < 1500",
        "SELECT k FROM {} WHERE v = 3 AND k > 4000 ORDER BY k",
        "SELECT count(*) AS n FROM \"{}$rows\" WHERE _rowid IN (1, 4097, 12000)",
    ] {
        let explain = |table: &str| {
            let ctx = ctx.clone();
            let sql = format!("EXPLAIN {}", query.replace("{}", table));
            async move {
                let text = answer(&ctx, &sql).await.unwrap();
                let scan = text.lines().find(|l| l.contains("NatalScanExec"));
                scan.map(str::to_string).unwrap_or(text)
            }
        };
        let source = explain("t").await;
        assert!(source.contains("NatalScanExec"), "{source}");
        assert_eq!(explain("c").await, source, "{query}");
        let on = |table: &str| query.replace("{}", table);
        assert_eq!(
            answer(&ctx, &on("c")).await.unwrap(),
            answer(&ctx, &on("t")).await.unwrap(),
            "{query}"
        );
    }
}

/// Tables of the fixtures since 2026-12-04-clones, beside `t` and `b` in `dir`: `c`, a
/// shallow clone of `t`'s latest version that then changed (appended to, updated, deleted
/// from, compacted); `cc`, a shallow clone of `c`'s latest (naming `t`'s root and `c`'s as
/// bases); and `bc`, a shallow clone of the blob table `b` (its sidecars and the ones its
/// reuse index names read through a base). Base paths are the store's (relative to the
/// fixture's directory), so the fixture reads wherever it is copied.
pub async fn write_fixture_tables(dir: &std::path::Path) {
    let store = crate::fixtures::local_store(dir);
    let t = Table::open(store.clone(), "t".into());
    let c = shallow_clone_latest(&store, &t, "t", "c").await;
    let schema = Arc::new(c.latest().await.expect("latest").schema().clone());
    let added = crate::model_schema::pad(batch(&[(500, 5), (501, 6), (502, 7)]), &schema);
    c.append(vec![added]).await.expect("append");
    let update = crate::model_schema::padded_update(100, schema);
    c.update_where(key_matches(|k| k % 3 == 0), &update)
        .await
        .expect("update");
    c.delete_where(key_matches(|k| k % 8 == 1))
        .await
        .expect("delete");
    c.compact(CompactOptions {
        max_deleted_fraction: 0.05,
        ..Default::default()
    })
    .await
    .expect("compact");
    shallow_clone_latest(&store, &c, "c", "cc").await;
    let b = Table::open(store.clone(), "b".into());
    shallow_clone_latest(&store, &b, "b", "bc").await;
}

/// A shallow clone of `table`'s latest version at `root` of `store` (the table's own).
async fn shallow_clone_latest(
    store: &Arc<dyn ObjectStore>,
    table: &Table,
    source: &str,
    root: &str,
) -> Table {
    let target = CloneTarget {
        store: store.clone(),
        root: root.into(),
        options: TableOptions::default(),
        source_name: source.into(),
    };
    let version = table.latest().await.expect("latest").version();
    table.shallow_clone(version, target).await.expect("clone").0
}

/// The clone tables of [`write_fixture_tables`], every version of each.
pub async fn describe_fixture_tables(dir: &std::path::Path) -> String {
    let store = crate::fixtures::local_store(dir);
    let mut out = String::new();
    for name in ["c", "cc"] {
        let table = Table::open(store.clone(), name.into());
        out.push_str(&format!("table {name}\n"));
        out.push_str(&crate::fixtures::describe(&table).await.expect("describe"));
    }
    out.push_str("table bc\n");
    let blobs = Table::open(store, "bc".into());
    out.push_str(&crate::blob::describe_fixture_table(&blobs).await);
    out
}

/// Today's natal writes to the fixture's clones and cleans them up: `cc` holds what was
/// written, and every version of `c` (its base) and `b` (`bc`'s) still reads as before.
pub async fn write_to_fixture_clones(dir: &std::path::Path) {
    let store = crate::fixtures::local_store(dir);
    let by_key =
        |rows: BTreeMap<u64, (i64, i64)>| -> BTreeMap<i64, i64> { rows.into_values().collect() };
    let c = Table::open(store.clone(), "c".into());
    let b = Table::open(store.clone(), "b".into());
    let c_before = crate::fixtures::describe(&c).await.expect("describe c");
    let b_before = crate::blob::describe_fixture_table(&b).await;

    let cc = Table::open(store.clone(), "cc".into());
    let mut expected = by_key(rows_of(&cc, None).await.expect("cc"));
    let schema = cc.latest().await.expect("latest").schema().clone();
    let added = crate::model_schema::pad(batch(&[(900, 9)]), &schema);
    cc.append(vec![added]).await.expect("append");
    expected.insert(900, 9);
    cc.delete_where(key_matches(|k| k % 5 == 2))
        .await
        .expect("delete");
    expected.retain(|k, _| k % 5 != 2);
    cc.compact(CompactOptions::default())
        .await
        .expect("compact");
    cc.cleanup(EAGER).await.expect("cleanup");
    assert_eq!(by_key(rows_of(&cc, None).await.expect("cc")), expected);

    let bc = Table::open(store.clone(), "bc".into());
    bc.append(vec![crate::blob::blob_batch(200..210)])
        .await
        .expect("append");
    bc.compact(CompactOptions::default())
        .await
        .expect("compact");
    bc.cleanup(EAGER).await.expect("cleanup");
    let blobs = crate::blob::read_blobs(&bc.latest().await.expect("bc"))
        .await
        .expect("blobs");
    assert!(blobs.contains_key(&209) && blobs.contains_key(&0));

    let c_after = crate::fixtures::describe(&c).await.expect("describe c");
    assert!(c_after == c_before, "c changed under its clone's cleanup");
    let b_after = crate::blob::describe_fixture_table(&b).await;
    assert!(b_after == b_before, "b changed under its clone's cleanup");
}
