//! [`BasedStore`]: a table's object store as natal's readers see it, with the files of its
//! storage bases (a shallow clone's sources) under `<root>/_bases/<id>/`. A request for such
//! a path goes to the base's own store and root; nothing may write or delete there, so no
//! operation of this table can change another's files. Requests for the table's own paths
//! pass through untouched.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::registry::ObjectStoreRegistry;
use object_store::{
    CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

use crate::format::{StorageBase, BASES_DIR};

/// Where one base's files are read from, or why they cannot be.
#[derive(Debug, Clone)]
enum Resolved {
    At {
        store: Arc<dyn ObjectStore>,
        root: Path,
        base: StorageBase,
    },
    Unreachable {
        base: StorageBase,
        reason: String,
    },
}

/// A table's store, routing its storage bases' paths to where they are.
#[derive(Debug)]
pub(crate) struct BasedStore {
    own: Arc<dyn ObjectStore>,
    /// `<root>/_bases`: what routed paths start with.
    bases_dir: Path,
    resolved: RwLock<HashMap<u32, Resolved>>,
}

impl BasedStore {
    pub(crate) fn new(own: Arc<dyn ObjectStore>, root: &Path) -> Self {
        Self {
            own,
            bases_dir: root.clone().join(BASES_DIR),
            resolved: RwLock::new(HashMap::new()),
        }
    }

    /// The table's own store.
    pub(crate) fn underlying(&self) -> &Arc<dyn ObjectStore> {
        &self.own
    }

    /// Resolves `bases` (a manifest's) where they are not already: in the table's own store
    /// when they name none, else through `registry` by their URL.
    pub(crate) fn note(
        &self,
        bases: &[StorageBase],
        registry: Option<&Arc<dyn ObjectStoreRegistry>>,
    ) {
        let known = |b: &StorageBase| {
            let resolved = self.resolved.read().ok();
            matches!(resolved.as_ref().and_then(|r| r.get(&b.id)),
                Some(Resolved::At { base, .. } | Resolved::Unreachable { base, .. }) if base == b)
        };
        for base in bases.iter().filter(|b| !known(b)) {
            let resolved = match self.reach(base, registry) {
                Ok((store, root)) => Resolved::At {
                    store,
                    root,
                    base: base.clone(),
                },
                Err(reason) => Resolved::Unreachable {
                    base: base.clone(),
                    reason,
                },
            };
            if let Ok(mut map) = self.resolved.write() {
                map.insert(base.id, resolved);
            }
        }
    }

    fn reach(
        &self,
        base: &StorageBase,
        registry: Option<&Arc<dyn ObjectStoreRegistry>>,
    ) -> std::result::Result<(Arc<dyn ObjectStore>, Path), String> {
        let Some(store_url) = &base.store_url else {
            let root = Path::parse(&base.path).map_err(|e| e.to_string())?;
            return Ok((self.own.clone(), root));
        };
        let url = url::Url::parse(&format!(
            "{}/{}",
            store_url.trim_end_matches('/'),
            base.path
        ))
        .map_err(|e| format!("not a URL: {e}"))?;
        let registry = registry.ok_or("this handle has no object stores to reach it by")?;
        registry.resolve(&url).map_err(|e| e.to_string())
    }

    /// The store and path `location` is read from: its base's, or the table's own.
    pub(crate) fn locate(&self, location: &Path) -> Result<(Arc<dyn ObjectStore>, Path)> {
        Ok(self
            .route(location)?
            .unwrap_or_else(|| (self.own.clone(), location.clone())))
    }

    /// The base holding `location` and the path within it, if it is under one.
    fn route(&self, location: &Path) -> Result<Option<(Arc<dyn ObjectStore>, Path)>> {
        let Some(mut parts) = location.prefix_match(&self.bases_dir) else {
            return Ok(None);
        };
        let id = parts.next().and_then(|p| p.as_ref().parse::<u32>().ok());
        let resolved = id.and_then(|id| self.resolved.read().ok()?.get(&id).cloned());
        match resolved {
            Some(Resolved::At { store, root, .. }) => {
                Ok(Some((store, parts.fold(root, |p, part| p.join(part)))))
            }
            Some(Resolved::Unreachable { base, reason }) => Err(Error::Generic {
                store: "natal storage base",
                source: format!(
                    "storage base {} ({}) is unreachable: {reason}",
                    base.id,
                    base.location()
                )
                .into(),
            }),
            None => Err(Error::Generic {
                store: "natal storage base",
                source: format!("{location} is under a storage base no manifest read names").into(),
            }),
        }
    }

    /// Refuses to `what` (write, delete) a path under a storage base.
    fn refuse_change(&self, location: &Path, what: &str) -> Result<()> {
        match location.prefix_match(&self.bases_dir) {
            Some(_) => Err(Error::Generic {
                store: "natal storage base",
                source: format!(
                    "refusing to {what} {location}: it is another table's file (a storage \
                     base); a table never changes its bases' files"
                )
                .into(),
            }),
            None => Ok(()),
        }
    }
}

/// A base's "not found", saying whose file it was and why it may be gone.
fn missing_in_base(error: Error, location: &Path) -> Error {
    match error {
        Error::NotFound { path, source } => Error::NotFound {
            path: location.to_string(),
            source: format!(
                "{path}, a file of the table this one was shallow-cloned from, is gone \
                 ({source}): that table's cleanup may have removed it; a shallow clone reads \
                 its source's files while they last (deep-clone it to keep its own copies)"
            )
            .into(),
        },
        other => other,
    }
}

impl fmt::Display for BasedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.own)
    }
}

