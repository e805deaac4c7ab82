//! [`InstrumentedStore`]: an `ObjectStore` wrapper that counts requests by kind, can fail
//! the Nth request, and can hold each request for a fixed latency (as a remote store would). Benchmarks use it to report requests per open; tests use it to prove the
//! request budget of opens and to inject a failure at every point of a workload.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream};
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Request counts, by kind.
#[derive(Debug, Default)]
pub struct RequestCounts {
    pub get: AtomicU64,
    pub put: AtomicU64,
    pub list: AtomicU64,
    pub delete: AtomicU64,
    pub other: AtomicU64,
    /// Bytes the GETs returned.
    pub bytes_read: AtomicU64,
}

/// The counts of an [`InstrumentedStore`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestTally {
    /// GET and ranged GET requests.
    pub get: u64,
    /// PUT requests (conditional or not).
    pub put: u64,
    /// LIST requests.
    pub list: u64,
    /// DELETE requests.
    pub delete: u64,
    /// Anything else (HEAD, copy, rename).
    pub other: u64,
    /// Bytes the GETs returned.
    pub bytes_read: u64,
}

impl RequestTally {
    /// Every request.
    pub fn total(&self) -> u64 {
        self.get + self.put + self.list + self.delete + self.other
    }
}

/// Counts every request and optionally fails the `fail_at`-th one (1-based) and every later
/// one, as a store that went away would.
#[derive(Debug)]
pub struct InstrumentedStore {
    inner: Arc<dyn ObjectStore>,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    counts: RequestCounts,
    seen: AtomicU64,
    fail_at: AtomicU64,
    /// Microseconds each request waits before it is sent.
    latency_micros: AtomicU64,
}

impl State {
    fn record(&self, kind: fn(&RequestCounts) -> &AtomicU64, location: &str) -> Result<()> {
        kind(&self.counts).fetch_add(1, Ordering::SeqCst);
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.fail_at.load(Ordering::SeqCst) {
            return Err(object_store::Error::Generic {
                store: "InstrumentedStore",
                source: format!("injected failure at request {n} ({location})").into(),
            });
        }
        Ok(())
    }

    /// Waits the set latency, if any.
    async fn wait(&self) {
        let micros = self.latency_micros.load(Ordering::Relaxed);
        if micros > 0 {
            tokio::time::sleep(std::time::Duration::from_micros(micros)).await;
        }
    }
}

impl InstrumentedStore {
    /// Counts the requests sent to `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            state: Arc::new(State {
                counts: RequestCounts::default(),
                seen: AtomicU64::new(0),
                fail_at: AtomicU64::new(u64::MAX),
                latency_micros: AtomicU64::new(0),
            }),
        }
    }

    /// Fails request number `n` (counting from 1 after this call) and all after it.
    pub fn fail_from(&self, n: u64) {
        self.state.seen.store(0, Ordering::SeqCst);
        self.state.fail_at.store(n.max(1), Ordering::SeqCst);
    }

    /// Holds every request for `latency` before sending it (20 ms: S3 in-region, roughly).
    pub fn set_latency(&self, latency: std::time::Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.state.latency_micros.store(micros, Ordering::Relaxed);
    }

    /// Stops failing.
    pub fn heal(&self) {
        self.state.fail_at.store(u64::MAX, Ordering::SeqCst);
    }

    /// The counts so far.
    pub fn tally(&self) -> RequestTally {
        let c = &self.state.counts;
        RequestTally {
            get: c.get.load(Ordering::SeqCst),
            put: c.put.load(Ordering::SeqCst),
            list: c.list.load(Ordering::SeqCst),
            delete: c.delete.load(Ordering::SeqCst),
            other: c.other.load(Ordering::SeqCst),
            bytes_read: c.bytes_read.load(Ordering::SeqCst),
        }
    }

    /// Sets every count to 0.
    pub fn reset(&self) {
        let c = &self.state.counts;
        for c in [&c.get, &c.put, &c.list, &c.delete, &c.other, &c.bytes_read] {
            c.store(0, Ordering::SeqCst);
        }
    }
}

impl fmt::Display for InstrumentedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instrumented({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for InstrumentedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.state.record(|c| &c.put, location.as_ref())?;
        self.state.wait().await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.state.record(|c| &c.put, location.as_ref())?;
        self.state.wait().await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.state.record(|c| &c.get, location.as_ref())?;
        self.state.wait().await;
        let result = self.inner.get_opts(location, options).await?;
        let bytes = result.range.end - result.range.start;
        self.state
            .counts
            .bytes_read
            .fetch_add(bytes, Ordering::SeqCst);
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.state.record(|c| &c.get, location.as_ref())?;
        self.state.wait().await;
        let got = self.inner.get_ranges(location, ranges).await?;
        let bytes: usize = got.iter().map(Bytes::len).sum();
        (self.state.counts.bytes_read).fetch_add(bytes as u64, Ordering::SeqCst);
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let state = self.state.clone();
        let checked = locations.then(move |path| {
            let state = state.clone();
            async move {
                let path = path.and_then(|p| state.record(|c| &c.delete, p.as_ref()).map(|_| p));
                state.wait().await;
                path
            }
        });
        self.inner.delete_stream(checked.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match self
            .state
            .record(|c| &c.list, prefix.map_or("", |p| p.as_ref()))
        {
            Ok(()) => {
                let state = self.state.clone();
                let listed = self.inner.list(prefix);
                stream::once(async move {
                    state.wait().await;
                    listed
                })
                .flatten()
                .boxed()
            }
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.state
            .record(|c| &c.list, prefix.map_or("", |p| p.as_ref()))?;
        self.state.wait().await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.state.record(|c| &c.other, from.as_ref())?;
        self.state.wait().await;
        self.inner.copy_opts(from, to, options).await
    }
}
