//! An S3-compatible server in the test process: `s3s` (the S3 protocol: SigV4, XML, ranged
//! GETs, LIST pagination, multipart, conditional PUT, server-side copy) over a local directory through
//! `object_store`'s `LocalFileSystem`, whose create-if-absent is a hard link — atomic, so a
//! put with `If-None-Match: *` has one winner however many race. Each top-level directory is
//! a bucket. Bound to 127.0.0.1 on an ephemeral port; it stops with the runtime it runs on.
//!
//! It can fail a chosen request ([`Fault`]), for the fault-injection tests. Used by the `it`
//! tests and `examples/s3_server.rs` (which includes this file): it names nothing else of
//! the tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, S3};

/// The credentials the server accepts: requests made with them are counted and may be
/// failed ([`S3Server::fail_request`]).
pub const ACCESS_KEY: &str = "natal-test";
pub const SECRET_KEY: &str = "natal-test-secret";
/// Credentials whose requests are never counted nor failed: a test's own look at the data.
pub const OBSERVER_KEY: &str = "natal-observer";
pub const OBSERVER_SECRET: &str = "natal-observer-secret";
/// The region clients sign for (the server takes any).
pub const REGION: &str = "us-east-1";

/// What the server does to the request it is told to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 503 SlowDown, as S3 throttles.
    SlowDown,
    /// 500 InternalError.
    Internal,
    /// Stores a PUT's object, then answers 500: the client cannot tell it landed.
    StoredThenFailed,
    /// Stores a PUT's object, then closes the connection with no answer at all.
    StoredThenDropped,
    /// Waits this long before handling it (past a client's timeout).
    Delay(Duration),
}

/// Which requests fail, counted from 1 over the requests the server receives with
/// [`ACCESS_KEY`].
#[derive(Debug, Default)]
struct Faults {
    seen: AtomicU64,
    /// The request that fails, how, and whether every request after it fails too.
    planned: Mutex<Option<(u64, Fault, bool)>>,
    /// Connections closed unanswered ([`Fault::StoredThenDropped`]).
    dropped: AtomicU64,
}

impl Faults {
    /// The fault to apply to the request arriving now, if it is one planned.
    fn next(&self) -> Option<Fault> {
        let at = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        let planned = self.planned.lock().ok()?;
        planned.and_then(|(n, fault, onwards)| (n == at || onwards && at > n).then_some(fault))
    }

    fn plan(&self, planned: Option<(u64, Fault, bool)>) {
        if let Ok(mut slot) = self.planned.lock() {
            *slot = planned;
        }
    }
}

tokio::task_local! {
    /// Wakes the task serving the connection a request came on, to close it unanswered
    /// (hyper runs an HTTP/1 connection's handlers inside that task).
    static DROP_CONNECTION: Arc<tokio::sync::Notify>;
}

/// Closes the connection the current request came on, never answering it.
async fn drop_connection() -> S3Error {
    if let Ok(dropped) = DROP_CONNECTION.try_with(|d| d.clone()) {
        dropped.notify_one();
        std::future::pending::<()>().await;
    }
    s3_error!(
        InternalError,
        "injected: the connection could not be dropped"
    )
}

/// A running server.
#[derive(Debug, Clone)]
pub struct S3Server {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    faults: Arc<Faults>,
    /// The temporary directory holding the buckets, if the server made it (kept while the
    /// server lives).
    _dir: Option<Arc<tempfile::TempDir>>,
}