#[async_trait]
impl ObjectStore for BasedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.refuse_change(location, "write")?;
        self.own.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.refuse_change(location, "write")?;
        self.own.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        match self.route(location)? {
            None => self.own.get_opts(location, options).await,
            Some((store, inner)) => {
                let mut got = (store.get_opts(&inner, options).await)
                    .map_err(|e| missing_in_base(e, location))?;
                got.meta.location = location.clone();
                Ok(got)
            }
        }
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        match self.route(location)? {
            None => self.own.get_ranges(location, ranges).await,
            Some((store, inner)) => {
                (store.get_ranges(&inner, ranges).await).map_err(|e| missing_in_base(e, location))
            }
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let bases_dir = self.bases_dir.clone();
        let checked = locations.map(move |path| {
            let path = path?;
            let under_a_base = path.prefix_match(&bases_dir).is_some();
            match under_a_base {
                true => Err(Error::Generic {
                    store: "natal storage base",
                    source: format!(
                        "refusing to delete {path}: it is another table's file (a storage base)"
                    )
                    .into(),
                }),
                false => Ok(path),
            }
        });
        self.own.delete_stream(checked.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let routed = match prefix.map(|p| self.route(p)) {
            None | Some(Ok(None)) => return self.own.list(prefix),
            Some(Err(e)) => return stream::once(async move { Err(e) }).boxed(),
            Some(Ok(Some(routed))) => routed,
        };
        let (store, inner) = routed;
        let (virtual_prefix, real_prefix) = (prefix.cloned().unwrap_or_default(), inner.clone());
        store
            .list(Some(&inner))
            .map_ok(move |mut meta| {
                let rest: Vec<_> = (meta.location.prefix_match(&real_prefix))
                    .map(|parts| parts.collect())
                    .unwrap_or_default();
                meta.location = rest
                    .into_iter()
                    .fold(virtual_prefix.clone(), |p, part| p.join(part));
                meta
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        if prefix
            .and_then(|p| p.prefix_match(&self.bases_dir))
            .is_some()
        {
            return Err(Error::NotImplemented {
                operation: "listing a storage base by delimiter".into(),
                implementer: "natal".into(),
            });
        }
        self.own.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.refuse_change(to, "write")?;
        match self.route(from)? {
            None => self.own.copy_opts(from, to, options).await,
            Some(_) => Err(Error::NotImplemented {
                operation: "copying a storage base's file in place".into(),
                implementer: "natal".into(),
            }),
        }
    }
}
