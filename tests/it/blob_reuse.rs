//! The Blob Reuse Index: a data file whose descriptors' blob ids resolve through its index
//! to another file's sidecars reads every value right (scans, filters, ranges, places); a
//! sidecar the index names that is gone is `Corrupt` naming it and the data file; cleanup
//! keeps reused sidecars while a retained file names them, and only then; compaction
//! repacks sparse packs (or everything, asked to), and a delete during it rebases.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use natal::internals::format::{BlobReuseIndex, BlobReuseSource, Manifest, TablePath};
use natal::{Error, ScanRequest, Table};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload};

use crate::blob::{blob_batch, read_blobs, sidecars, value_of, SMALL};

async fn get(store: &Arc<dyn ObjectStore>, path: &Path) -> Bytes {
    store.get(path).await.unwrap().bytes().await.unwrap()
}

/// A blob table whose only data file was moved to `data/reused.parquet`, its sidecars left
/// under the old file's stem and named by the moved file's reuse index (each local id to the
/// physical id `remap` gives it). Returns the table, its store and the old stem.
async fn reusing_table(remap: impl Fn(u32) -> u32) -> (Table, Arc<dyn ObjectStore>, String) {
    let (table, store) = crate::blob::blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    let version = table.store().latest_version().await.unwrap().unwrap();
    let manifest_path = table.store().manifest_path(version);
    let mut manifest = Manifest::decode(manifest_path.as_ref(), &get(&store, &manifest_path).await)
        .and_then(|m| m.resolve(&Default::default()))
        .unwrap();
    let file = &mut manifest.fragments[0].files[0];
    let old = file.path.as_str().to_string();
    let stem = old.trim_end_matches(".parquet").to_string();
    let sidecars: Vec<u32> = store
        .list(Some(&Path::from(format!("t/{stem}"))))
        .map_ok(|m| {
            let name = m
                .location
                .filename()
                .unwrap()
                .trim_end_matches(".blob")
                .to_string();
            u32::from_str_radix(&name, 16).unwrap()
        })
        .try_collect()
        .await
        .unwrap();
    assert!(sidecars.len() > 2, "values of every kind: {sidecars:?}");
    let moved = "data/reused.parquet";
    let bytes = get(&store, &Path::from(format!("t/{old}"))).await;
    store
        .put(&Path::from(format!("t/{moved}")), PutPayload::from(bytes))
        .await
        .unwrap();
    store.delete(&Path::from(format!("t/{old}"))).await.unwrap();
    file.path = TablePath::parse(moved).unwrap();
    file.blob_reuse_index = Some(
        BlobReuseIndex::new(vec![BlobReuseSource {
            directory: TablePath::parse(&stem).unwrap(),
            local_ids: sidecars.clone(),
            physical_ids: sidecars.iter().map(|&id| remap(id)).collect(),
        }])
        .unwrap(),
    );
    let encoded = manifest.encode();
    store
        .put(&manifest_path, PutPayload::from(Bytes::from(encoded)))
        .await
        .unwrap();
    let table = Table::open(store.clone(), "t".into());
    (table, store, stem)
}

