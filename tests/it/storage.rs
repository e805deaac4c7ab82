//! What lands in storage: what cleanup removes and keeps, row-id files, deletion files,
//! fragment segments, and the requests reads make. (What a data file holds: `data_files`.)

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::AsArray;
use bytes::Bytes;
use futures::TryStreamExt;
use natal::Error;
use natal::{CleanupPolicy, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::common::*;

async fn list(store: &Arc<dyn ObjectStore>) -> HashSet<String> {
    let all: Vec<_> = store.list(None).try_collect().await.unwrap();
    all.into_iter().map(|m| m.location.to_string()).collect()
}

#[tokio::test]
async fn cleanup_removes_only_what_no_kept_version_needs() {
    let (table, store) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3)])])
        .await
        .unwrap();
    table
        .update_where(key_matches(|k| k == 1), &add_to_val(1))
        .await
        .unwrap();
    table.checkpoint().await.unwrap();
    table.overwrite(vec![batch(&[(9, 9)])]).await.unwrap();
    // Neighbours cleanup must never touch: another table, and a stranger inside this one.
    let other = Table::create(
        store.clone(),
        "t2".into(),
        &schema(),
        TableOptions::default(),
    )
    .await
    .unwrap();
    other.append(vec![batch(&[(5, 5)])]).await.unwrap();
    let stranger = Path::from("t/notes.txt");
    store
        .put(&stranger, PutPayload::from(Bytes::from_static(b"mine")))
        .await
        .unwrap();
    let before = list(&store).await;

    // Young files are protected: they could belong to a commit in flight.
    let cautious = CleanupPolicy {
        keep_versions: 1,
        keep_newer_than: Duration::ZERO,
        min_file_age: Duration::from_secs(3600),
    };
    let report = table.cleanup(cautious).await.unwrap();
    assert_eq!(report.files_removed, 0);
    assert_eq!(report.versions_removed, 4);

    let eager = CleanupPolicy {
        keep_versions: 1,
        keep_newer_than: Duration::ZERO,
        min_file_age: Duration::ZERO,
    };
    let report = table.cleanup(eager).await.unwrap();
    assert!(report.files_removed >= 4, "{report:?}");
    let after = list(&store).await;
    assert!(after.contains(stranger.as_ref()));
    assert!(before
        .iter()
        .filter(|p| p.starts_with("t2/"))
        .all(|p| after.contains(p)));
    let latest = table.latest().await.unwrap();
    assert_eq!(read_rows(&latest).await.unwrap().len(), 1);
    assert!(matches!(
        table.at_version(2).await,
        Err(Error::VersionNotFound { .. })
    ));
    assert_eq!(
        read_rows(&other.latest().await.unwrap())
            .await
            .unwrap()
            .len(),
        1
    );
    // Only the latest version's files remain under t/data.
    let data: Vec<_> = after.iter().filter(|p| p.starts_with("t/data/")).collect();
    assert_eq!(data.len(), 1, "{data:?}");
}

/// Large row-id sequences are written once to `_rowids/`; later manifests only name them,
/// so a commit's manifest grows by a fragment entry, not by the ids of every earlier move.
#[tokio::test]
async fn large_row_id_sequences_live_in_files_and_commits_stay_small() {
    let (table, store) = memory_table(1 << 20).await;
    let rows: Vec<(i64, i64)> = (0..50_000).map(|k| (k, 0)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let mut state = 17u64;
    let mut manifest_sizes = Vec::new();
    for _ in 0..5 {
        let ids: Vec<natal::RowId> = (0..6_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                natal::RowId::from_u64(addr(0, ((state >> 33) % 50_000) as u32))
            })
            .collect();
        let committed = table.update_rows(&ids, &add_to_val(1)).await.unwrap();
        let path = table.store().manifest_path(committed.version);
        manifest_sizes.push(store.head(&path).await.unwrap().size);
    }
    let row_id_files: Vec<_> = list(&store)
        .await
        .into_iter()
        .filter(|p| p.starts_with("t/_rowids/"))
        .collect();
    assert_eq!(row_id_files.len(), 5, "one file per carrying commit");
    for pair in manifest_sizes.windows(2) {
        assert!(
            pair[1] < pair[0] + 1024,
            "manifest grew by more than a fragment entry: {manifest_sizes:?}"
        );
    }
    let latest = table.latest().await.unwrap();
    assert_ne!(
        latest.manifest().reader_flags() & natal::internals::format::flags::ROW_ID_FILES,
        0
    );
    let expected = read_rows(&latest).await.unwrap();
    let fresh = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    assert_eq!(read_rows(&fresh).await.unwrap(), expected);
    for (id, row) in expected.iter().step_by(997) {
        let found = fresh.resolve(natal::RowId::from_u64(*id)).await.unwrap();
        assert_eq!(found.map(|a| a.as_u64()), Some(row.addr));
    }

    let victim = Path::from(row_id_files[0].as_str());
    let mut bytes = store
        .get(&victim)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    store.put(&victim, PutPayload::from(bytes)).await.unwrap();
    let err = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
}

