//! Fault injection: fail the Nth object-store request of a scripted workload, for every N.
//! After each failure the table opens at the last committed version with every committed row,
//! and the failure surfaced as an error from the step that hit it.

use std::sync::Arc;
use std::time::Duration;

use natal::internals::io::InstrumentedStore;
use natal::RowId;
use natal::{CleanupPolicy, CompactOptions, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::common::*;

async fn workload_step(table: &Table, step: usize) -> natal::Result<()> {
    match step {
        0 => table
            .append(vec![batch(&[(1, 1), (2, 2), (3, 3)])])
            .await
            .map(drop),
        1 => table
            .update_where(key_matches(|k| k == 2), &add_to_val(10))
            .await
            .map(drop),
        2 => table.delete_where(key_matches(|k| k == 1)).await.map(drop),
        3 => table.append(vec![batch(&[(4, 4), (5, 5)])]).await.map(drop),
        4 => table
            .compact(CompactOptions {
                target_rows_per_fragment: Some(10),
                max_deleted_fraction: 0.1,
                ..Default::default()
            })
            .await
            .map(drop),
        5 => table.checkpoint().await.map(drop),
        6 => table
            .upsert("key", vec![batch(&[(4, 40), (6, 6)])])
            .await
            .map(drop),
        7 => table
            .delete_rows(&[RowId::from_u64(addr(1, 0))])
            .await
            .map(drop),
        8 => table.restore(4).await.map(drop),
        9 => table.overwrite(vec![batch(&[(7, 7)])]).await.map(drop),
        10 => {
            let policy = CleanupPolicy {
                keep_versions: 3,
                keep_newer_than: Duration::ZERO,
                min_file_age: Duration::ZERO,
            };
            table.cleanup(policy).await.map(drop)
        }
        _ => unreachable!(),
    }
}
const STEPS: usize = 11;

#[tokio::test]
async fn every_failed_request_leaves_the_last_committed_version_whole() {
    let mut n = 1u64;
    loop {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let instrumented = Arc::new(InstrumentedStore::new(inner.clone()));
        let options = TableOptions {
            max_rows_per_fragment: 2,
            // Every carried sequence and the fragment list get files, so failures hit
            // those writes too.
            layout: natal::ManifestLayout {
                row_ids_inline_limit: 0,
                fragments_per_segment: 2,
            },
            // A failed merge is not its write's error (tests/it/merge.rs checks that); here
            // every failure must surface from the step that hit it.
            merge: None,
            ..Default::default()
        };
        let table = Table::create(instrumented.clone(), "t".into(), &schema(), options)
            .await
            .unwrap();
        let healthy = Table::open(inner.clone(), "t".into());
        let mut committed = read_rows(&healthy.latest().await.unwrap()).await.unwrap();
        let mut committed_version = 1;
        instrumented.reset();
        instrumented.fail_from(n);
        let mut failed = false;
        for step in 0..STEPS {
            let before = instrumented.tally().total();
            let result = workload_step(&table, step).await;
            // Did this step issue the failing request?
            let hit = before < n && instrumented.tally().total() >= n;
            match result {
                Ok(()) => {
                    assert!(!hit, "step {step} swallowed the failure of request {n}");
                    let latest = healthy.latest().await.unwrap();
                    committed_version = latest.version();
                    committed = read_rows(&latest).await.unwrap();
                }
                Err(e) => {
                    assert!(hit, "step {step} failed without an injected failure: {e}");
                    failed = true;
                    break;
                }
            }
        }
        instrumented.heal();
        let reopened = Table::open(inner.clone(), "t".into());
        let latest = reopened.latest().await.unwrap();
        assert_eq!(
            latest.version(),
            committed_version,
            "failure at request {n}"
        );
        assert_eq!(
            read_rows(&latest).await.unwrap(),
            committed,
            "failure at request {n}"
        );
        // The healed table takes writes again.
        reopened.append(vec![batch(&[(100, 100)])]).await.unwrap();
        if !failed {
            assert!(n > 20, "the workload issues requests");
            break;
        }
        n += 1;
    }
}