impl S3Server {
    /// Starts a server holding the empty buckets `buckets`, listing at most `page` keys per
    /// LIST response (S3's is 1,000; smaller pages make clients paginate).
    pub async fn start(buckets: &[&str], page: usize) -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut server = Self::start_in(dir.path(), buckets, page).await?;
        server._dir = Some(Arc::new(dir));
        Ok(server)
    }

    /// Starts a server whose buckets are the directories under `dir`, `buckets` among them
    /// (made if missing): objects written there beforehand are the buckets' objects.
    pub async fn start_in(
        dir: &std::path::Path,
        buckets: &[&str],
        page: usize,
    ) -> std::io::Result<Self> {
        for bucket in buckets {
            std::fs::create_dir_all(dir.join(bucket))?;
        }
        let faults = Arc::new(Faults::default());
        let backend = Backend {
            store: Arc::new(LocalFileSystem::new_with_prefix(dir)?),
            root: dir.to_path_buf(),
            page: page.max(1),
            uploads: Default::default(),
            faults: faults.clone(),
        };
        let service = {
            let mut builder = s3s::service::S3ServiceBuilder::new(backend);
            let mut auth = s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY);
            auth.register(OBSERVER_KEY.into(), OBSERVER_SECRET.into());
            builder.set_auth(auth);
            builder.build()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let service = service.clone();
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(socket);
                    let connection =
                        hyper::server::conn::http1::Builder::new().serve_connection(io, service);
                    // A handler that drops its connection wakes this; dropping the
                    // connection's future closes the socket with the answer unsent.
                    let dropped = Arc::new(tokio::sync::Notify::new());
                    let served = DROP_CONNECTION.scope(dropped.clone(), async move {
                        tokio::select! {
                            _ = connection => {}
                            _ = dropped.notified() => {}
                        }
                    });
                    served.await;
                });
            }
        });
        Ok(Self {
            endpoint,
            faults,
            _dir: None,
        })
    }

    /// Fails the `n`th request from now (1: the next) with `fault`.
    pub fn fail_request(&self, n: u64, fault: Fault) {
        let seen = self.faults.seen.load(Ordering::SeqCst);
        self.faults.plan(Some((seen + n, fault, false)));
    }

    /// Fails the `n`th request from now and every one after it with `fault`: an outage.
    pub fn fail_from(&self, n: u64, fault: Fault) {
        let seen = self.faults.seen.load(Ordering::SeqCst);
        self.faults.plan(Some((seen + n, fault, true)));
    }

    /// Connections closed unanswered so far.
    pub fn connections_dropped(&self) -> u64 {
        self.faults.dropped.load(Ordering::SeqCst)
    }

    /// Requests counted so far.
    pub fn requests(&self) -> u64 {
        self.faults.seen.load(Ordering::SeqCst)
    }

    /// A client of `bucket` whose requests are never counted nor failed.
    pub fn observer(&self, bucket: &str) -> object_store::Result<AmazonS3> {
        client(&self.endpoint, bucket, (OBSERVER_KEY, OBSERVER_SECRET))
    }

    /// The environment a client (the CLI, datafusion-cli, `AmazonS3Builder::from_env`)
    /// reaches this server with.
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        environment(&self.endpoint, (ACCESS_KEY, SECRET_KEY))
    }

    /// A client of `bucket` as a user configures one (see [`client`]).
    pub fn client(&self, bucket: &str) -> object_store::Result<AmazonS3> {
        client(&self.endpoint, bucket, (ACCESS_KEY, SECRET_KEY))
    }

    /// Clears the faults planned: every request succeeds again.
    pub fn clear_fault(&self) {
        self.faults.plan(None);
    }
}

/// The environment that reaches `endpoint` with `keys`.
pub fn environment(endpoint: &str, keys: (&str, &str)) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", endpoint.to_string()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", keys.0.to_string()),
        ("AWS_SECRET_ACCESS_KEY", keys.1.to_string()),
    ]
}

/// `command` (a process the tests start) with none of the machine's AWS settings, no
/// instance-metadata lookups, and `environment` instead.
pub fn with_environment(
    command: &mut std::process::Command,
    environment: &[(&'static str, String)],
) {
    for (key, _) in std::env::vars() {
        if key.starts_with("AWS_") {
            command.env_remove(key);
        }
    }
    command
        .envs(environment.iter().map(|(k, v)| (*k, v.as_str())))
        .env("AWS_EC2_METADATA_DISABLED", "true");
}

/// The S3 endpoint the tests use: the external one the environment names
/// (`NATAL_TEST_S3_ENDPOINT`, `NATAL_TEST_S3_BUCKET`, default `natal`, with `AWS_ACCESS_KEY_ID`
/// and `AWS_SECRET_ACCESS_KEY`), or bucket `natal` of a new in-process server.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The in-process server, when no external endpoint is given.
    pub server: Option<S3Server>,
    pub url: String,
    pub bucket: String,
    /// Access key and secret key.
    pub keys: (String, String),
}

impl Endpoint {
    pub async fn from_env_or_start() -> std::io::Result<Self> {
        if let Ok(url) = std::env::var("NATAL_TEST_S3_ENDPOINT") {
            let key = |name| std::env::var(name).unwrap_or_default();
            return Ok(Self {
                server: None,
                url,
                bucket: std::env::var("NATAL_TEST_S3_BUCKET").unwrap_or("natal".into()),
                keys: (key("AWS_ACCESS_KEY_ID"), key("AWS_SECRET_ACCESS_KEY")),
            });
        }
        let server = S3Server::start(&["natal"], 50).await?;
        Ok(Self {
            url: server.endpoint.clone(),
            server: Some(server),
            bucket: "natal".into(),
            keys: (ACCESS_KEY.into(), SECRET_KEY.into()),
        })
    }

    /// The environment that reaches it.
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        environment(&self.url, (&self.keys.0, &self.keys.1))
    }

    /// A client of its bucket (see [`client`]).
    pub fn client(&self) -> object_store::Result<AmazonS3> {
        client(&self.url, &self.bucket, (&self.keys.0, &self.keys.1))
    }
}