/// Each delete writes a file of what it deleted; files fold together geometrically, so a
/// fragment keeps few files and no commit rewrites the fragment's whole history each time.
#[tokio::test]
async fn deletions_are_written_as_folding_deltas() {
    let (table, store) = memory_table(1 << 20).await;
    let rows: Vec<(i64, i64)> = (0..10_000).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let mut written_offsets = 0u64;
    let mut known = HashSet::new();
    let commits = 64u32;
    for commit in 0..commits {
        let ids: Vec<natal::RowId> = (0..10)
            .map(|i| natal::RowId::from_u64(addr(0, (i * commits + commit) * 13 % 10_000)))
            .collect();
        table.delete_rows(&ids).await.unwrap();
        let latest = table.latest().await.unwrap();
        let vector = latest.manifest().fragments[0].deletion.clone().unwrap();
        assert_eq!(vector.deleted_rows(), 10 * (commit as u64 + 1));
        assert!(
            vector.file_count() <= 8,
            "{} files after {} commits",
            vector.file_count(),
            commit + 1
        );
        for file in vector.files() {
            if known.insert(file.path.clone()) {
                written_offsets += file.deleted_rows;
            }
        }
    }
    let deleted = 10 * commits as u64;
    assert!(
        written_offsets <= deleted * 8,
        "{written_offsets} offsets written for {deleted} deletions"
    );
    let fresh = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    let live = read_rows(&fresh).await.unwrap();
    assert_eq!(live.len() as u64, 10_000 - deleted);
    assert!(
        fresh.manifest().reader_flags() & natal::internals::format::flags::DELETION_DELTAS != 0
    );
}

