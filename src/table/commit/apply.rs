//! Applying an action: the manifest it makes of a base version, with the deletion files it
//! writes.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::action::{Action, NewFragment};
use crate::error::{Error, Result};

use crate::format::{
    DeletionVector, Fragment, Lineage, Manifest, TransactionSummary, VersionRuns, UNKNOWN_VERSION,
};
use crate::io::TableStore;
use crate::rowid::{FragmentId, RowAddress, RowId};

/// Builds the manifest that `action` makes of `base`. Writes deletion files as needed.
pub(super) async fn apply(
    store: &TableStore,
    base: &Manifest,
    action: &Action,
    read_version: u64,
) -> Result<Manifest> {
    let mut m = base.clone();
    // Change data is the commit's own; a restore keeps the table's feed as it is now.
    m.change_data = None;
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
        uuid: String::new(),
        origin: None,
    };
    let add = add_fragments;
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
        Action::CreateIndex { segments, replaces } => {
            for uuid in replaces {
                if !m.indexes.remove_segment(uuid) {
                    return Err(Error::Conflict {
                        operation: action.operation(),
                        read_version,
                        other: Some(base.transaction.operation),
                        other_version: base.version,
                        reason: "an index segment it replaces was removed meanwhile".into(),
                    });
                }
            }
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
        Action::AlterSchema {
            from,
            to,
            column_files,
        } => {
            super::schema::alter_schema(&mut m, from, to)?;
            super::schema::attach_column_files(&mut m, column_files)?;
        }
        Action::SetChangeDataFeed { enabled } => m.change_data_feed = *enabled,
        Action::SetPatchMaxShare { share } => m.patch_max_share = *share,
        Action::Patch {
            patches,
            fragments,
            deleted,
        } => {
            add(&mut m, &mut summary, fragments)?;
            let refused = add_patches(store, &mut m, patches).await?;
            refused.map_err(|reason| Error::Conflict {
                operation: action.operation(),
                read_version,
                other: Some(base.transaction.operation),
                other_version: base.version,
                reason,
            })?;
            summary.rows_removed = delete_rows(store, &mut m, deleted, &HashSet::new()).await?;
        }
    }
    m.fragments.sort_by_key(|f| f.id);
    // Coverage never names a fragment the version does not have.
    let present: roaring::RoaringBitmap = m.fragments.iter().map(|f| f.id).collect();
    m.indexes.retain_fragments(|f| present.contains(f));
    m.transaction = summary;
    Ok(m)
}

/// Records `captured` (written before the commit) as `m`'s change data, under new
/// fragment ids: ids of the table's, never reused, so that a change read can address them
/// beside the table's fragments.
///
/// An update captures its rows in the order it writes them: a capture holding the same ids
/// as the fragment the update added in its place shares that fragment's sequence, and the
/// manifest stores them once.
pub(super) fn add_change_data(m: &mut Manifest, captured: &[NewFragment]) -> Result<()> {
    let mut fragments = Vec::with_capacity(captured.len());
    for (i, new) in captured.iter().enumerate() {
        let id = m.allocate_fragment_id()?;
        let mut fragment = new.clone().into_fragment(id, m.version);
        let added = (m.transaction.fragments_added.get(i)).and_then(|&added| m.fragment(added));
        if let (Some(added), Some(ids)) = (added, fragment.row_ids.sequence()) {
            if added.row_ids.sequence().is_some_and(|shared| shared == ids) {
                fragment.row_ids = added.row_ids.clone();
            }
        }
        fragments.push(fragment);
    }
    m.change_data = Some(fragments);
    Ok(())
}

/// Adds `fragments` to `m` under new ids, counting them in `summary`.
pub(super) fn add_fragments(
    m: &mut Manifest,
    summary: &mut TransactionSummary,
    fragments: &[NewFragment],
) -> Result<()> {
    for new in fragments {
        let id = m.allocate_fragment_id()?;
        summary.rows_added += new.rows as u64;
        summary.fragments_added.push(id);
        m.fragments.push(new.clone().into_fragment(id, m.version));
    }
    Ok(())
}

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

/// Adds each of `patches` to its fragment as `m`'s: `Ok(Err(reason))` when the version it
/// applies to no longer lets it (its fragment rewritten, a patched row deleted, an index
/// made of a patched column).
async fn add_patches(
    store: &TableStore,
    m: &mut Manifest,
    patches: &[super::action::NewPatch],
) -> Result<std::result::Result<(), String>> {
    let version = m.version;
    for patch in patches {
        m.indexes.uncover(patch.fragment, &patch.file.field_ids);
        let Some(fragment) = m.fragments.iter_mut().find(|f| f.id == patch.fragment) else {
            return Ok(Err(format!("fragment {} was rewritten", patch.fragment)));
        };
        if let Some(deleted) = store.fragment_deletions(fragment).await? {
            if !deleted.is_disjoint(&patch.offsets) {
                return Ok(Err(format!(
                    "a patched row of fragment {} was deleted or updated",
                    fragment.id
                )));
            }
        }
        if fragment.lineage.is_recorded() {
            let lineage = store
                .lineage_of(&fragment.lineage, fragment.physical_rows)
                .await?;
            let rows = fragment.physical_rows;
            fragment.lineage = patched_lineage(&lineage, rows, &patch.offsets, version);
        }
        fragment.patches.push(crate::format::RowPatch {
            file: patch.file.clone(),
            offsets: patch.offsets.clone(),
            version,
        });
    }
    Ok(Ok(()))
}

/// `lineage` (its rows at hand) with the rows at `offsets` last changed in `version`.
fn patched_lineage(lineage: &Lineage, rows: u32, offsets: &RoaringBitmap, version: u64) -> Lineage {
    let written_in = lineage.written_in.unwrap_or(UNKNOWN_VERSION);
    let versions: Vec<u64> = (0..rows)
        .map(|offset| match offsets.contains(offset) {
            true => version,
            false => lineage.updated_at(offset).unwrap_or(UNKNOWN_VERSION),
        })
        .collect();
    let all_written_in = versions.iter().all(|&v| v == written_in);
    Lineage {
        row_updated: (!all_written_in).then(|| Arc::new(VersionRuns::from_values(&versions))),
        updated_file: None,
        ..lineage.clone()
    }
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
        let (Some(vector), Some(seq)) = (&input.deletion, input.row_ids.sequence()) else {
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
                .sequence()
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
        match input.row_ids.sequence() {
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
        let mut fragment = new.clone().into_fragment(id, m.version);
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
