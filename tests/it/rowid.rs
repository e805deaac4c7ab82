//! Row identity end to end: birth addresses, moves, the relocation view's shape (seed 000's
//! three notes) and time travel.

use natal::CompactOptions;
use natal::RowId;

use crate::common::*;

#[tokio::test]
async fn new_ids_are_birth_addresses() {
    let (table, _) = memory_table(4).await;
    let rows: Vec<(i64, i64)> = (0..10).map(|k| (k, k * 10)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let read = read_rows(&table.latest().await.unwrap()).await.unwrap();
    let ids: Vec<u64> = read.keys().copied().collect();
    let expected: Vec<u64> = (0..10).map(|k| addr(k / 4, k % 4)).collect();
    assert_eq!(ids, expected);
    for (id, row) in &read {
        assert_eq!(*id, row.addr);
    }
    assert_eq!(table.latest().await.unwrap().manifest().fragments.len(), 3);
}

#[tokio::test]
async fn updating_a_row_twice_leaves_one_point_entry() {
    let (table, _) = memory_table(100).await;
    table
        .append(vec![batch(&[(1, 10), (2, 20), (3, 30)])])
        .await
        .unwrap();
    table
        .update_where(key_matches(|k| k == 2), &add_to_val(1))
        .await
        .unwrap();
    table
        .update_where(key_matches(|k| k == 2), &add_to_val(1))
        .await
        .unwrap();
    let snapshot = table.latest().await.unwrap();
    let view = snapshot.relocation_view().await.unwrap();
    assert_eq!(view.point_count(), 1);
    assert!(view.range_entries().is_empty());
    let id = RowId::from_u64(addr(0, 1));
    let now = snapshot.resolve(id).await.unwrap().expect("row 2 is live");
    assert_eq!(now.fragment_id(), 2, "the second update's fragment");
    let rows = read_rows(&snapshot).await.unwrap();
    assert_eq!(rows[&id.as_u64()].val, 22);
    assert_eq!(rows[&id.as_u64()].addr, now.as_u64());
    // The copy in fragment 1 is deleted: resolving never returns a stale address.
    assert_eq!(rows.len(), 3);
}

#[tokio::test]
async fn compaction_keeps_ids_and_makes_range_entries() {
    let (table, _) = memory_table(10).await;
    for chunk in 0..4 {
        let rows: Vec<(i64, i64)> = (0..10).map(|k| (chunk * 10 + k, k)).collect();
        table.append(vec![batch(&rows)]).await.unwrap();
    }
    table
        .delete_where(key_matches(|k| k % 7 == 3))
        .await
        .unwrap();
    table
        .update_where(key_matches(|k| k == 15), &add_to_val(100))
        .await
        .unwrap();
    let before = read_rows(&table.latest().await.unwrap()).await.unwrap();
    let report = table
        .compact(CompactOptions {
            target_rows_per_fragment: Some(100),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(report.figures.fragments_removed >= 4, "{report:?}");
    assert_eq!(report.figures.fragments_added, 1);
    let snapshot = table.latest().await.unwrap();
    let after = read_rows(&snapshot).await.unwrap();
    assert_eq!(before.len(), after.len());
    for (id, row) in &before {
        let moved = after[id];
        assert_eq!(
            (moved.key, moved.val),
            (row.key, row.val),
            "id {id} changed value"
        );
        assert_ne!(moved.addr, row.addr, "compaction moved every row");
        // Single hop: the view answers with the current address directly.
        assert_eq!(
            snapshot
                .resolve(RowId::from_u64(*id))
                .await
                .unwrap()
                .map(|a| a.as_u64()),
            Some(moved.addr)
        );
    }
    let view = snapshot.relocation_view().await.unwrap();
    // Contiguous survivors are ranges; the one updated row and the gaps cost few entries.
    assert!(
        view.range_entries().len() <= 12,
        "{} ranges",
        view.range_entries().len()
    );
    assert!(view.point_count() <= 8, "{} points", view.point_count());
    assert_eq!(view.moved_rows(), after.len() as u64);
}

#[tokio::test]
async fn overwrite_never_reuses_fragment_ids() {
    let (table, _) = memory_table(2).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3)])])
        .await
        .unwrap();
    let old = read_rows(&table.latest().await.unwrap()).await.unwrap();
    table
        .overwrite(vec![batch(&[(7, 7), (8, 8)])])
        .await
        .unwrap();
    let snapshot = table.latest().await.unwrap();
    let new = read_rows(&snapshot).await.unwrap();
    assert!(old.keys().all(|id| !new.contains_key(id)));
    assert_eq!(snapshot.manifest().fragments[0].id, 2);
    assert_eq!(snapshot.manifest().max_fragment_id, Some(2));
    // The old version still reads as it did.
    let v2 = table.at_version(2).await.unwrap();
    assert_eq!(read_rows(&v2).await.unwrap(), old);
}