/// A long fragment list lives in `_fragments/` segments; a commit rewrites only the
/// segments it changes (and the partly filled last one) and shares the rest.
#[tokio::test]
async fn fragment_segments_are_shared_between_versions() {
    let (table, store) = memory_table_with(TableOptions {
        max_rows_per_fragment: 2,
        layout: natal::ManifestLayout {
            fragments_per_segment: 4,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let rows: Vec<(i64, i64)> = (0..40).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let before = table.latest().await.unwrap();
    let segments = before.manifest().fragment_segments.clone();
    assert_eq!(segments.len(), 5, "20 fragments in segments of 4");
    assert_ne!(
        before.manifest().reader_flags() & natal::internals::format::flags::FRAGMENT_SEGMENTS,
        0
    );

    table
        .delete_rows(&[natal::RowId::from_u64(addr(0, 0))])
        .await
        .unwrap();
    table.append(vec![batch(&[(100, 100)])]).await.unwrap();
    let after = table.latest().await.unwrap();
    let now = &after.manifest().fragment_segments;
    assert_ne!(
        now[0], segments[0],
        "the segment holding fragment 0 is rewritten"
    );
    assert_eq!(&now[1..5], &segments[1..5], "untouched segments are shared");
    assert_eq!(now.len(), 6, "the new fragment starts a segment");

    let fresh = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    assert_eq!(
        read_rows(&fresh).await.unwrap(),
        read_rows(&after).await.unwrap()
    );
    assert_eq!(fresh.manifest().fragments.len(), 21);

    assert_eq!(
        now[0].path, segments[0].path,
        "a deletion patches the segment's file instead of rewriting it"
    );
    assert!(now[0].patch.is_some());

    let victim = table.store().path(&now[2].path);
    let bytes = store.get(&victim).await.unwrap().bytes().await.unwrap();
    store
        .put(&victim, PutPayload::from(bytes.slice(..bytes.len() - 3)))
        .await
        .unwrap();
    let err = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
}

/// Deletion files take derived names (`<fragment>-<version>.bin`) claimed with put-if-absent,
/// so a manifest stores a version number where it stored a path. A name already taken (a
/// writer that lost a race or crashed) is skipped, never overwritten.
#[tokio::test]
async fn deletion_files_take_derived_names_and_skip_taken_ones() {
    use natal::internals::format::{flags, DerivedName, Manifest, TablePath};
    let (table, store) = memory_table(100).await;
    let rows: Vec<(i64, i64)> = (0..300).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let next = table.latest().await.unwrap().version() + 1;
    let taken = DerivedName::DELETION.path(1, next, 0);
    let junk = Bytes::from_static(b"a crashed writer's file");
    store
        .put(&table.store().path(&taken), PutPayload::from(junk.clone()))
        .await
        .unwrap();

    let ids = [addr(1, 5), addr(2, 7)].map(natal::RowId::from_u64);
    table.delete_rows(&ids).await.unwrap();
    let latest = table.latest().await.unwrap();
    let manifest = latest.manifest();
    let file_of = |fragment: usize| {
        manifest.fragments[fragment]
            .deletion
            .clone()
            .unwrap()
            .first()
            .clone()
    };
    assert_eq!(file_of(2).path.as_str(), format!("_deletions/2-{next}.bin"));
    assert_eq!(
        file_of(1).path.as_str(),
        format!("_deletions/1-{next}-1.bin")
    );
    assert_eq!(
        DerivedName::DELETION.parse(&file_of(1).path, 1),
        Some((next, 1))
    );
    assert_eq!(
        DerivedName::DELETION.parse(&file_of(1).path, 2),
        None,
        "another fragment's"
    );
    assert_ne!(manifest.reader_flags() & flags::DERIVED_NAMES, 0);
    let untouched = store.get(&table.store().path(&taken)).await.unwrap();
    assert_eq!(untouched.bytes().await.unwrap(), junk);

    let fresh = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    let live = read_rows(&fresh).await.unwrap();
    assert_eq!(live.len(), 298);
    assert!(!live.contains_key(&addr(1, 5)) && !live.contains_key(&addr(2, 7)));

    // A derived name costs a version number; any other name is kept as its path.
    let mut legacy: Manifest = Manifest::clone(manifest);
    let vector = legacy.fragments[1].deletion.as_mut().unwrap();
    let first = vector.files_mut().next().unwrap();
    first.path = TablePath::parse("_deletions/1-0042.bin").unwrap();
    assert_eq!(
        DerivedName::DELETION.parse(&vector.first().path, 1),
        None,
        "not canonical"
    );
    let decoded = Manifest::decode("m", &legacy.encode())
        .unwrap()
        .resolve(&Default::default())
        .unwrap();
    assert_eq!(decoded.fragments, legacy.fragments);
    let derived = Manifest::decode("m", &manifest.encode())
        .unwrap()
        .resolve(&Default::default())
        .unwrap();
    assert_eq!(derived.fragments, manifest.fragments);
    assert!(manifest.encode().len() + 10 < legacy.encode().len());
}

/// A commit that only deletes writes, for each segment it touches, a patch holding the
/// whole deletion vector of every fragment changed since the segment file; the segment file
/// is shared. Readers lay the patch over it, cleanup keeps it, and damage to it is refused.
#[tokio::test]
async fn deletions_patch_segments_rather_than_rewrite_them() {
    use natal::internals::format::{encode_segment_patch, flags};
    let (table, store) = memory_table_with(TableOptions {
        max_rows_per_fragment: 2,
        layout: natal::ManifestLayout {
            fragments_per_segment: 8,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let rows: Vec<(i64, i64)> = (0..48).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let first = table
        .latest()
        .await
        .unwrap()
        .manifest()
        .fragment_segments
        .clone();
    assert!(first.iter().all(|s| s.patch.is_none()));

    for (fragment, offset) in [(9, 0), (11, 1), (9, 1)] {
        let id = natal::RowId::from_u64(addr(fragment, offset));
        table.delete_rows(&[id]).await.unwrap();
    }
    let latest = table.latest().await.unwrap();
    let now = latest.manifest().fragment_segments.clone();
    assert_eq!(now[1].path, first[1].path, "segment 1's file is shared");
    let patch = now[1].patch.clone().expect("segment 1 is patched");
    assert_eq!(patch.fragment_count, 2, "fragments 9 and 11, each whole");
    let version = latest.version();
    assert_eq!(patch.path.as_str(), format!("_fragments/8-{version}.patch"));
    assert_eq!(
        now[1].path.as_str(),
        "_fragments/8-2.bin",
        "written by the append"
    );
    assert_eq!(&now[2..], &first[2..], "untouched segments are shared");
    assert_ne!(latest.manifest().reader_flags() & flags::SEGMENT_PATCHES, 0);

    let fresh = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    let live = read_rows(&fresh).await.unwrap();
    assert_eq!(live, read_rows(&latest).await.unwrap());
    assert_eq!(live.len(), 45);
    assert!(!live.contains_key(&addr(9, 0)) && !live.contains_key(&addr(9, 1)));
    assert!(!live.contains_key(&addr(11, 1)) && live.contains_key(&addr(11, 0)));

    // Cleanup of older versions keeps the patch the latest needs.
    let eager = CleanupPolicy {
        keep_versions: 1,
        keep_newer_than: Duration::ZERO,
        min_file_age: Duration::ZERO,
    };
    table.cleanup(eager).await.unwrap();
    let fresh = Table::open(store.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    assert_eq!(read_rows(&fresh).await.unwrap(), live);

    // Damage: a truncated patch, and a sealed patch naming a fragment of another segment.
    let victim = table.store().path(&patch.path);
    let bytes = store.get(&victim).await.unwrap().bytes().await.unwrap();
    let refuse = |bytes: Bytes| {
        let (store, victim) = (store.clone(), victim.clone());
        async move {
            store.put(&victim, PutPayload::from(bytes)).await.unwrap();
            let err = Table::open(store, "t".into()).latest().await.unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{err}");
            err.to_string()
        }
    };
    refuse(bytes.slice(..bytes.len() - 3)).await;
    let stranger = &fresh.manifest().fragments[0];
    let err = refuse(Bytes::from(encode_segment_patch(&[stranger]))).await;
    assert!(err.contains("patches 1 fragments"), "{err}");
    let strangers = [stranger, &fresh.manifest().fragments[1]];
    let err = refuse(Bytes::from(encode_segment_patch(&strangers))).await;
    assert!(err.contains("not in its segment"), "{err}");
    let reversed = [
        &fresh.manifest().fragments[11],
        &fresh.manifest().fragments[9],
    ];
    let err = refuse(Bytes::from(encode_segment_patch(&reversed))).await;
    assert!(err.contains("out of order"), "{err}");
}

/// A take of rows spread over several row groups reads every page it needs with one request
/// to the data file (once its footer is cached), and data pages hold about `PAGE_ROWS` rows:
/// a point read decodes little.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_fetches_its_pages_in_one_request() {
    let (table, counted, inner) = counted_table(2 << 20).await;
    // Past one row group (1Mi rows), in one fragment.
    let rows: Vec<(i64, i64)> = (0..1_100_000).map(|k| (k, k * 2)).collect();
    table
        .append(rows.chunks(100_000).map(batch).collect())
        .await
        .unwrap();
    let snapshot = table.latest().await.unwrap();
    assert_eq!(snapshot.manifest().fragments.len(), 1);
    let id = |offset: u32| natal::RowId::from_u64(addr(0, offset));
    snapshot.take(&[id(1)], Default::default()).await.unwrap();

    counted.reset();
    let offsets = [1_099_999u32, 10, 150_000, 1_048_576];
    let ids: Vec<_> = offsets.iter().map(|&o| id(o)).collect();
    let taken = snapshot.take(&ids, Default::default()).await.unwrap();
    let keys = taken
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>();
    assert_eq!(
        keys.values().to_vec(),
        offsets.iter().map(|&o| o as i64).collect::<Vec<_>>(),
        "rows in the order asked"
    );
    assert_eq!(counted.tally().get, 1, "one request for all pages");

    let metadata = first_file_footer(&table, &inner).await;
    assert!(metadata.num_row_groups() > 1);
    let offset_index = metadata.offset_index().expect("a page index");
    for (group, columns) in offset_index.iter().enumerate() {
        let rows = metadata.row_group(group).num_rows();
        for column in columns {
            let starts: Vec<i64> = column
                .page_locations()
                .iter()
                .map(|p| p.first_row_index)
                .chain([rows])
                .collect();
            // PAGE_ROWS rows, give or take the writer's best effort where an input batch ends.
            let page = natal::internals::io::PAGE_ROWS as i64;
            assert!(
                starts.windows(2).all(|w| w[1] - w[0] < 2 * page),
                "{starts:?}"
            );
            assert!(starts.len() as i64 > rows * 5 / (page * 6), "{starts:?}");
        }
    }
}

/// A small data file is read whole with its footer, and a cold take from it needs no second
/// request: what keeps takes cheap on tables with many small update fragments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_take_from_a_small_file_is_one_request() {
    let (table, counted, _) = counted_table(TableOptions::default().max_rows_per_fragment).await;
    let rows: Vec<(i64, i64)> = (0..2000).map(|k| (k, k * 2)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let snapshot = Table::open(counted.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    counted.reset();
    let ids = [natal::RowId::from_u64(addr(0, 1234))];
    let taken = snapshot.take(&ids, Default::default()).await.unwrap();
    let keys = taken
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>();
    assert_eq!(keys.values().to_vec(), vec![1234]);
    assert_eq!(counted.tally().get, 1, "footer and pages in one request");
}

/// An empty table `t` on a store that counts requests, and the store beneath.
async fn counted_table(
    max_rows_per_fragment: u64,
) -> (
    Table,
    Arc<natal::internals::io::InstrumentedStore>,
    Arc<dyn ObjectStore>,
) {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let counted = Arc::new(natal::internals::io::InstrumentedStore::new(inner.clone()));
    let table = Table::create(
        counted.clone(),
        "t".into(),
        &schema(),
        TableOptions {
            max_rows_per_fragment,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    (table, counted, inner)
}

/// A fragment with few deleted rows is read whole and the deleted rows dropped after
/// decoding; with many, by a row selection. Both give every live row once, with its id, in
/// offset order, including where a whole read batch (8,192 rows) is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_drop_deleted_rows_whether_few_or_many() {
    let (table, _) = memory_table(1 << 20).await;
    let rows: Vec<(i64, i64)> = (0..40_000).map(|k| (k, k % 7)).collect();
    table
        .append(rows.chunks(10_000).map(batch).collect())
        .await
        .unwrap();
    let whole_batch = 8_192..16_384u32;
    let few: Vec<u32> = [0, 8_191, 39_999].into_iter().chain(whole_batch).collect();
    let ids = |offsets: &[u32]| -> Vec<natal::RowId> {
        offsets
            .iter()
            .map(|&o| natal::RowId::from_u64(addr(0, o)))
            .collect()
    };
    table.delete_rows(&ids(&few)).await.unwrap();
    let mut deleted: HashSet<u32> = few.iter().copied().collect();
    for many in [false, true] {
        if many {
            // Past a quarter of the fragment: read by a row selection.
            let more: Vec<u32> = (20_000..32_000).step_by(2).collect();
            table.delete_rows(&ids(&more)).await.unwrap();
            deleted.extend(more);
        }
        let live: Vec<(u64, Row)> = read_rows(&table.latest().await.unwrap())
            .await
            .unwrap()
            .into_iter()
            .collect();
        let expected: Vec<(u64, Row)> = (0..40_000u32)
            .filter(|o| !deleted.contains(o))
            .map(|o| {
                let row = Row {
                    addr: addr(0, o),
                    key: o as i64,
                    val: o as i64 % 7,
                };
                (addr(0, o), row)
            })
            .collect();
        assert_eq!(live.len(), expected.len(), "many deletions: {many}");
        assert!(live == expected, "many deletions: {many}");
    }
    // A filter over the same fragment sees only live rows.
    let snapshot = table.latest().await.unwrap();
    let ctx = datafusion::prelude::SessionContext::new();
    ctx.register_table(
        "t",
        Arc::new(natal::datafusion::NatalTableProvider::from_snapshot(
            table.clone(),
            natal::datafusion::ProviderView {
                version: None,
                system_columns: true,
            },
            snapshot,
        )),
    )
    .unwrap();
    let counted = ctx
        .sql("SELECT count(key) FROM t WHERE key < 16384")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let count = counted[0]
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>();
    assert_eq!(count.value(0), 16_384 - 8_192 - 2);
}

/// A handle reads a published manifest once: finding the latest version again is a listing
/// and no read, and a newer version is read when it appears. A version asked for by number
/// is always read, so one that cleanup removed is reported missing.
#[tokio::test]
async fn a_handle_reads_the_latest_manifest_once() {
    let (table, counted, _) = counted_table(TableOptions::default().max_rows_per_fragment).await;
    table.append(vec![batch(&[(1, 1)])]).await.unwrap();
    let first = table.latest().await.unwrap();
    counted.reset();
    let again = table.latest().await.unwrap();
    assert_eq!(again.manifest(), first.manifest());
    assert_eq!(counted.tally().get, 0, "served from the handle");
    assert_eq!(
        counted.tally().list,
        1,
        "the latest version is still listed"
    );

    table.append(vec![batch(&[(2, 2)])]).await.unwrap();
    let newer = table.latest().await.unwrap();
    assert_eq!(newer.version(), first.version() + 1);
    assert_eq!(read_rows(&newer).await.unwrap().len(), 2);

    counted.reset();
    table.at_version(first.version()).await.unwrap();
    assert!(counted.tally().get > 0, "a version by number is read");
}

/// A handle that outlives its table being dropped and created again in the same place (by
/// another handle) reads the new table: its manifests and derived file names (deletions by
/// fragment and version) repeat the old table's, but not their contents.
#[tokio::test]
async fn a_handle_reads_a_table_created_again_in_its_place() {
    let (first, store) = memory_table(100).await;
    first
        .append(vec![batch(&[(1, 10), (2, 20), (3, 30)])])
        .await
        .unwrap();
    first.delete_where(key_matches(|k| k == 2)).await.unwrap();
    let watcher = Table::open(store.clone(), "t".into());
    let before = read_rows(&watcher.latest().await.unwrap()).await.unwrap();
    let keys: Vec<i64> = before.values().map(|r| r.key).collect();
    assert_eq!(keys, [1, 3]);

    let everything: Vec<Path> = list(&store)
        .await
        .into_iter()
        .map(|p| Path::from(p.as_str()))
        .collect();
    for path in everything {
        store.delete(&path).await.unwrap();
    }
    let second = Table::create(
        store.clone(),
        "t".into(),
        &schema(),
        TableOptions::default(),
    )
    .await
    .unwrap();
    second
        .append(vec![batch(&[(7, 70), (8, 80), (9, 90)])])
        .await
        .unwrap();
    second.delete_where(key_matches(|k| k == 9)).await.unwrap();
    let again = watcher.latest().await.unwrap();
    assert_eq!(again.version(), first.latest().await.unwrap().version());
    let after = read_rows(&again).await.unwrap();
    let keys: Vec<i64> = after.values().map(|r| r.key).collect();
    assert_eq!(keys, [7, 8], "the new table's rows and deletions");
}

/// A nested field name Arrow's type parser cannot read back (a quote, a backslash) is stored
/// apart from the type's text, under a reader flag; it reads back exactly.
#[tokio::test]
async fn nested_field_names_read_back_exactly() {
    use arrow::datatypes::{DataType, Field, Schema};
    use natal::internals::format::flags::NESTED_FIELD_NAMES;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let odd = DataType::Struct(vec![Field::new("a\"b\\c", DataType::Int64, true)].into());
    let plain = DataType::Struct(vec![Field::new("a b", DataType::Int64, true)].into());
    for (data_type, flagged) in [(odd, true), (plain, false)] {
        let schema = Schema::new(vec![Field::new("s", data_type.clone(), true)]);
        Table::create(store.clone(), "t".into(), &schema, TableOptions::default())
            .await
            .unwrap();
        let snapshot = Table::open(store.clone(), "t".into())
            .latest()
            .await
            .unwrap();
        assert_eq!(
            snapshot.schema().to_arrow().field(0).data_type(),
            &data_type
        );
        let reader_flags = snapshot.manifest().reader_flags();
        assert_eq!(reader_flags & NESTED_FIELD_NAMES != 0, flagged);
        let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
        for meta in listed {
            store.delete(&meta.location).await.unwrap();
        }
    }
}
