//! A store that passes every request through but for scripted moments, for tests of what a
//! commit does when the store misbehaves at one point:
//! - before its first deletion of a manifest, it runs a hook (another writer committing then);
//! - its next manifest PUT suffers a [`PutFault`].

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// What the next manifest PUT suffers.
pub enum PutFault {
    /// The store keeps the manifest, then the request fails.
    StoredThenFailed,
    /// Another writer commits first (the future), then the request fails without storing.
    LostThenFailed(BoxFuture<'static, ()>),
    /// The store keeps the manifest, the response is lost, and the client's retry of the
    /// PUT is refused by it: `AlreadyExists` (an HTTP client after a 5xx).
    StoredThenRefused,
}

/// See the module header.
pub struct ScriptedStore {
    inner: Arc<dyn ObjectStore>,
    before_manifest_delete: Arc<Mutex<Option<BoxFuture<'static, ()>>>>,
    manifest_put: Mutex<Option<PutFault>>,
}

impl ScriptedStore {
    /// Passes everything through to `inner`, until scripted.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            before_manifest_delete: Arc::new(Mutex::new(None)),
            manifest_put: Mutex::new(None),
        }
    }

    /// Runs `hook` before the first deletion of a manifest.
    pub fn before_first_manifest_delete(self, hook: BoxFuture<'static, ()>) -> Self {
        *self.before_manifest_delete.lock().expect("hook") = Some(hook);
        self
    }

    /// The next manifest PUT suffers `fault`.
    pub fn on_next_manifest_put(self, fault: PutFault) -> Self {
        *self.manifest_put.lock().expect("fault") = Some(fault);
        self
    }
}

fn is_manifest(path: &Path) -> bool {
    path.as_ref().contains("_versions/")
}

fn dropped_connection() -> object_store::Error {
    object_store::Error::Generic {
        store: "test",
        source: "connection reset after the request body was sent".into(),
    }
}

impl std::fmt::Debug for ScriptedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for ScriptedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScriptedStore({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for ScriptedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let fault = match is_manifest(location) {
            true => self.manifest_put.lock().expect("fault").take(),
            false => None,
        };
        match fault {
            None => self.inner.put_opts(location, payload, opts).await,
            Some(PutFault::StoredThenFailed) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(dropped_connection())
            }
            Some(PutFault::LostThenFailed(other)) => {
                other.await;
                Err(dropped_connection())
            }
            Some(PutFault::StoredThenRefused) => {
                self.inner
                    .put_opts(location, payload.clone(), opts.clone())
                    .await?;
                self.inner.put_opts(location, payload, opts).await
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
        let hook = self.before_manifest_delete.clone();
        let hooked = locations.then(move |path| {
            let hook = hook.clone();
            async move {
                let pending = match path.as_ref().is_ok_and(is_manifest) {
                    true => hook.lock().expect("hook").take(),
                    false => None,
                };
                if let Some(pending) = pending {
                    pending.await;
                }
                path
            }
        });
        self.inner.delete_stream(hooked.boxed())
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
