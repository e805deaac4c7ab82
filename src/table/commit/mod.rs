//! Commits: turn an [`Action`] into the next manifest and publish it with put-if-absent.
//!
//! When another writer publishes first, the commit walks every version it missed, checks
//! each against its action (DESIGN.md §4) and rebases or fails with [`Error::Conflict`]:
//! - append rebases over anything but overwrite/restore (new fragment ids; ids are implicit,
//!   so nothing written is rewritten);
//! - delete/update follow each row by id: a row deleted meanwhile is a conflict, a row moved
//!   by compaction is found in the compacted fragment's sequence;
//! - compaction rebases over deletes of its input rows (deletion vectors on its output) and
//!   conflicts with anything else that touched its inputs;
//! - overwrite and restore rebase over anything; everything else conflicts with them;
//! - a schema change conflicts with another; other actions rebase over it (their new
//!   fragments' statistics converted to widened types), but for an index build on a column
//!   it widened or dropped, and rows lacking a NOT NULL column it added;
//! - a row patch conflicts with a delete or update of a row it patches, a patch of the same
//!   cell and an index made of a patched column; over a compaction of its fragment it
//!   follows its rows by id and is written again for the fragments now holding them
//!   (`follow_patches`); an update of a patched row, a compaction of a patched fragment and
//!   an index build over a patched column conflict with it.

mod action;
mod apply;
mod follow_patches;
mod pause;
mod rebase;
mod reused;
mod schema;

use crate::error::{Error, Result};
use crate::format::{DataFile, Manifest, Schema};
use crate::io::TableStore;
use crate::rowid::FragmentId;
use crate::table::TableOptions;

pub(crate) use action::{Action, CarriedRow, NewFragment, NewPatch, THIS_COMMIT};
use apply::{add_fragments, apply};
use rebase::rebase;

/// Deletes `files` (of `schema`), written by a write that will not commit them, with their
/// blob sidecars (see [`TableStore::delete_unpublished`]).
pub(crate) async fn delete_files(
    store: &TableStore,
    schema: &Schema,
    files: impl Iterator<Item = &DataFile>,
) {
    for file in files {
        store.delete_unpublished(schema, &file.path).await;
    }
}

/// Writes one row patch per `(fragment, values, offsets)` of `patches` (the new values of
/// the fragment's rows at `offsets`, in offset order, as `schema`'s columns). On an error,
/// the files written are deleted.
pub(crate) async fn write_patches(
    store: &TableStore,
    schema: &Schema,
    patches: Vec<(
        FragmentId,
        arrow::array::RecordBatch,
        roaring::RoaringBitmap,
    )>,
) -> Result<Vec<NewPatch>> {
    let mut written: Vec<NewPatch> = Vec::with_capacity(patches.len());
    for (fragment, values, offsets) in patches {
        match store.write_data_file(schema, &[values]).await {
            Ok(file) => written.push(NewPatch {
                fragment,
                file,
                offsets: std::sync::Arc::new(offsets),
            }),
            Err(e) => {
                delete_files(store, schema, written.iter().map(|p| &p.file)).await;
                return Err(e);
            }
        }
    }
    Ok(written)
}

/// Whether a write that failed with `error` surely published nothing, so the files it wrote
/// are no version's and may be deleted: any error but the store's (a store error while
/// publishing may hide a version that landed; cleanup decides about its files later).
pub(crate) fn surely_unpublished(error: &Error) -> bool {
    error.is_conflict() || !matches!(error, Error::ObjectStore(_))
}

/// Applies `action` on top of `read` and publishes it, rebasing over concurrent commits.
/// `captured` holds the values the rows it deletes or rewrites had at `read` (its change
/// data), if it captured them; a rebase over a schema change drops them (they no longer
/// read as the rows did just before the commit), and the version then records none (the
/// caller deletes them: `Table::commit_manifest`). Files a rebase wrote for the action
/// (a patch moved onto rows a compaction carried) are deleted if nothing was published.
pub(crate) async fn commit(
    store: &TableStore,
    read: &Manifest,
    mut action: Action,
    captured: Option<Vec<NewFragment>>,
    options: &TableOptions,
) -> Result<Manifest> {
    // Only a patch's rebase writes files (`follow_patches`): those not planned are its.
    let planned: Vec<_> = action.patch_files().map(|f| f.path.clone()).collect();
    // Boxed: a commit's future (apply, publish, every rebase) is large, and callers nest it.
    let outcome = Box::pin(commit_rebasing(store, read, &mut action, captured, options)).await;
    if outcome.as_ref().is_err_and(surely_unpublished) {
        let rebased = action.patch_files().filter(|f| !planned.contains(&f.path));
        delete_files(store, &read.schema, rebased).await;
    }
    outcome
}

async fn commit_rebasing(
    store: &TableStore,
    read: &Manifest,
    action: &mut Action,
    mut captured: Option<Vec<NewFragment>>,
    options: &TableOptions,
) -> Result<Manifest> {
    let table = store.display();
    read.check_writable(&table)?;
    let mut base = read.clone();
    for _ in 0..=options.max_commit_retries {
        reused::check_reused_sidecars(&base, action, read.version)?;
        if base.schema != read.schema {
            captured = None;
        }
        let mut next = apply(store, &base, action, read.version).await?;
        if let Some(captured) = &captured {
            apply::add_change_data(&mut next, captured)?;
        }
        pause::at(pause::Point::BeforePublish, action.operation()).await;
        if store.publish_manifest(&mut next, &options.layout).await? {
            pause::at(pause::Point::AfterPublish, action.operation()).await;
            return Ok(next);
        }
        let latest = store
            .latest_version()
            .await?
            .ok_or_else(|| Error::TableNotFound {
                table: table.clone(),
            })?;
        for version in base.version + 1..=latest {
            let other = store.read_manifest(version).await?;
            other.check_writable(&table)?;
            rebase(store, action, &base, &other, read.version).await?;
            base = other;
        }
    }
    Err(Error::Conflict {
        operation: action.operation(),
        read_version: read.version,
        other: None,
        other_version: base.version,
        reason: format!("gave up after {} retries", options.max_commit_retries),
    })
}

/// Publishes `empty`, a table's first version, holding `fragments`. `None` if a version 1
/// exists (another writer created the table first): nothing was published then.
pub(crate) async fn create(
    store: &TableStore,
    mut empty: Manifest,
    fragments: &[NewFragment],
    options: &TableOptions,
) -> Result<Option<Manifest>> {
    let mut summary = empty.transaction.clone();
    add_fragments(&mut empty, &mut summary, fragments)?;
    empty.transaction = summary;
    Ok(store
        .publish_manifest(&mut empty, &options.layout)
        .await?
        .then_some(empty))
}

#[cfg(test)]
mod tests;