#[tokio::test]
async fn values_resolve_through_a_reuse_index_and_cleanup_keeps_what_it_names() {
    let (table, store, stem) = reusing_table(|id| id).await;
    let snapshot = table.latest().await.unwrap();
    // Every value right, whole and past a filter (deferred resolution) and by range.
    let rows = read_blobs(&snapshot).await.unwrap();
    assert_eq!(rows.len(), 40);
    let filtered = ScanRequest::new().filter(crate::common::KeyModulo::new(8, 7));
    let kept: Vec<arrow::array::RecordBatch> = snapshot
        .scan(filtered)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let kept_rows: usize = kept.iter().map(|b| b.num_rows()).sum();
    assert_eq!(kept_rows, 5);
    for (id, place) in snapshot.blob_places("img").await.unwrap() {
        let key = id.as_u64() as i64;
        match (value_of(key), &place.range) {
            (Some(v), Some(_)) if v.len() >= SMALL.inline_limit as usize => {
                let object = place.object.as_deref().unwrap();
                assert!(object.contains(&stem), "{key}: {object}");
                let bytes = snapshot
                    .read_blob_ranges("img", &[(id, 1..v.len() as u64)])
                    .await
                    .unwrap();
                assert_eq!(&bytes[0][..], &v[1..]);
            }
            _ => {}
        }
    }
    // Writes go on; cleanup keeps the sidecars the index names after their own data file
    // is gone, and removes them once no retained file names them.
    table.append(vec![blob_batch(40..41)]).await.unwrap();
    let policy = crate::faults::keep_last(1);
    table.cleanup(policy.clone()).await.unwrap();
    let left = |store: Arc<dyn ObjectStore>, stem: String| async move {
        let listed: Vec<_> = (store.list(Some(&Path::from(format!("t/{stem}")))))
            .try_collect()
            .await
            .unwrap();
        listed.len()
    };
    assert!(
        left(store.clone(), stem.clone()).await > 0,
        "cleanup removed reused sidecars"
    );
    assert_eq!(
        read_blobs(&table.latest().await.unwrap())
            .await
            .unwrap()
            .len(),
        41
    );
    table
        .delete_where(crate::common::key_matches(|k| k < 40))
        .await
        .unwrap();
    table
        .compact(natal::CompactOptions::default())
        .await
        .unwrap();
    table.cleanup(policy).await.unwrap();
    assert_eq!(
        left(store.clone(), stem.clone()).await,
        0,
        "no file names them now"
    );
    assert_eq!(
        read_blobs(&table.latest().await.unwrap())
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_reused_sidecar_that_is_gone_is_corrupt_naming_both_files() {
    // Local id 0 mapped to a sidecar never written.
    let (table, _store, _) = reusing_table(|id| if id == 0 { 9999 } else { id }).await;
    let snapshot = table.latest().await.unwrap();
    let error = read_blobs(&snapshot).await.unwrap_err();
    let Error::Corrupt { path, reason } = &error else {
        panic!("{error:?}");
    };
    assert!(path.ends_with(".blob"), "{path}");
    assert!(reason.contains("data/reused.parquet"), "{reason}");
}

/// Compaction reuses sidecars across cleanups; a repack (`reuse_blob_sidecars: false`)
/// copies the values into the new file's own sidecars, and cleanup then removes the old ones.
#[tokio::test]
async fn a_repack_copies_values_and_cleanup_then_removes_the_old_sidecars() {
    let (table, store) = crate::blob::blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    table.append(vec![blob_batch(40..80)]).await.unwrap();
    let written = sidecars(&store).await;
    let policy = crate::faults::keep_last(1);
    let compact = |reuse: bool| natal::CompactOptions {
        max_deleted_fraction: 0.0,
        reuse_blob_sidecars: reuse,
        ..Default::default()
    };
    table.compact(compact(true)).await.unwrap();
    table.cleanup(policy.clone()).await.unwrap();
    assert_eq!(sidecars(&store).await, written, "reused, none copied");
    assert_eq!(
        read_blobs(&table.latest().await.unwrap())
            .await
            .unwrap()
            .len(),
        80
    );
    table
        .delete_where(crate::common::key_matches(|k| k == 0))
        .await
        .unwrap();
    table.compact(compact(false)).await.unwrap();
    table.cleanup(policy).await.unwrap();
    let left = sidecars(&store).await;
    assert!(!left.is_empty());
    assert!(
        left.iter().all(|s| !written.contains(s)),
        "old sidecars outlived the repack: {left:?}"
    );
    let rows = read_blobs(&table.latest().await.unwrap()).await.unwrap();
    assert_eq!(rows.len(), 79);
    let latest = table.latest().await.unwrap();
    let files = latest.manifest().fragments.iter().flat_map(|f| &f.files);
    assert!(files.into_iter().all(|d| d.blob_reuse_index.is_none()));
}

/// A delete committed while a compaction with reuse runs: the compaction rebases (the row
/// stays deleted), and cleanup after it leaves every live value readable — no descriptor
/// names a sidecar cleanup removed.
#[tokio::test]
async fn a_delete_during_a_reusing_compaction_rebases_and_cleanup_keeps_every_value() {
    let (table, _) = crate::blob::blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    table.append(vec![blob_batch(40..80)]).await.unwrap();
    let planned = table.planned_at(table.latest().await.unwrap());
    table
        .delete_where(crate::common::key_matches(|k| k % 10 == 7))
        .await
        .unwrap();
    let compacted = planned
        .compact(natal::CompactOptions::default())
        .await
        .unwrap();
    assert!(compacted.published);
    table.cleanup(crate::faults::keep_last(1)).await.unwrap();
    let latest = table.latest().await.unwrap();
    let rows = read_blobs(&latest).await.unwrap();
    let expected: Vec<i64> = (0..80).filter(|k| k % 10 != 7).collect();
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), expected);
    let files = latest.manifest().fragments.iter().flat_map(|f| &f.files);
    assert!(files.into_iter().any(|d| d.blob_reuse_index.is_some()));
}

