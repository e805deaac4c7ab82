//! Ambiguous commit outcomes: a manifest PUT that fails after the store kept it (a timeout, a
//! connection dropped after the body was sent) is read back, so a commit that landed is never
//! reported failed and never published twice; one that lost to another writer rebases.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::FutureExt;
use natal::Table;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::common::*;

/// What the next manifest PUT suffers.
enum Fault {
    /// The store keeps the manifest, then the request fails.
    StoredThenFailed,
    /// Another writer commits first (the future), then the request fails without storing.
    LostThenFailed(BoxFuture<'static, ()>),
}

/// A store whose next manifest PUT (under `_versions/`) suffers `fault`, once.
struct ManifestPutFault {
    inner: Arc<dyn ObjectStore>,
    fault: Mutex<Option<Fault>>,
}

impl std::fmt::Debug for ManifestPutFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for ManifestPutFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ManifestPutFault({})", self.inner)
    }
}

fn dropped_connection() -> object_store::Error {
    object_store::Error::Generic {
        store: "test",
        source: "connection reset after the request body was sent".into(),
    }
}

#[async_trait::async_trait]
impl ObjectStore for ManifestPutFault {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let fault = match location.as_ref().contains("_versions/") {
            true => self.fault.lock().expect("fault").take(),
            false => None,
        };
        match fault {
            None => self.inner.put_opts(location, payload, opts).await,
            Some(Fault::StoredThenFailed) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(dropped_connection())
            }
            Some(Fault::LostThenFailed(other)) => {
                other.await;
                Err(dropped_connection())
            }
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A table of two rows at version 2 on `inner`, and a handle on it through a store whose next
/// manifest PUT suffers `fault`.
async fn faulty_table(inner: Arc<dyn ObjectStore>, fault: Fault) -> Table {
    let table = Table::create(inner.clone(), "t".into(), &schema(), Default::default())
        .await
        .unwrap();
    table.append(vec![batch(&[(1, 1), (2, 2)])]).await.unwrap();
    let faulty: Arc<dyn ObjectStore> = Arc::new(ManifestPutFault {
        inner,
        fault: Mutex::new(Some(fault)),
    });
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
    let table = faulty_table(inner.clone(), Fault::StoredThenFailed).await;
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
    let table = faulty_table(inner.clone(), Fault::LostThenFailed(wins)).await;
    let committed = table.append(vec![batch(&[(3, 3)])]).await.unwrap();
    assert!(committed.published);
    assert_eq!(
        committed.version, 4,
        "rebased over the other writer's version 3"
    );
    let plain = Table::open(inner, "t".into());
    assert_eq!(keys(&plain).await, (4, vec![1, 2, 3, 9]));
}
