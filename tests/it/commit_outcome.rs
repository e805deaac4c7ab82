//! Ambiguous commit outcomes: a manifest PUT that fails after the store kept it (a timeout, a
//! connection dropped after the body was sent) is read back, so a commit that landed is never
//! reported failed and never published twice; one that lost to another writer rebases.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use natal::Table;
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::common::*;
use crate::scripted_store::{PutFault, ScriptedStore};

/// A table of two rows at version 2 on `inner`, and a handle on it through a store whose next
/// manifest PUT suffers `fault`.
async fn faulty_table(inner: Arc<dyn ObjectStore>, fault: PutFault) -> Table {
    let table = Table::create(inner.clone(), "t".into(), &schema(), Default::default())
        .await
        .unwrap();
    table.append(vec![batch(&[(1, 1), (2, 2)])]).await.unwrap();
    let faulty: Arc<dyn ObjectStore> =
        Arc::new(ScriptedStore::new(inner).on_next_manifest_put(fault));
    Table::open(faulty, "t".into())
}

/// The keys of the latest version, sorted, and its version.
async fn keys(table: &Table) -> (u64, Vec<i64>) {
    let snapshot = table.latest().await.unwrap();
    let mut keys: Vec<i64> = read_rows(&snapshot)
        .await
        .unwrap()
        .values()
        .map(|r| r.key)
        .collect();
    keys.sort_unstable();
    (snapshot.version(), keys)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_put_that_failed_after_landing_is_a_published_commit() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let table = faulty_table(inner.clone(), PutFault::StoredThenFailed).await;
    let committed = table.append(vec![batch(&[(3, 3)])]).await.unwrap();
    assert!(committed.published);
    assert_eq!(committed.version, 3);
    // Published once: version 3 holds the row, and no version 4 repeats it.
    let plain = Table::open(inner, "t".into());
    assert_eq!(keys(&plain).await, (3, vec![1, 2, 3]));
    let versions = plain.versions().await.unwrap();
    assert_eq!(versions.len(), 3);
    assert!(!versions[2].transaction.uuid.is_empty());
    assert_ne!(versions[1].transaction.uuid, versions[2].transaction.uuid);
}

/// Over HTTP, a client retries a PUT whose response was lost after the store kept it, and
/// the retry is refused by the version the first try wrote: the commit is found published,
/// not taken for a lost race and published again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_put_refused_by_its_own_earlier_try_is_a_published_commit() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let table = faulty_table(inner.clone(), PutFault::StoredThenRefused).await;
    let committed = table.append(vec![batch(&[(3, 3)])]).await.unwrap();
    assert!(committed.published);
    assert_eq!(committed.version, 3);
    let plain = Table::open(inner, "t".into());
    assert_eq!(keys(&plain).await, (3, vec![1, 2, 3]));
    assert_eq!(plain.versions().await.unwrap().len(), 3, "published once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_put_that_failed_while_another_writer_won_rebases() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let other = Table::open(inner.clone(), "t".into());
    let wins: BoxFuture<'static, ()> = async move {
        other
            .append(vec![batch(&[(9, 9)])])
            .await
            .expect("the other append");
    }
    .boxed();
    let table = faulty_table(inner.clone(), PutFault::LostThenFailed(wins)).await;
    let committed = table.append(vec![batch(&[(3, 3)])]).await.unwrap();
    assert!(committed.published);
    assert_eq!(
        committed.version, 4,
        "rebased over the other writer's version 3"
    );
    let plain = Table::open(inner, "t".into());
    assert_eq!(keys(&plain).await, (4, vec![1, 2, 3, 9]));
}
