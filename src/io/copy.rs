//! Copying a table's files under another table's root (a deep clone): a server-side copy
//! within one store, a streamed GET into a multipart upload across stores; several at once.
//! Sources may be under the table's storage bases; copies land at the same path within
//! the target's own root.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};

use super::TableStore;
use crate::error::{Error, Result};
use crate::format::TablePath;

/// Copies running at once.
const CONCURRENT_COPIES: usize = 8;

impl TableStore {
    /// Every file under this table's root and the roots of `bases` (one listing each),
    /// with its size, by table path ([`TablePath::in_base`] paths for the bases').
    pub(crate) async fn files_with_sizes(&self, bases: &[u32]) -> Result<HashMap<String, u64>> {
        let mut sizes = HashMap::new();
        for (relative, meta) in self.list_table_files().await? {
            sizes.insert(relative, meta.size);
        }
        for &base in bases {
            let prefix = self.child(&format!("{}/{base}", crate::format::BASES_DIR));
            let listed: Vec<_> = self
                .object_store()
                .list(Some(&prefix))
                .try_collect()
                .await?;
            for meta in listed {
                if let Some(relative) = self.relative(&meta.location) {
                    sizes.insert(relative, meta.size);
                }
            }
        }
        Ok(sizes)
    }

    /// Copies each of `files` (with their sizes) to its path within its base under
    /// `target`'s root; `copied(bytes)` is told the bytes copied so far. Returns the bytes.
    pub(crate) async fn copy_files_to(
        &self,
        files: Vec<(TablePath, u64)>,
        target: &TableStore,
        copied: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<u64> {
        let done = AtomicU64::new(0);
        futures::stream::iter(files)
            .map(|(file, size)| {
                let done = &done;
                async move {
                    let (store, from) = self.bases.locate(&self.path(&file))?;
                    let to = target.child(file.split_base().1);
                    copy_one(&store, &from, target.underlying(), &to, size).await?;
                    copied(done.fetch_add(size, Ordering::Relaxed) + size);
                    Ok::<_, Error>(())
                }
            })
            .buffer_unordered(CONCURRENT_COPIES)
            .try_collect::<()>()
            .await?;
        Ok(done.into_inner())
    }
}

/// Files up to this size cross stores in one GET and one PUT; larger ones stream into a
/// multipart upload (three requests at least, so not worth it for the many small files
/// a table has: manifests' segments, deletion vectors, row ids).
const SINGLE_PUT_LIMIT: u64 = 8 << 20;

/// `from` in `source` (`size` bytes) to `to` in `target`: by the store itself when they
/// are one store.
async fn copy_one(
    source: &Arc<dyn ObjectStore>,
    from: &Path,
    target: &Arc<dyn ObjectStore>,
    to: &Path,
    size: u64,
) -> Result<()> {
    if Arc::ptr_eq(source, target) {
        return Ok(source.copy(from, to).await?);
    }
    if size <= SINGLE_PUT_LIMIT {
        let bytes = source.get(from).await?.bytes().await?;
        target.put(to, bytes.into()).await?;
        return Ok(());
    }
    let mut body = source.get(from).await?.into_stream();
    let mut upload = WriteMultipart::new(target.put_multipart(to).await?);
    while let Some(chunk) = body.try_next().await? {
        upload.wait_for_capacity(4).await?;
        upload.put(chunk);
    }
    upload.finish().await?;
    Ok(())
}