/// A client of `bucket` at `endpoint` with `keys`, as a user configures one, but with
/// retries cut to a few quick ones and a 3 s timeout (object_store's defaults retry a
/// failing request for up to 3 minutes, each try waiting up to 30 s).
pub fn client(
    endpoint: &str,
    bucket: &str,
    (access_key, secret_key): (&str, &str),
) -> object_store::Result<AmazonS3> {
    let retry = object_store::RetryConfig {
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(100),
            base: 2.0,
        },
    };
    AmazonS3Builder::new()
        .with_client_options(
            object_store::ClientOptions::new().with_timeout(Duration::from_secs(3)),
        )
        .with_bucket_name(bucket)
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_region(REGION)
        .with_access_key_id(access_key)
        .with_secret_access_key(secret_key)
        .with_retry(retry)
        .build()
}

/// A multipart upload in progress: its bucket, key, and parts by number.
type Upload = (String, String, BTreeMap<i32, Bytes>);

/// The server's storage: `<root>/<bucket>/<key>`.
struct Backend {
    store: Arc<LocalFileSystem>,
    root: std::path::PathBuf,
    page: usize,
    /// Multipart uploads in progress, by id.
    uploads: Mutex<HashMap<String, Upload>>,
    faults: Arc<Faults>,
}

fn internal(e: impl std::fmt::Display) -> S3Error {
    S3Error::with_message(S3ErrorCode::InternalError, e.to_string())
}

fn object_error(e: object_store::Error) -> S3Error {
    match e {
        object_store::Error::NotFound { .. } => s3_error!(NoSuchKey),
        object_store::Error::AlreadyExists { .. } => {
            s3_error!(PreconditionFailed, "the object exists (If-None-Match: *)")
        }
        other => internal(other),
    }
}

fn etag(meta_tag: Option<String>) -> Option<ETag> {
    meta_tag.map(|t| ETag::Strong(t.trim_matches('"').to_string()))
}

impl Backend {
    /// The object path of `key` in `bucket`, which must exist.
    fn path(&self, bucket: &str, key: &str) -> S3Result<Path> {
        self.bucket(bucket)?;
        Path::parse(format!("{bucket}/{key}")).map_err(|e| s3_error!(InvalidArgument, "{e}"))
    }

    fn bucket(&self, bucket: &str) -> S3Result<()> {
        match self.root.join(bucket).is_dir() {
            true => Ok(()),
            false => Err(s3_error!(NoSuchBucket)),
        }
    }

