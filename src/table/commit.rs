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
//! - overwrite and restore rebase over anything; everything else conflicts with them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::error::{Error, Result};
use crate::format::{
    DataFile, DeletionVector, Fragment, IndexSegment, Manifest, Operation, TransactionSummary,
};
use crate::io::TableStore;
use crate::rowid::{FragmentId, RowAddress, RowId, RowIdSequence};
use crate::table::TableOptions;

/// A data file written for a new fragment, with the ids of its rows.
#[derive(Debug, Clone)]
pub(crate) struct NewFragment {
    pub file: DataFile,
    pub rows: u32,
    /// `None`: every row is new (native). Otherwise per row: `Some(id)` for a row carried
    /// from elsewhere, `None` for a new row.
    pub carried_ids: Option<Vec<Option<RowId>>>,
}

impl NewFragment {
    fn into_fragment(self, id: FragmentId) -> Fragment {
        let row_ids = self.carried_ids.and_then(|ids| {
            let all_native = ids.iter().all(Option::is_none);
            (!all_native).then(|| {
                let ids: Vec<u64> = ids
                    .iter()
                    .enumerate()
                    .map(|(offset, carried)| match carried {
                        Some(id) => id.as_u64(),
                        None => RowAddress::new(id, offset as u32).as_u64(),
                    })
                    .collect();
                Arc::new(RowIdSequence::from_ids(&ids))
            })
        });
        Fragment {
            id,
            files: vec![self.file],
            deletion: None,
            physical_rows: self.rows,
            row_ids,
            row_ids_file: None,
        }
    }
}

/// What a transaction does, in terms that can be re-applied to a newer version.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    Append {
        fragments: Vec<NewFragment>,
    },
    Overwrite {
        fragments: Vec<NewFragment>,
    },
    /// Delete rows, each named by id and its address when the transaction read it.
    Delete {
        rows: Vec<(RowId, RowAddress)>,
    },
    /// Delete the old copies of rows and add fragments holding their new values.
    Update {
        rows: Vec<(RowId, RowAddress)>,
        fragments: Vec<NewFragment>,
    },
    /// Replace `inputs` (as read) by `fragments`: per group, its input fragment ids and how
    /// many of `fragments` (in order) hold its rows.
    Compact {
        inputs: Vec<Fragment>,
        fragments: Vec<NewFragment>,
        groups: Vec<(Vec<FragmentId>, usize)>,
    },
    Checkpoint {
        checkpoint: crate::format::CheckpointRef,
    },
    Restore {
        from: Box<Manifest>,
    },
    /// Add index segments built from the rows of their fragments as read.
    CreateIndex {
        segments: Vec<IndexSegment>,
    },
    /// Remove every segment of an index (its sequence high-water mark stays).
    DropIndex {
        name: String,
    },
}

impl Action {
    fn operation(&self) -> Operation {
        match self {
            Action::Append { .. } => Operation::Append,
            Action::Overwrite { .. } => Operation::Overwrite,
            Action::Delete { .. } => Operation::Delete,
            Action::Update { .. } => Operation::Update,
            Action::Compact { .. } => Operation::Compact,
            Action::Checkpoint { .. } => Operation::Checkpoint,
            Action::Restore { .. } => Operation::Restore,
            Action::CreateIndex { .. } => Operation::CreateIndex,
            Action::DropIndex { .. } => Operation::DropIndex,
        }
    }
}

