//! The sidecars a commit's new data files reuse (their Blob Reuse Indexes) must still be
//! the table's in the version the commit lands on. A rewrite that keeps stored values (an
//! UPDATE of other columns, MERGE) reads them at one version and commits later; if a
//! compaction repacked their sidecar meanwhile, nothing but the commit would name it any
//! more, and cleanup may already have removed it. Such a commit is a typed conflict (the
//! statement can run again, on the newer version), never a descriptor naming a missing
//! sidecar.

use std::collections::HashSet;

use super::action::Action;
use crate::error::{Error, Result};
use crate::format::{DataFile, Manifest, TablePath};

/// The sidecars `files`' reuse indexes name: (directory, physical id).
fn indexed_sidecars<'a>(
    files: impl Iterator<Item = &'a DataFile>,
) -> impl Iterator<Item = (&'a TablePath, u32)> {
    files
        .filter_map(|file| file.blob_reuse_index.as_ref())
        .flat_map(|index| index.sources())
        .flat_map(|source| {
            (source.physical_ids.iter()).map(move |&physical| (&source.directory, physical))
        })
}

/// Checks that every sidecar `action`'s new files reuse is referenced by `base`: under the
/// directory of one of its data files, or named by one of their reuse indexes (what cleanup
/// keeps, `maintenance` and `blob_sidecars`).
pub(super) fn check_reused_sidecars(
    base: &Manifest,
    action: &mut Action,
    read_version: u64,
) -> Result<()> {
    let operation = action.operation();
    let Some(fragments) = action.new_fragments_mut() else {
        return Ok(());
    };
    let mut reused = indexed_sidecars(fragments.iter().map(|f| &f.file)).peekable();
    if reused.peek().is_none() {
        return Ok(());
    }
    let files = base.fragments.iter().flat_map(|f| &f.files);
    let directories: HashSet<TablePath> = files
        .clone()
        .map(|file| TablePath::sidecar_dir(&file.path))
        .collect();
    let indexed: HashSet<(&TablePath, u32)> = indexed_sidecars(files).collect();
    for (directory, physical) in reused {
        if directories.contains(directory) || indexed.contains(&(directory, physical)) {
            continue;
        }
        let sidecar = crate::format::sidecar_in(directory, physical);
        return Err(Error::Conflict {
            operation,
            read_version,
            other: Some(base.transaction.operation),
            other_version: base.version,
            reason: format!(
                "the blob sidecar {} its rows' values are in is no longer the table's \
                 (repacked meanwhile); run it again",
                sidecar.as_str()
            ),
        });
    }
    Ok(())
}