/// `Snapshot::blob_sidecars` counts the live and dead bytes of every sidecar the version's
/// values are in, its files' own and those their indexes name: deleted rows' values are dead
/// bytes until a repack.
#[tokio::test]
async fn sidecars_report_their_live_and_dead_bytes_across_reuse() {
    let (table, _) = crate::blob::blob_table().await;
    table.append(vec![blob_batch(0..40)]).await.unwrap();
    let in_sidecars = |keys: &mut dyn Iterator<Item = i64>| -> u64 {
        keys.filter_map(value_of)
            .map(|v| v.len() as u64)
            .filter(|&n| n >= SMALL.inline_limit)
            .sum()
    };
    let total = in_sidecars(&mut (0..40));
    let usage = table.latest().await.unwrap().blob_sidecars().await.unwrap();
    assert_eq!(usage.iter().map(|u| u.size).sum::<u64>(), total);
    assert_eq!(usage.iter().map(|u| u.dead_bytes()).sum::<u64>(), 0);
    table
        .delete_where(crate::common::key_matches(|k| k % 8 == 4))
        .await
        .unwrap();
    table
        .compact(natal::CompactOptions {
            max_deleted_fraction: 0.0,
            repack_below_live_fraction: 0.0,
            ..Default::default()
        })
        .await
        .unwrap();
    let latest = table.latest().await.unwrap();
    let files = latest.manifest().fragments.iter().flat_map(|f| &f.files);
    assert!(files.into_iter().any(|d| d.blob_reuse_index.is_some()));
    let usage = latest.blob_sidecars().await.unwrap();
    let live = in_sidecars(&mut (0..40).filter(|k| k % 8 != 4));
    assert_eq!(usage.iter().map(|u| u.live_bytes).sum::<u64>(), live);
    assert_eq!(usage.iter().map(|u| u.size).sum::<u64>(), total);
    assert_eq!(
        usage.iter().map(|u| u.dead_bytes()).sum::<u64>(),
        total - live
    );
}

/// A pack mostly dead is repacked by a reusing compaction: its live values are copied into
/// the new file's sidecars and cleanup then removes it; packs mostly live stay reused. A
/// threshold out of range is refused with nothing committed.
#[tokio::test]
async fn compaction_repacks_packs_whose_values_are_mostly_dead() {
    let (table, _) = crate::blob::blob_table().await;
    table.append(vec![blob_batch(0..80)]).await.unwrap();
    // The 640- and 999-byte values: most of each pack's bytes.
    table
        .delete_where(crate::common::key_matches(|k| k % 8 == 4 || k % 8 == 5))
        .await
        .unwrap();
    let mostly_live =
        |usage: &[natal::SidecarUsage]| usage.iter().all(|u| u.live_bytes * 2 >= u.size);
    let before = table.latest().await.unwrap().blob_sidecars().await.unwrap();
    assert!(!mostly_live(&before), "{before:?}");
    let version = table.latest().await.unwrap().version();
    let bad = natal::CompactOptions {
        repack_below_live_fraction: 1.5,
        ..Default::default()
    };
    let error = table.compact(bad).await.unwrap_err();
    assert!(error.to_string().contains("fraction"), "{error}");
    assert_eq!(table.latest().await.unwrap().version(), version);
    table
        .compact(natal::CompactOptions::default())
        .await
        .unwrap();
    table.cleanup(crate::faults::keep_last(1)).await.unwrap();
    let latest = table.latest().await.unwrap();
    let after = latest.blob_sidecars().await.unwrap();
    assert!(mostly_live(&after), "{after:?}");
    let rows = read_blobs(&latest).await.unwrap();
    let expected: Vec<i64> = (0..80).filter(|k| k % 8 != 4 && k % 8 != 5).collect();
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), expected);
}