#[tokio::test]
async fn take_returns_rows_in_the_order_asked_and_skips_dead_ids() {
    let (table, _) = memory_table(3).await;
    table
        .append(vec![batch(&[(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)])])
        .await
        .unwrap();
    table
        .update_where(key_matches(|k| k == 4), &add_to_val(10))
        .await
        .unwrap();
    table.delete_where(key_matches(|k| k == 2)).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let ids = [addr(1, 0), addr(0, 0), addr(0, 1), addr(9, 9), addr(0, 2)];
    let ids: Vec<RowId> = ids.iter().map(|&v| RowId::from_u64(v)).collect();
    let batch = snapshot
        .take(
            &ids,
            natal::ScanRequest {
                with_row_id: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    use arrow::array::AsArray;
    let keys: Vec<i64> = batch
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>()
        .values()
        .to_vec();
    let vals: Vec<i64> = batch
        .column(1)
        .as_primitive::<arrow::datatypes::Int64Type>()
        .values()
        .to_vec();
    assert_eq!(keys, vec![4, 1, 3]);
    assert_eq!(vals, vec![14, 1, 3]);
}

#[tokio::test]
async fn restore_brings_back_old_rows_with_their_ids() {
    let (table, _) = memory_table(10).await;
    table.append(vec![batch(&[(1, 1), (2, 2)])]).await.unwrap();
    let v2 = read_rows(&table.latest().await.unwrap()).await.unwrap();
    table.delete_where(key_matches(|_| true)).await.unwrap();
    table.append(vec![batch(&[(3, 3)])]).await.unwrap();
    let restored = table.restore(2).await.unwrap();
    assert_eq!(restored.version, 5);
    let snapshot = table.latest().await.unwrap();
    assert_eq!(read_rows(&snapshot).await.unwrap(), v2);
    // New rows after a restore still get fresh fragment ids.
    table.append(vec![batch(&[(4, 4)])]).await.unwrap();
    let rows = read_rows(&table.latest().await.unwrap()).await.unwrap();
    let (&id, _) = rows.iter().find(|(_, r)| r.key == 4).unwrap();
    assert_eq!(RowId::from_u64(id).birth_fragment(), 2);
}

#[tokio::test]
async fn checkpoint_answers_like_a_full_transpose() {
    let (table, store) = memory_table(50).await;
    let rows: Vec<(i64, i64)> = (0..200).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    table
        .update_where(key_matches(|k| k % 9 == 0), &add_to_val(1))
        .await
        .unwrap();
    table
        .compact(CompactOptions {
            target_rows_per_fragment: Some(120),
            max_deleted_fraction: 0.01,
            ..Default::default()
        })
        .await
        .unwrap();
    table.checkpoint().await.unwrap();
    table
        .update_where(key_matches(|k| k % 10 == 1), &add_to_val(1))
        .await
        .unwrap();
    table.delete_where(key_matches(|k| k == 11)).await.unwrap();
    let with_checkpoint = table.latest().await.unwrap();
    assert!(with_checkpoint.manifest().relocation_checkpoint.is_some());
    let rows = read_rows(&with_checkpoint).await.unwrap();
    // A fresh handle, as a cold process would open it.
    let cold = natal::Table::open(store, "t".into());
    let cold = cold.latest().await.unwrap();
    for (id, row) in &rows {
        let found = cold.resolve(RowId::from_u64(*id)).await.unwrap();
        assert_eq!(found.map(|a| a.as_u64()), Some(row.addr), "id {id}");
    }
    assert_eq!(
        cold.resolve(RowId::from_u64(addr(0, 11))).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn scans_masked_by_ids_follow_moves_and_skip_deleted_rows() {
    let (table, _) = memory_table(4).await;
    let rows: Vec<(i64, i64)> = (0..10).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    table
        .update_where(key_matches(|k| k == 1 || k == 5), &add_to_val(100))
        .await
        .unwrap();
    table.delete_where(key_matches(|k| k == 2)).await.unwrap();
    table
        .compact(CompactOptions {
            target_rows_per_fragment: Some(3),
            max_deleted_fraction: 0.0,
            ..Default::default()
        })
        .await
        .unwrap();
    let snapshot = table.latest().await.unwrap();
    let all = read_rows(&snapshot).await.unwrap();
    // keys 0..4 are ids (0,0)..(0,3); key 5 is (1,1); plus an id that never existed.
    let id = natal::RowId::from_u64;
    let mut wanted = natal::RowIdSet::range(id(addr(0, 0)), id(addr(0, 3)));
    wanted.insert(id(addr(1, 1)));
    wanted.insert(id(addr(7, 7)));
    let request = natal::ScanRequest {
        with_row_id: true,
        with_row_addr: true,
        row_ids: Some(wanted),
        ..Default::default()
    };
    let batches: Vec<arrow::array::RecordBatch> =
        futures::TryStreamExt::try_collect(snapshot.scan(request).await.unwrap())
            .await
            .unwrap();
    use arrow::array::AsArray;
    let mut keys: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, vec![0, 1, 3, 5]);
    assert_eq!(all.len(), 9);
}

/// Keys and vals of a take, in the order returned.
async fn take_pairs(snapshot: &natal::Snapshot, ids: &[u64]) -> Vec<(i64, i64)> {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    let ids: Vec<RowId> = ids.iter().map(|&id| RowId::from_u64(id)).collect();
    let got = snapshot.take(&ids, Default::default()).await.unwrap();
    let keys = got.column(0).as_primitive::<Int64Type>();
    let vals = got.column(1).as_primitive::<Int64Type>();
    keys.values()
        .iter()
        .copied()
        .zip(vals.values().iter().copied())
        .collect()
}

/// Updates count their deletions as moves, so rows reached through the view need none of the
/// deletion files: a take (and an id mask) on a fresh handle works with every deletion file
/// gone, while a full scan, which does need them, fails.
#[tokio::test]
async fn takes_after_updates_read_no_deletion_files() {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    let (table, store) = memory_table(1000).await;
    let rows: Vec<(i64, i64)> = (0..3000).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    for keys in [[5, 1500], [2999, 5]] {
        table
            .update_where(key_matches(move |k| keys.contains(&k)), &add_to_val(1000))
            .await
            .unwrap();
    }
    let latest = table.latest().await.unwrap();
    let manifest = latest.manifest();
    assert!(manifest.writer_flags() & natal::internals::format::flags::MOVE_TALLIES != 0);
    for fragment in &manifest.fragments {
        if let Some(vector) = &fragment.deletion {
            assert!(vector.only_moves(), "fragment {}", fragment.id);
        }
    }
    let deletion_files: Vec<_> = store
        .list(Some(&"t/_deletions".into()))
        .try_collect()
        .await
        .unwrap();
    assert!(!deletion_files.is_empty());
    for file in deletion_files {
        store.delete(&file.location).await.unwrap();
    }
    let fresh = natal::Table::open(store.clone(), "t".into());
    let snapshot = fresh.latest().await.unwrap();
    let ids = [addr(0, 5), addr(1, 500), addr(2, 999), addr(0, 7)];
    assert_eq!(
        take_pairs(&snapshot, &ids).await,
        vec![(5, 2005), (1500, 2500), (2999, 3999), (7, 7)]
    );
    assert_eq!(
        snapshot
            .resolve(RowId::from_u64(addr(0, 5)))
            .await
            .unwrap()
            .map(|a| a.fragment_id()),
        Some(4)
    );
    let request = natal::ScanRequest {
        row_ids: Some(ids.iter().map(|&v| RowId::from_u64(v)).collect()),
        ..Default::default()
    };
    let masked: Vec<arrow::array::RecordBatch> = snapshot
        .scan(request)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(masked.iter().map(|b| b.num_rows()).sum::<usize>(), 4);
    assert!(
        read_rows(&snapshot).await.is_err(),
        "a scan needs the deletions"
    );
}

/// A row updated and then deleted outright: once compaction drops its newest copy, the
/// older copies' move marks are deletions; the row must stay gone.
#[tokio::test]
async fn compaction_of_an_outright_delete_keeps_older_copies_deleted() {
    let (table, _) = memory_table(1000).await;
    let rows: Vec<(i64, i64)> = (0..3000).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    for _ in 0..2 {
        table
            .update_where(key_matches(|k| k == 1500 || k == 10), &add_to_val(1))
            .await
            .unwrap();
    }
    table
        .delete_where(key_matches(|k| k == 1500))
        .await
        .unwrap();
    let report = table.compact(CompactOptions::default()).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let kept: Vec<u32> = snapshot.manifest().fragments.iter().map(|f| f.id).collect();
    assert_eq!(
        &kept[..3],
        &[0, 1, 2],
        "{report:?}: the large fragments stay"
    );
    let id = addr(1, 500);
    assert_eq!(snapshot.resolve(RowId::from_u64(id)).await.unwrap(), None);
    assert_eq!(
        take_pairs(&snapshot, &[id, addr(0, 10)]).await,
        vec![(10, 12)]
    );
    let birth = &snapshot.manifest().fragments[1];
    assert!(!birth.deletion.as_ref().unwrap().only_moves());
    let untouched = &snapshot.manifest().fragments[2];
    assert!(untouched.deletion.is_none());
    let all = read_rows(&snapshot).await.unwrap();
    assert_eq!(all.len(), 2999);
    assert!(!all.contains_key(&id));
}

/// A write that changes nothing publishes nothing: it reports the version it read, and the
/// table's latest version stays where it was. An overwrite with no rows still empties.
#[tokio::test]
async fn writes_that_change_nothing_publish_nothing() {
    let (table, _) = memory_table(4).await;
    let first = table
        .append(vec![batch(&[(1, 10), (2, 20)])])
        .await
        .unwrap();
    assert!(first.published);
    let nothing = || key_matches(|k| k > 100);
    let unchanged = [
        table.append(Vec::new()).await.unwrap(),
        table.append(vec![batch(&[])]).await.unwrap(),
        table.delete_where(nothing()).await.unwrap(),
        table.delete_rows(&[]).await.unwrap(),
        table.update_where(nothing(), &add_to_val(1)).await.unwrap(),
        table.upsert("key", Vec::new()).await.unwrap(),
    ];
    for committed in unchanged {
        assert!(!committed.published, "{committed:?}");
        assert_eq!(committed.version, first.version);
        assert_eq!(committed.figures, natal::RowChanges::default());
    }
    assert_eq!(table.latest().await.unwrap().version(), first.version);

    let emptied = table.overwrite(Vec::new()).await.unwrap();
    assert!(emptied.published);
    assert_eq!(emptied.version, first.version + 1);
    assert_eq!(table.latest().await.unwrap().count_rows(), 0);
}

/// A lookup (a take, a masked scan, a DELETE by id) of one fragment's rows reads that
/// fragment's deletions only: on a 100-fragment table with outright deletions in every
/// fragment it makes a handful of GETs, and the damaged deletion files of other fragments
/// do not fail it.
#[tokio::test]
async fn a_lookup_of_one_fragment_reads_only_its_deletions() {
    use futures::TryStreamExt;
    use natal::internals::io::InstrumentedStore;
    use object_store::ObjectStoreExt;
    let (table, store) = memory_table(10).await;
    let rows: Vec<(i64, i64)> = (0..1000).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    table
        .delete_where(key_matches(|k| k % 10 == 3))
        .await
        .unwrap();
    let fragments = table.latest().await.unwrap().manifest().fragments.clone();
    assert_eq!(fragments.len(), 100);
    for fragment in fragments.iter().filter(|f| f.id != 5) {
        let deletion = fragment
            .deletion
            .as_ref()
            .expect("every fragment lost a row");
        let path = object_store::path::Path::from(format!("t/{}", deletion.first().path));
        store
            .put(&path, bytes::Bytes::from_static(b"damaged").into())
            .await
            .unwrap();
    }
    let counted = std::sync::Arc::new(InstrumentedStore::new(store.clone()));
    let snapshot = natal::Table::open(counted.clone(), "t".into())
        .latest()
        .await
        .unwrap();
    let ids: Vec<RowId> = [1, 3, 4]
        .iter()
        .map(|&k| RowId::from_u64(addr(5, k)))
        .collect();
    counted.reset();
    let request = natal::ScanRequest {
        row_ids: Some(ids.iter().copied().collect()),
        ..Default::default()
    };
    let read: Vec<arrow::array::RecordBatch> = snapshot
        .scan(request)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let tally = counted.tally();
    assert_eq!(
        read.iter().map(|b| b.num_rows()).sum::<usize>(),
        2,
        "offset 3 was deleted"
    );
    // Fragment 5's deletion file, its data file's footer and its pages.
    assert!(tally.get <= 3, "{tally:?}");
    assert_eq!(take_pairs(&snapshot, &[addr(5, 4)]).await, vec![(54, 54)]);
    let handle = natal::Table::open(counted.clone(), "t".into());
    let rows = natal::RowMatch {
        row_ids: Some(ids.iter().copied().collect()),
        ..Default::default()
    };
    assert_eq!(
        handle
            .delete_matching(rows)
            .await
            .unwrap()
            .figures
            .rows_removed,
        2
    );
}

/// Each row's (id, value, creation version, last-change version), by id.
async fn lineage_by_id(snapshot: &natal::Snapshot) -> Vec<(u64, i64, Option<u64>, Option<u64>)> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Int64Type, UInt64Type};
    use futures::TryStreamExt;
    let request = natal::ScanRequest::new().with_row_id().with_lineage();
    let batches: Vec<_> = (snapshot
        .scan(request)
        .await
        .unwrap()
        .try_collect::<Vec<_>>())
    .await
    .unwrap();
    let mut rows = Vec::new();
    for b in &batches {
        let val = b.column(1).as_primitive::<Int64Type>();
        let id = b.column(3).as_primitive::<UInt64Type>();
        let created = b.column(4).as_primitive::<UInt64Type>();
        let updated = b.column(5).as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            let version = |c: &arrow::array::UInt64Array| c.is_valid(i).then(|| c.value(i));
            rows.push((
                id.value(i),
                val.value(i),
                version(created),
                version(updated),
            ));
        }
    }
    rows.sort_unstable();
    rows
}

