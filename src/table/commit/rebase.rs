//! The rebase rules: an action checked against a version it missed, and moved onto it or
//! refused with a conflict (the rules are listed in `commit/mod.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::action::Action;
use crate::error::{Error, Result};
use crate::format::{Manifest, Operation};
use crate::io::TableStore;
use crate::rowid::{FragmentId, RowAddress, RowId};

/// Checks `action` against `next` (published on top of `prev`) and updates it to apply on
/// top of `next`.
pub(super) async fn rebase(
    store: &TableStore,
    action: &mut Action,
    prev: &Manifest,
    next: &Manifest,
    read_version: u64,
) -> Result<()> {
    let replaces_all = matches!(
        next.transaction.operation,
        Operation::Overwrite | Operation::Restore
    );
    // A MERGE written as row patches may delete rows too.
    let other_rewrote = match next.transaction.operation {
        Operation::Delete | Operation::Update | Operation::Compact => true,
        Operation::Patch => next.transaction.rows_removed > 0,
        _ => false,
    };
    // A table property changes no row: it rebases over anything.
    if let Action::SetChangeDataFeed { .. } | Action::SetPatchMaxShare { .. } = action {
        return Ok(());
    }
    // A schema change rebases over anything that left the schema as it read it; one that
    // adds values, over what left every row where it computed them.
    if let Action::AlterSchema { column_files, .. } = action {
        if next.schema != prev.schema {
            let reason = "the schema changed meanwhile";
            return Err(conflict(action, read_version, next, reason));
        }
        if !column_files.is_empty() {
            if let Some(reason) = super::schema::rows_changed_under_values(prev, next) {
                return Err(conflict(action, read_version, next, reason));
            }
        }
        return Ok(());
    }
    if next.transaction.operation == Operation::AlterSchema {
        return rebase_over_schema_change(action, prev, next, read_version);
    }
    if next.transaction.operation == Operation::Patch && !replaces_all {
        if let Some(reason) = patched_under(action, prev, next) {
            return Err(conflict(action, read_version, next, reason));
        }
    }
    match action {
        Action::Overwrite { .. } | Action::Restore { .. } => Ok(()),
        _ if replaces_all => Err(conflict(
            action,
            read_version,
            next,
            "the table was replaced",
        )),
        Action::Append { .. } | Action::Checkpoint { .. } => Ok(()),
        // Its fragments and rows are checked as it applies (`apply::add_patches`); rows a
        // compaction moved are followed to their new fragments.
        Action::Patch {
            patches, deleted, ..
        } if other_rewrote => {
            // A patched row deleted or rewritten meanwhile is a conflict now: a compaction
            // after it would leave no trace of the deletion at the patch's offsets.
            let mut outcome = match next.transaction.operation {
                Operation::Compact => {
                    super::follow_patches::follow_patches(store, patches, prev, next).await?
                }
                _ => match super::follow_patches::deleted_under(store, patches, next).await? {
                    Some(reason) => Err(reason),
                    None => Ok(()),
                },
            };
            // Its deletes follow their rows as a delete's do.
            if outcome.is_ok() {
                if let Followed::Lost(reason) = follow_rows(store, deleted, prev, next).await? {
                    outcome = Err(reason);
                }
            }
            outcome.map_err(|reason| conflict(action, read_version, next, reason))
        }
        Action::Patch { .. } => Ok(()),
        Action::Delete { rows } | Action::Update { rows, .. } if other_rewrote => {
            match follow_rows(store, rows, prev, next).await? {
                Followed::Every => Ok(()),
                Followed::Lost(reason) => Err(conflict(action, read_version, next, reason)),
            }
        }
        Action::Compact { inputs, .. } if other_rewrote => {
            for input in inputs.iter() {
                let reason = match next.fragment(input.id) {
                    None => format!("fragment {} was rewritten", input.id),
                    Some(now)
                        if next.transaction.operation != Operation::Delete
                            && prev
                                .fragment(input.id)
                                .is_none_or(|p| p.deletion != now.deletion) =>
                    {
                        format!("rows of fragment {} were updated", input.id)
                    }
                    Some(_) => continue,
                };
                return Err(conflict(action, read_version, next, reason));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Moves `action` over a schema change (`prev`'s schema to `next`'s).
fn rebase_over_schema_change(
    action: &mut Action,
    prev: &Manifest,
    next: &Manifest,
    read_version: u64,
) -> Result<()> {
    let (from, to) = (&prev.schema, &next.schema);
    let retyped_or_dropped = |id| match (from.field_by_id(id), to.field_by_id(id)) {
        (_, None) => true,
        (Some(was), Some(now)) => was.data_type != now.data_type,
        (None, Some(_)) => false,
    };
    if let Action::CreateIndex { segments, .. } = &*action {
        if let Some(s) = segments.iter().find(|s| retyped_or_dropped(s.field_id)) {
            let reason = format!(
                "the column of index {} was dropped or widened meanwhile",
                s.name
            );
            return Err(conflict(action, read_version, next, reason));
        }
    }
    if let Action::Patch { patches, .. } = &*action {
        let mut fields = patches.iter().flat_map(|p| &p.file.field_ids);
        if fields.any(|&id| retyped_or_dropped(id)) {
            let reason = "a patched column was dropped or widened meanwhile";
            return Err(conflict(action, read_version, next, reason));
        }
    }
    // Rows carried into new fragments would lose the values computed for them.
    let rewrites_rows = match &*action {
        Action::Update { fragments, .. } => !fragments.is_empty(),
        Action::Compact { .. } => true,
        _ => false,
    };
    if rewrites_rows {
        if let Some(column) = super::schema::added_with_values(prev, next) {
            let reason = format!(
                "column {column} was added with values meanwhile: the rows rewritten lack them"
            );
            return Err(conflict(action, read_version, next, reason));
        }
    }
    let Some(fragments) = action.new_fragments_mut() else {
        return Ok(());
    };
    if let Some(reason) = super::schema::unfit_fragments(fragments, from, to) {
        return Err(conflict(action, read_version, next, reason));
    }
    for fragment in fragments {
        super::schema::widen_file_stats(std::slice::from_mut(&mut fragment.file), from, to);
    }
    Ok(())
}

/// Why `action` cannot follow `next`, a version that patched rows `prev` did not: an update
/// would write a patched row again with its old values (and a delete remove one: the
/// later of the two is refused, as for two updates), a compaction would drop a patch,
/// an index would hold a patched row's old value, a patch would be hidden under another of
/// the same cell. `None`: it can.
fn patched_under(action: &Action, prev: &Manifest, next: &Manifest) -> Option<String> {
    // The patches `next` added to fragment `id`.
    let added = |id: FragmentId| {
        let before = prev.fragment(id).map_or(0, |f| f.patches.len());
        let now = next.fragment(id).map_or(&[][..], |f| f.patches.as_slice());
        now.get(before..).unwrap_or_default()
    };
    // Rows it deletes or rewrites that `next` patched.
    let patched_row = |rows: &[(RowId, RowAddress)]| {
        rows.iter()
            .find(|(_, addr)| {
                let offset = addr.offset();
                (added(addr.fragment_id()).iter()).any(|p| p.offsets.contains(offset))
            })
            .map(|(id, _)| format!("row {id} was patched concurrently"))
    };
    match action {
        Action::Update { rows, .. } | Action::Delete { rows } => patched_row(rows),
        Action::Compact { inputs, .. } => inputs
            .iter()
            .find(|input| !added(input.id).is_empty())
            .map(|input| format!("rows of fragment {} were patched", input.id)),
        Action::CreateIndex { segments, .. } => segments
            .iter()
            .find(|s| {
                s.fragments
                    .iter()
                    .any(|f| added(f).iter().any(|p| p.holds(s.field_id)))
            })
            .map(|s| format!("a column of index {} was patched", s.name)),
        Action::Patch {
            patches, deleted, ..
        } => patched_row(deleted).or_else(|| {
            patches
                .iter()
                .find(|mine| {
                    added(mine.fragment).iter().any(|theirs| {
                        theirs.holds_any(&mine.file.field_ids)
                            && !theirs.offsets.is_disjoint(&mine.offsets)
                    })
                })
                .map(|mine| {
                    format!(
                        "cells of fragment {} were patched concurrently",
                        mine.fragment
                    )
                })
        }),
        _ => None,
    }
}

/// Whether the rows a delete or update names could all be followed to a newer version.
enum Followed {
    Every,
    /// One was deleted or rewritten meanwhile: a conflict, for this reason.
    Lost(String),
}

/// Moves each row's address from `prev` to `next`.
async fn follow_rows(
    store: &TableStore,
    rows: &mut [(RowId, RowAddress)],
    prev: &Manifest,
    next: &Manifest,
) -> Result<Followed> {
    let mut deletions: HashMap<FragmentId, Option<Arc<RoaringBitmap>>> = HashMap::new();
    let mut moved: Option<HashMap<RowId, RowAddress>> = None;
    for (id, addr) in rows.iter_mut() {
        let fragment = match next.fragment(addr.fragment_id()) {
            Some(now) => {
                let before = prev.fragment(addr.fragment_id());
                if before.is_some_and(|b| b.deletion == now.deletion) {
                    continue;
                }
                now
            }
            None => {
                // Its fragment was compacted away: find the id where compaction put it.
                let moved =
                    moved.get_or_insert_with(|| super::follow_patches::added_row_ids(prev, next));
                let Some(&new_addr) = moved.get(id) else {
                    return Ok(Followed::Lost(format!("row {id} was removed")));
                };
                *addr = new_addr;
                match next.fragment(new_addr.fragment_id()) {
                    Some(f) => f,
                    None => return Ok(Followed::Lost(format!("row {id} was removed"))),
                }
            }
        };
        let bitmap = match deletions.get(&fragment.id) {
            Some(b) => b.clone(),
            None => {
                let b = store.fragment_deletions(fragment).await?;
                deletions.insert(fragment.id, b.clone());
                b
            }
        };
        if bitmap.is_some_and(|b| b.contains(addr.offset())) {
            return Ok(Followed::Lost(format!(
                "row {id} was deleted or updated concurrently"
            )));
        }
    }
    Ok(Followed::Every)
}

fn conflict(
    action: &Action,
    read_version: u64,
    other: &Manifest,
    reason: impl Into<String>,
) -> Error {
    Error::Conflict {
        operation: action.operation(),
        read_version,
        other: Some(other.transaction.operation),
        other_version: other.version,
        reason: reason.into(),
    }
}
