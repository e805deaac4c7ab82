//! Unfinished uploads on a local disk. object_store's `LocalFileSystem` writes a file as
//! `<name>#<n>` and renames it when complete; a process killed mid-write leaves that staging
//! file behind, and object_store's listings never show it, so cleanup finds it here.

use std::path::{Path as LocalPath, PathBuf};

use object_store::path::Path;
use object_store::ObjectStore;
use url::Url;

use crate::error::{Error, Result};

/// An upload a writer started and never finished.
#[derive(Debug)]
pub(crate) struct StagedUpload {
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    pub(crate) modified: chrono::DateTime<chrono::Utc>,
}

/// The directory of `root` when `store` is a local file system, read from the root URL its
/// display names (a store datafusion-cli instruments names it as its inner store). `None`
/// for any other store, or a wrapper that may map paths.
pub(crate) fn local_directory(store: &dyn ObjectStore, root: &Path) -> Option<PathBuf> {
    let shown = store.to_string();
    let inner = shown
        .strip_prefix("Instrumented Object Store: ")
        .and_then(|s| s.split_once("inner: "))
        .map_or(shown.as_str(), |(_, inner)| inner);
    let root_url = inner.strip_prefix("LocalFileSystem(")?.strip_suffix(')')?;
    // A prefix's URL may lack the trailing '/' that makes `join` descend into it.
    let root_url = Url::parse(&format!("{}/", root_url.trim_end_matches('/'))).ok()?;
    root_url.join(root.as_ref()).ok()?.to_file_path().ok()
}

/// True for a staging file's name: `<name>#<digits>`.
fn is_staging_name(name: &str) -> bool {
    name.rsplit_once('#')
        .is_some_and(|(_, suffix)| !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()))
}

/// Every staging file under the directories `dirs` of `table_dir`.
pub(crate) async fn staged_uploads(
    table_dir: PathBuf,
    dirs: Vec<&'static str>,
) -> Result<Vec<StagedUpload>> {
    tokio::task::spawn_blocking(move || {
        let mut found = Vec::new();
        for dir in dirs {
            collect(&table_dir.join(dir), &mut found)?;
        }
        Ok(found)
    })
    .await
    .map_err(|e| Error::internal(format!("listing staged uploads: {e}")))?
}

fn collect(dir: &LocalPath, found: &mut Vec<StagedUpload>) -> Result<()> {
    let io = |source| Error::Io {
        path: dir.display().to_string(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io)?;
        let meta = entry.metadata().map_err(io)?;
        let path = entry.path();
        if meta.is_dir() {
            collect(&path, found)?;
        } else if is_staging_name(&entry.file_name().to_string_lossy()) {
            let modified = meta.modified().map_err(io)?;
            found.push(StagedUpload {
                path,
                size: meta.len(),
                modified: modified.into(),
            });
        }
    }
    Ok(())
}

/// Removes a staging file; one already gone (its writer finished or another cleanup took
/// it) counts as removed.
pub(crate) fn remove(upload: &StagedUpload) -> Result<()> {
    match std::fs::remove_file(&upload.path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            path: upload.path.display().to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::local::LocalFileSystem;
    use object_store::memory::InMemory;

    use super::*;

    #[test]
    fn staging_names_are_a_hash_and_digits() {
        assert!(is_staging_name("a.parquet#1"));
        assert!(is_staging_name("7.manifest#12"));
        assert!(!is_staging_name("a.parquet"));
        assert!(!is_staging_name("a#"));
        assert!(!is_staging_name("a#1b"));
    }

    #[test]
    fn a_local_file_system_names_its_directory_and_other_stores_none() {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::from("t");
        let prefixed = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        assert_eq!(
            local_directory(&prefixed, &root),
            Some(dir.path().canonicalize().unwrap().join("t"))
        );
        let unprefixed = LocalFileSystem::new();
        let absolute = Path::from_absolute_path(dir.path().join("t")).unwrap();
        assert_eq!(
            local_directory(&unprefixed, &absolute),
            Some(dir.path().join("t"))
        );
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        assert_eq!(local_directory(memory.as_ref(), &root), None);
    }
}
