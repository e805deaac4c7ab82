//! Tiered merging of small fragments (`TableOptions::merge`): the number of small fragments
//! stays bounded under many small updates, rows keep their ids and values, and every
//! version a write published still reads as it did. (The model test runs every operation
//! with merging on as well.)

use std::collections::BTreeMap;

use natal::RowId;
use natal::{Table, TableOptions, TieredMerge};

use crate::common::*;

const FRAGMENT_ROWS: u64 = 64;

/// Fragments with fewer than half the table's rows per fragment.
async fn small_fragments(table: &Table) -> usize {
    let snapshot = table.latest().await.unwrap();
    snapshot
        .manifest()
        .fragments
        .iter()
        .filter(|f| (f.physical_rows as u64) < FRAGMENT_ROWS / 2)
        .count()
}

/// Every live row of `snapshot`: id → (key, val).
async fn values(snapshot: &natal::Snapshot) -> BTreeMap<u64, (i64, i64)> {
    read_rows(snapshot)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, r)| (id, (r.key, r.val)))
        .collect()
}

/// 128 rows, then 60 updates of 1–3 rows each; returns the most small fragments seen after
/// any update, checking every row's id and value against a map as it goes.
async fn small_updates(merge: Option<TieredMerge>) -> usize {
    let (table, _) = memory_table_with(TableOptions {
        max_rows_per_fragment: FRAGMENT_ROWS,
        merge,
        ..Default::default()
    })
    .await;
    let rows: Vec<(i64, i64)> = (0..128).map(|k| (k, 0)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let mut expected = values(&table.latest().await.unwrap()).await;
    let ids: Vec<u64> = expected.keys().copied().collect();
    let mut published = Vec::new();
    let mut most_small = 0;
    for step in 0..60u64 {
        let picked: Vec<u64> = (0..=step % 3)
            .map(|i| ids[((step * 37 + i * 11) % 128) as usize])
            .collect();
        let row_ids: Vec<RowId> = picked.iter().map(|&id| RowId::from_u64(id)).collect();
        let committed = table.update_rows(&row_ids, &add_to_val(1)).await.unwrap();
        for id in &picked {
            expected.get_mut(id).unwrap().1 += 1;
        }
        published.push((committed.version, expected.clone()));
        let actual = values(&table.latest().await.unwrap()).await;
        assert_eq!(actual, expected, "after update {step}");
        most_small = most_small.max(small_fragments(&table).await);
    }
    // Merges publish versions of their own; each write's version still reads as it did.
    for (version, state) in published {
        let old = values(&table.at_version(version).await.unwrap()).await;
        assert_eq!(old, state, "version {version}");
    }
    most_small
}

#[tokio::test]
async fn tiered_merging_keeps_small_fragments_bounded() {
    // Small fragments hold 1..=31 rows: tiers in base 4 are 1–3, 4–15 and 16–31 rows, and
    // each keeps at most three fragments waiting.
    let merged = small_updates(Some(TieredMerge { fan_in: 4 })).await;
    assert!(merged <= 9, "{merged} small fragments with merging");
    let unmerged = small_updates(None).await;
    assert!(unmerged >= 50, "{unmerged} small fragments without merging");
}

#[tokio::test]
async fn merges_publish_their_own_versions_after_a_write() {
    let (table, _) = memory_table_with(TableOptions {
        max_rows_per_fragment: FRAGMENT_ROWS,
        merge: Some(TieredMerge { fan_in: 2 }),
        ..Default::default()
    })
    .await;
    let first = table.append(vec![batch(&[(1, 0)])]).await.unwrap();
    // One small fragment: nothing to merge.
    assert_eq!(table.latest().await.unwrap().version(), first.version);
    let second = table.append(vec![batch(&[(2, 0)])]).await.unwrap();
    // Two one-row fragments of tier 0 merge into one, published right after the append.
    let latest = table.latest().await.unwrap();
    assert_eq!(latest.version(), second.version + 1);
    assert_eq!(latest.manifest().fragments.len(), 1);
    let rows = read_rows(&latest).await.unwrap();
    let before = read_rows(&table.at_version(second.version).await.unwrap())
        .await
        .unwrap();
    let keys = |rows: &BTreeMap<u64, Row>| -> Vec<(u64, i64)> {
        rows.iter().map(|(id, r)| (*id, r.key)).collect()
    };
    assert_eq!(keys(&rows), keys(&before), "ids and keys survive the merge");
}

/// A merge that fails (here: every store request from the n-th on, for every n) leaves the
/// write before it committed and whole: the write reports success exactly when its own
/// version was published, and the table reads every row it wrote.
#[tokio::test]
async fn a_failed_merge_leaves_the_write_committed() {
    use std::sync::Arc;

    use natal::internals::io::InstrumentedStore;
    use object_store::memory::InMemory;
    use object_store::ObjectStore;

    let mut n = 1u64;
    loop {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let instrumented = Arc::new(InstrumentedStore::new(inner.clone()));
        let options = TableOptions {
            max_rows_per_fragment: 4,
            merge: Some(TieredMerge { fan_in: 2 }),
            ..Default::default()
        };
        let table = Table::create(instrumented.clone(), "t".into(), &schema(), options)
            .await
            .unwrap();
        let first = table.append(vec![batch(&[(1, 1)])]).await.unwrap();
        instrumented.reset();
        instrumented.fail_from(n);
        // Two one-row fragments: the append is followed by a merge of both.
        let result = table.append(vec![batch(&[(2, 2)])]).await;
        let requests = instrumented.tally().total();
        instrumented.heal();
        let latest = Table::open(inner.clone(), "t".into())
            .latest()
            .await
            .unwrap();
        let keys: Vec<i64> = read_rows(&latest)
            .await
            .unwrap()
            .values()
            .map(|r| r.key)
            .collect();
        match result {
            Ok(second) => {
                assert_eq!(keys, [1, 2], "failure at request {n}");
                // The merge published, or nothing after the append did.
                assert!(
                    latest.version() == second.version || latest.version() == second.version + 1,
                    "failure at request {n}: latest {}",
                    latest.version()
                );
                let merged = latest.version() == second.version + 1;
                assert_eq!(
                    latest.manifest().fragments.len(),
                    if merged { 1 } else { 2 }
                );
                if requests < n {
                    assert!(merged, "no failure, yet no merge");
                    break;
                }
            }
            Err(_) => {
                assert_eq!(keys, [1], "failure at request {n}");
                assert_eq!(latest.version(), first.version, "failure at request {n}");
            }
        }
        n += 1;
    }
}