/// Applies `action` on top of `read` and publishes it, rebasing over concurrent commits.
pub(crate) async fn commit(
    store: &TableStore,
    read: &Manifest,
    mut action: Action,
    options: &TableOptions,
) -> Result<Manifest> {
    let table = store.display();
    read.check_writable(&table)?;
    let mut base = read.clone();
    for _ in 0..=options.max_commit_retries {
        let mut next = apply(store, &base, &action, read.version).await?;
        if store.publish_manifest(&mut next, &options.layout).await? {
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
            rebase(store, &mut action, &base, &other, read.version).await?;
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

/// Checks `action` against `next` (published on top of `prev`) and updates it to apply on
/// top of `next`.
async fn rebase(
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
    let other_rewrote = matches!(
        next.transaction.operation,
        Operation::Delete | Operation::Update | Operation::Compact
    );
    match action {
        Action::Overwrite { .. } | Action::Restore { .. } => Ok(()),
        _ if replaces_all => Err(conflict(
            action,
            read_version,
            next,
            "the table was replaced",
        )),
        Action::Append { .. } | Action::Checkpoint { .. } => Ok(()),
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
                let moved = moved.get_or_insert_with(|| added_row_ids(prev, next));
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

/// Where the carried rows of fragments new in `next` are.
fn added_row_ids(prev: &Manifest, next: &Manifest) -> HashMap<RowId, RowAddress> {
    let mut out = HashMap::new();
    for fragment in &next.fragments {
        if prev.fragment(fragment.id).is_some() {
            continue;
        }
        if let Some(seq) = &fragment.row_ids {
            for (offset, id) in seq.iter().enumerate() {
                out.insert(id, RowAddress::new(fragment.id, offset as u32));
            }
        }
    }
    out
}

/// Builds the manifest that `action` makes of `base`. Writes deletion files as needed.
async fn apply(
    store: &TableStore,
    base: &Manifest,
    action: &Action,
    read_version: u64,
) -> Result<Manifest> {
    let mut m = base.clone();
    m.version = base.version + 1;
    m.parent_version = Some(base.version);
    m.timestamp_micros = chrono::Utc::now()
        .timestamp_micros()
        .max(base.timestamp_micros + 1);
    let mut summary = TransactionSummary {
        operation: action.operation(),
        read_version,
        rows_added: 0,
        rows_removed: 0,
        fragments_removed: Vec::new(),
        fragments_added: Vec::new(),
    };
    let add = |m: &mut Manifest,
               summary: &mut TransactionSummary,
               fragments: &[NewFragment]|
     -> Result<()> {
        for new in fragments {
            let id = m.allocate_fragment_id()?;
            summary.rows_added += new.rows as u64;
            summary.fragments_added.push(id);
            m.fragments.push(new.clone().into_fragment(id));
        }
        Ok(())
    };
    match action {
        Action::Append { fragments } => add(&mut m, &mut summary, fragments)?,
        Action::Overwrite { fragments } => {
            summary.rows_removed = base.live_rows();
            summary.fragments_removed = base.fragments.iter().map(|f| f.id).collect();
            m.fragments.clear();
            m.relocation_checkpoint = None;
            add(&mut m, &mut summary, fragments)?;
        }
        Action::Delete { rows } => {
            summary.rows_removed = delete_rows(store, &mut m, rows, &HashSet::new()).await?;
        }
        Action::Update { rows, fragments } => {
            // A row the update writes again (same id) is moved, not deleted outright.
            let rewritten: HashSet<RowId> = fragments
                .iter()
                .filter_map(|f| f.carried_ids.as_ref())
                .flatten()
                .flatten()
                .copied()
                .collect();
            summary.rows_removed = delete_rows(store, &mut m, rows, &rewritten).await?;
            add(&mut m, &mut summary, fragments)?;
        }
        Action::Compact {
            inputs,
            fragments,
            groups,
        } => {
            apply_compaction(store, &mut m, &mut summary, inputs, fragments).await?;
            let mut outputs = summary.fragments_added.as_slice();
            for (group_inputs, count) in groups {
                let (group_outputs, rest) = outputs.split_at((*count).min(outputs.len()));
                m.indexes.on_compaction(group_inputs, group_outputs);
                outputs = rest;
            }
        }
        Action::Checkpoint { checkpoint } => {
            m.relocation_checkpoint = Some(checkpoint.clone());
        }
        Action::Restore { from } => {
            summary.rows_removed = base.live_rows();
            summary.rows_added = from.live_rows();
            m.schema = from.schema.clone();
            m.fragments = from.fragments.clone();
            m.relocation_checkpoint = from.relocation_checkpoint.clone();
            m.max_fragment_id = base.max_fragment_id.max(from.max_fragment_id);
            // The restored segments, numbered as they were; no number is handed out again.
            m.indexes = from.indexes.clone();
            m.indexes.keep_marks_of(&base.indexes);
        }
        Action::CreateIndex { segments } => {
            let mut added = 0;
            for segment in segments {
                let mut segment = segment.clone();
                // Rebased over compactions or overwrites, a segment covers only fragments
                // that still hold the rows it read, and none another segment of its name
                // covers.
                let covered = m.indexes.covered(&segment.name);
                let fragments = segment.fragments.clone();
                segment.fragments = fragments
                    .iter()
                    .filter(|&f| m.fragment(f).is_some() && !covered.contains(f))
                    .collect();
                if !segment.fragments.is_empty() {
                    m.indexes.add(segment)?;
                    added += 1;
                }
            }
            if added == 0 {
                return Err(Error::Conflict {
                    operation: action.operation(),
                    read_version,
                    other: Some(base.transaction.operation),
                    other_version: base.version,
                    reason: "the fragments the index was built from were rewritten or indexed \
                             meanwhile"
                        .into(),
                });
            }
        }
        Action::DropIndex { name } => {
            if m.indexes.remove(name) == 0 {
                return Err(Error::invalid(format!("no index named {name}")));
            }
        }
    }
    m.fragments.sort_by_key(|f| f.id);
    // Coverage never names a fragment the version does not have.
    let present: roaring::RoaringBitmap = m.fragments.iter().map(|f| f.id).collect();
    m.indexes.retain_fragments(|f| present.contains(f));
    m.transaction = summary;
    m.refresh_flags();
    Ok(m)
}

/// Marks `rows` deleted in `m`, writing one new deletion file per touched fragment; rows
/// whose ids are in `moved` count as moves.
async fn delete_rows(
    store: &TableStore,
    m: &mut Manifest,
    rows: &[(RowId, RowAddress)],
    moved: &HashSet<RowId>,
) -> Result<u64> {
    let mut by_fragment: BTreeMap<FragmentId, (RoaringBitmap, RoaringBitmap)> = BTreeMap::new();
    for (id, addr) in rows {
        let (offsets, moves) = by_fragment.entry(addr.fragment_id()).or_default();
        offsets.insert(addr.offset());
        if moved.contains(id) {
            moves.insert(addr.offset());
        }
    }
    let mut removed = 0;
    for (fragment_id, (offsets, moves)) in by_fragment {
        let version = m.version;
        let fragment = m
            .fragments
            .iter_mut()
            .find(|f| f.id == fragment_id)
            .ok_or_else(|| {
                Error::internal(format!("fragment {fragment_id} is not in the table"))
            })?;
        let mut fresh = offsets;
        if let Some(deleted) = store.fragment_deletions(fragment).await? {
            fresh -= deleted.as_ref();
        }
        if fresh.is_empty() {
            continue;
        }
        removed += fresh.len();
        fragment.deletion = Some(
            store
                .add_deletions(
                    fragment.deletion.as_ref(),
                    fragment_id,
                    version,
                    (&fresh, fresh.intersection_len(&moves)),
                    fragment.physical_rows,
                )
                .await?,
        );
    }
    Ok(removed)
}

/// A carried fragment whose row-id sequence has fewer ids than it has rows.
fn short_sequence(fragment: &Fragment) -> Error {
    Error::corrupt(
        "manifest",
        format!(
            "fragment {}: row-id sequence shorter than the fragment",
            fragment.id
        ),
    )
}

/// Compaction drops the deleted rows of its inputs. A row deleted outright whose id was
/// carried into an input has older copies elsewhere, marked as moves: once the input is gone
/// the view no longer points past them, so those marks become outright deletions.
async fn forget_moves_of_purged(
    store: &TableStore,
    m: &mut Manifest,
    inputs: &[Fragment],
) -> Result<()> {
    let mut purged: HashSet<RowId> = HashSet::new();
    for input in inputs {
        let (Some(vector), Some(seq)) = (&input.deletion, &input.row_ids) else {
            // No deletions, or only native rows, which have no older copies.
            continue;
        };
        if vector.only_moves() {
            continue;
        }
        let deleted = store.read_deletions(vector, input.physical_rows).await?;
        for (offset, id) in deleted.iter().zip(seq.get_many(deleted.iter())) {
            let id = id.ok_or_else(|| short_sequence(input))?;
            if id != RowAddress::new(input.id, offset).as_native_id() {
                purged.insert(id);
            }
        }
    }
    if purged.is_empty() {
        return Ok(());
    }
    let births: HashSet<FragmentId> = purged.iter().map(|id| id.birth_fragment()).collect();
    for fragment in &mut m.fragments {
        let Some(vector) = fragment.deletion.as_mut().filter(|v| v.only_moves()) else {
            continue;
        };
        let holds_copy = births.contains(&fragment.id)
            || fragment
                .row_ids
                .as_ref()
                .is_some_and(|seq| seq.iter().any(|id| purged.contains(&id)));
        if holds_copy {
            vector.forget_moves();
        }
    }
    Ok(())
}

async fn apply_compaction(
    store: &TableStore,
    m: &mut Manifest,
    summary: &mut TransactionSummary,
    inputs: &[Fragment],
    fragments: &[NewFragment],
) -> Result<()> {
    // Rows of the inputs deleted since the compaction read them: delete them in the output.
    let mut deleted_since: HashSet<RowId> = HashSet::new();
    for input in inputs {
        let now = m.fragment(input.id).ok_or_else(|| {
            Error::internal(format!("fragment {} is no longer in the table", input.id))
        })?;
        if now.deletion == input.deletion {
            continue;
        }
        let mut newly = store
            .fragment_deletions(now)
            .await?
            .map_or_else(RoaringBitmap::new, |d| d.as_ref().clone());
        if let Some(before) = store.fragment_deletions(input).await? {
            newly -= before.as_ref();
        }
        match &input.row_ids {
            Some(seq) => {
                for id in seq.get_many(newly.iter()) {
                    deleted_since.insert(id.ok_or_else(|| short_sequence(input))?);
                }
            }
            None => deleted_since.extend(
                newly
                    .iter()
                    .map(|offset| RowAddress::new(input.id, offset).as_native_id()),
            ),
        }
    }
    let input_ids: HashSet<FragmentId> = inputs.iter().map(|f| f.id).collect();
    summary.fragments_removed = inputs.iter().map(|f| f.id).collect();
    summary.rows_removed = deleted_since.len() as u64;
    m.fragments.retain(|f| !input_ids.contains(&f.id));
    forget_moves_of_purged(store, m, inputs).await?;
    for new in fragments {
        let id = m.allocate_fragment_id()?;
        summary.fragments_added.push(id);
        let mut fragment = new.clone().into_fragment(id);
        if !deleted_since.is_empty() {
            let mut deleted = RoaringBitmap::new();
            if let Some(ids) = &new.carried_ids {
                for (offset, carried) in ids.iter().enumerate() {
                    if carried.is_some_and(|c| deleted_since.contains(&c)) {
                        deleted.insert(offset as u32);
                    }
                }
            }
            if !deleted.is_empty() {
                let file = store.write_deletions(id, m.version, &deleted, 0).await?;
                fragment.deletion = Some(DeletionVector::single(file));
            }
        }
        m.fragments.push(fragment);
    }
    Ok(())
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