/// Compaction merges fragments by row id: the fragment it writes holds one ascending run of
/// ids (a take searches it once), and the last-change versions its rows interleave go to a
/// `_lineage/` file that every later read of lineage, cold or warm, answers from as before,
/// and cleanup keeps.
#[tokio::test]
async fn merged_fragments_hold_one_run_of_ids_and_keep_their_versions() {
    let (table, store) = memory_table_with(natal::TableOptions {
        max_rows_per_fragment: 1000,
        layout: natal::ManifestLayout {
            lineage_inline_limit: 0,
            ..Default::default()
        },
        merge: None,
        ..Default::default()
    })
    .await;
    let rows: Vec<(i64, i64)> = (0..200).map(|k| (k, k)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    // Four updates of interleaved rows, then one of rows already moved.
    for c in 0..4 {
        let matches = key_matches(move |k| k % 4 == c);
        table.update_where(matches, &add_to_val(1)).await.unwrap();
    }
    table
        .update_where(key_matches(|k| k % 10 == 0), &add_to_val(1))
        .await
        .unwrap();
    let before = lineage_by_id(&table.latest().await.unwrap()).await;
    assert_eq!(before.len(), 200);
    assert!(
        before.iter().all(|&(_, _, created, _)| created == Some(2)),
        "the append's"
    );

    table.compact(CompactOptions::default()).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let manifest = snapshot.manifest();
    let [fragment] = &manifest.fragments[..] else {
        panic!(
            "one fragment after compaction: {:?}",
            manifest.fragments.len()
        );
    };
    let sequence = fragment.row_ids.sequence().expect("rows moved here");
    assert_eq!(sequence.ascending_runs(), vec![0..200], "one run of ids");
    let file = fragment
        .lineage
        .updated_file
        .as_ref()
        .expect("versions in a file");
    assert!(file.path.as_str().starts_with("_lineage/"));
    assert_eq!(file.bounds, Some((3, 7)), "the updates'");
    let flags = manifest.reader_flags();
    assert_ne!(flags & natal::internals::format::flags::LINEAGE_FILES, 0);
    assert_eq!(lineage_by_id(&snapshot).await, before);

    // A cold handle reads the file; cleanup of every older version keeps it.
    let policy = natal::CleanupPolicy {
        keep_versions: 1,
        keep_newer_than: std::time::Duration::ZERO,
        min_file_age: std::time::Duration::ZERO,
    };
    let report = table.cleanup(policy).await.unwrap();
    assert!(report.files_removed > 0, "{report:?}");
    let cold = natal::Table::open(store.clone(), "t".into());
    let cold = cold.latest().await.unwrap();
    assert_eq!(lineage_by_id(&cold).await, before);
    let ids = [addr(0, 3), addr(0, 40), addr(0, 199)];
    let taken = take_pairs(&cold, &ids).await;
    assert_eq!(taken, vec![(3, 4), (40, 42), (199, 200)]);
}