    /// Applies the fault planned for a request made with `credentials`: an error to answer,
    /// or a delay. The observer's requests are neither counted nor failed.
    async fn fault(&self, credentials: &Option<s3s::auth::Credentials>) -> S3Result<Option<Fault>> {
        if credentials
            .as_ref()
            .is_some_and(|c| c.access_key == OBSERVER_KEY)
        {
            return Ok(None);
        }
        match self.faults.next() {
            Some(Fault::SlowDown) => Err(s3_error!(SlowDown, "injected")),
            Some(Fault::Internal) => Err(s3_error!(InternalError, "injected")),
            Some(Fault::Delay(delay)) => {
                tokio::time::sleep(delay).await;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// Stores `bytes` at `path`: only if absent when `create`.
    async fn store(&self, path: &Path, bytes: Bytes, create: bool) -> S3Result<Option<ETag>> {
        let mode = match create {
            true => PutMode::Create,
            false => PutMode::Overwrite,
        };
        let options = PutOptions::from(mode);
        let put = (self.store)
            .put_opts(path, PutPayload::from(bytes), options)
            .await
            .map_err(object_error)?;
        Ok(etag(put.e_tag))
    }
}

async fn body_bytes(body: Option<StreamingBlob>) -> S3Result<Bytes> {
    let Some(body) = body else {
        return Ok(Bytes::new());
    };
    let chunks: Vec<Bytes> = body
        .try_collect()
        .await
        .map_err(|e| S3Error::with_source(S3ErrorCode::InternalError, e))?;
    Ok(chunks.concat().into())
}

fn if_none_match_any(condition: &Option<ETagCondition>) -> S3Result<bool> {
    match condition {
        None => Ok(false),
        Some(c) if c.is_any() => Ok(true),
        Some(_) => Err(s3_error!(NotImplemented, "If-None-Match takes only *")),
    }
}

#[async_trait::async_trait]
impl S3 for Backend {
    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.fault(&req.credentials).await?;
        self.bucket(&req.input.bucket)?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let fault = self.fault(&req.credentials).await?;
        let input = req.input;
        if input.if_match.is_some() {
            return Err(s3_error!(NotImplemented, "If-Match"));
        }
        let path = self.path(&input.bucket, &input.key)?;
        let create = if_none_match_any(&input.if_none_match)?;
        let bytes = body_bytes(input.body).await?;
        let e_tag = self.store(&path, bytes, create).await?;
        if fault == Some(Fault::StoredThenFailed) {
            return Err(s3_error!(InternalError, "injected after storing"));
        }
        if fault == Some(Fault::StoredThenDropped) {
            self.faults.dropped.fetch_add(1, Ordering::SeqCst);
            return Err(drop_connection().await);
        }
        Ok(S3Response::new(PutObjectOutput {
            e_tag,
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.fault(&req.credentials).await?;
        let input = req.input;
        let path = self.path(&input.bucket, &input.key)?;
        let meta = self.store.head(&path).await.map_err(object_error)?;
        let (range, content_range) = match input.range {
            None => (0..meta.size, None),
            Some(range) => {
                let range = range.check(meta.size)?;
                let shown = format!("bytes {}-{}/{}", range.start, range.end - 1, meta.size);
                (range, Some(shown))
            }
        };
        let bytes = match range.is_empty() {
            true => Bytes::new(),
            false => (self.store.get_range(&path, range).await).map_err(object_error)?,
        };
        Ok(S3Response::new(GetObjectOutput {
            content_length: Some(bytes.len() as i64),
            content_range,
            body: Some(StreamingBlob::from(s3s::Body::from(bytes))),
            e_tag: etag(meta.e_tag),
            last_modified: Some(Timestamp::from(std::time::SystemTime::from(
                meta.last_modified,
            ))),
            ..Default::default()
        }))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.fault(&req.credentials).await?;
        let path = self.path(&req.input.bucket, &req.input.key)?;
        let meta = self.store.head(&path).await.map_err(object_error)?;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(meta.size as i64),
            e_tag: etag(meta.e_tag),
            last_modified: Some(Timestamp::from(std::time::SystemTime::from(
                meta.last_modified,
            ))),
            ..Default::default()
        }))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        self.fault(&req.credentials).await?;
        let input = req.input;
        let CopySource::Bucket { bucket, key, .. } = &input.copy_source else {
            return Err(s3_error!(NotImplemented, "copies from access points"));
        };
        let from = self.path(bucket, key)?;
        let to = self.path(&input.bucket, &input.key)?;
        // The bytes are copied within the server, none through the client, as S3 servers
        // copy (not `LocalFileSystem::copy`'s hard link, which would make a copy free).
        let got = self.store.get(&from).await.map_err(object_error)?;
        let bytes = got.bytes().await.map_err(object_error)?;
        let e_tag = self.store(&to, bytes, false).await?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag,
                last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.fault(&req.credentials).await?;
        let path = self.path(&req.input.bucket, &req.input.key)?;
        match self.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(internal(e)),
        }
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.fault(&req.credentials).await?;
        let input = req.input;
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for object in input.delete.objects {
            let path = self.path(&input.bucket, &object.key)?;
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => deleted.push(DeletedObject {
                    key: Some(object.key),
                    ..Default::default()
                }),
                Err(e) => errors.push(Error {
                    code: Some("InternalError".into()),
                    key: Some(object.key),
                    message: Some(e.to_string()),
                    ..Default::default()
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.fault(&req.credentials).await?;
        let input = req.input;
        self.bucket(&input.bucket)?;
        let prefix = input.prefix.clone().unwrap_or_default();
        // Listed from the deepest directory the prefix names, then filtered by the prefix
        // as a string (S3's prefixes are not path segments).
        let directory = match prefix.rsplit_once('/') {
            Some((directory, _)) => format!("{}/{directory}", input.bucket),
            None => input.bucket.clone(),
        };
        let listed: Vec<object_store::ObjectMeta> = match Path::parse(&directory) {
            Ok(directory) => {
                (self.store.list(Some(&directory)).try_collect().await).map_err(internal)?
            }
            Err(e) => return Err(s3_error!(InvalidArgument, "{e}")),
        };
        let bucket_prefix = format!("{}/", input.bucket);
        let mut keys: Vec<(String, object_store::ObjectMeta)> = listed
            .into_iter()
            .filter_map(|meta| {
                let key = meta
                    .location
                    .as_ref()
                    .strip_prefix(&bucket_prefix)?
                    .to_string();
                key.starts_with(&prefix).then_some((key, meta))
            })
            .collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        let after = [input.continuation_token.clone(), input.start_after.clone()]
            .into_iter()
            .flatten()
            .max();
        let max_keys = (input.max_keys.map_or(self.page, |m| m.max(0) as usize)).min(self.page);
        let mut contents = Vec::new();
        let mut prefixes: Vec<String> = Vec::new();
        let mut last = None;
        let mut truncated = false;
        for (key, meta) in keys {
            if after.as_ref().is_some_and(|a| key.as_str() <= a.as_str()) {
                continue;
            }
            let rolled = (input.delimiter.as_deref()).and_then(|d| {
                let rest = &key[prefix.len()..];
                rest.find(d)
                    .map(|at| format!("{prefix}{}", &rest[..at + d.len()]))
            });
            if let Some(common) = &rolled {
                if prefixes.last() == Some(common) {
                    continue;
                }
                if after
                    .as_ref()
                    .is_some_and(|a| common.as_str() <= a.as_str())
                {
                    continue;
                }
            }
            if contents.len() + prefixes.len() == max_keys {
                truncated = true;
                break;
            }
            match rolled {
                Some(common) => {
                    // Keys under it sort after it: resuming after the prefix skips them.
                    last = Some(format!("{common}\u{10FFFF}"));
                    prefixes.push(common);
                }
                None => {
                    last = Some(key.clone());
                    contents.push(Object {
                        key: Some(key),
                        size: Some(meta.size as i64),
                        e_tag: etag(meta.e_tag),
                        last_modified: Some(Timestamp::from(std::time::SystemTime::from(
                            meta.last_modified,
                        ))),
                        ..Default::default()
                    });
                }
            }
        }
        let count = (contents.len() + prefixes.len()) as i32;
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: input.prefix,
            delimiter: input.delimiter,
            max_keys: Some(max_keys as i32),
            key_count: Some(count),
            continuation_token: input.continuation_token,
            start_after: input.start_after,
            is_truncated: Some(truncated),
            next_continuation_token: truncated.then_some(last).flatten(),
            contents: (!contents.is_empty()).then_some(contents),
            common_prefixes: (!prefixes.is_empty()).then(|| {
                (prefixes.into_iter())
                    .map(|p| CommonPrefix { prefix: Some(p) })
                    .collect()
            }),
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.fault(&req.credentials).await?;
        let input = req.input;
        self.path(&input.bucket, &input.key)?;
        let id = uuid::Uuid::new_v4().to_string();
        let upload = (input.bucket.clone(), input.key.clone(), BTreeMap::new());
        self.uploads
            .lock()
            .map_err(internal)?
            .insert(id.clone(), upload);
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(id),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        self.fault(&req.credentials).await?;
        let input = req.input;
        let bytes = body_bytes(input.body).await?;
        let e_tag = format!("part-{}-{}", input.part_number, bytes.len());
        let mut uploads = self.uploads.lock().map_err(internal)?;
        let upload = uploads
            .get_mut(&input.upload_id)
            .ok_or_else(|| s3_error!(NoSuchUpload))?;
        upload.2.insert(input.part_number, bytes);
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(e_tag)),
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let fault = self.fault(&req.credentials).await?;
        let input = req.input;
        let create = if_none_match_any(&input.if_none_match)?;
        let (bucket, key, parts) = (self.uploads.lock().map_err(internal)?)
            .remove(&input.upload_id)
            .ok_or_else(|| s3_error!(NoSuchUpload))?;
        let named: Vec<i32> = (input.multipart_upload.and_then(|m| m.parts))
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.part_number)
            .collect();
        let mut whole = Vec::new();
        for number in named {
            let part = parts.get(&number).ok_or_else(|| s3_error!(InvalidPart))?;
            whole.extend_from_slice(part);
        }
        let path = self.path(&bucket, &key)?;
        let e_tag = self.store(&path, whole.into(), create).await?;
        if fault == Some(Fault::StoredThenFailed) {
            return Err(s3_error!(InternalError, "injected after storing"));
        }
        if fault == Some(Fault::StoredThenDropped) {
            self.faults.dropped.fetch_add(1, Ordering::SeqCst);
            return Err(drop_connection().await);
        }
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(bucket),
            key: Some(key),
            e_tag,
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.fault(&req.credentials).await?;
        (self.uploads.lock().map_err(internal)?).remove(&req.input.upload_id);
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}
