//! The net change between two versions read from the two ends alone, by row lineage.
//!
//! A row's values change in place only by a row patch: an update writes the row into a
//! fragment the update adds, with the update's version as the row's last change. So between
//! `from` and `to`:
//! - every row of `to` whose values changed in the range sits in a fragment added in the
//!   range, with a last change after `from`, or is one a patch added in the range holds;
//!   rows of added fragments with an older last change were only moved (by a compaction or
//!   a merge);
//! - every row of `from` that is not where it was at `to` was deleted from its fragment
//!   (its deletion vector grew) or its fragment was dropped;
//! - of those, the ones found again at `to` were updated (changed) or moved (not), the rest
//!   were deleted.
//!
//! That reads the deletion files added to the fragments both ends hold (the newest files
//! only), the deletions and ids of the fragments only one end holds, and no other version's
//! manifest content. It needs every fragment added in the range to record lineage, and no
//! row brought back (a restore undeletes rows): otherwise it gives way to the diff of each
//! version (`change_reads`). What it cannot tell is which version deleted a row: deletes
//! carry `to`'s version until dated.

use futures::{StreamExt, TryStreamExt};
use roaring::RoaringBitmap;

use super::values::{Change, ChangeType, Counts};
use crate::error::{Error, Result};
use crate::format::{Fragment, Manifest};
use crate::io::TableStore;
use crate::rowid::RowAddress;

/// Fragments' deletions or row ids read at once.
const CONCURRENT_FRAGMENT_READS: usize = 8;

/// One fragment's part of a change between two versions.
pub(in crate::table) enum Part<'a> {
    /// Held by both, its deletions or its row patches changed (before, after).
    Deletions(&'a Fragment, &'a Fragment),
    /// Held by the first only: its live rows left.
    Dropped(&'a Fragment),
    /// Held by the second only (added in between): its live rows arrived, changed or moved.
    Added(&'a Fragment),
}

/// What one part found.
#[derive(Default)]
struct Found {
    /// Rows live at `from` that are not at their place there at `to`: (id, place at `from`).
    left: Vec<(u64, RowAddress)>,
    /// Rows of `to` whose values changed after `from`: (id, place at `to`, last change).
    changed: Vec<(u64, RowAddress, u64)>,
    /// Rows of `to` moved in the range with their values unchanged.
    moved: Vec<u64>,
    /// Rows a restore brought back: the ends cannot tell this change.
    undeleted: bool,
}

/// The net change from `first` to `last` (see the module's notes): the changes of the kinds
/// `wanted`, deletes carrying `last`'s version, and the count of every kind; `None` when
/// the ends cannot tell it.
pub(in crate::table) async fn net_change(
    store: &TableStore,
    (first, last): (&Manifest, &Manifest),
    wanted: &(dyn Fn(ChangeType) -> bool + Sync),
) -> Result<Option<(Vec<Change>, Counts)>> {
    let parts = fragment_parts(first, last)?;
    let unrecorded = |p: &Part| matches!(p, Part::Added(n) if !n.lineage.is_recorded());
    if parts.iter().any(unrecorded) {
        return Ok(None);
    }
    let from = first.version;
    let reads: Vec<_> = (parts.into_iter())
        .map(|part| read_part(store, part, from))
        .collect();
    // In fragment order: rows born in a fragment follow those of fragments before it, so
    // the ids come in long ascending runs, which the sorts below take as they are.
    let mut found = futures::stream::iter(reads).buffered(CONCURRENT_FRAGMENT_READS);
    let mut all = Found::default();
    while let Some(part) = found.try_next().await? {
        if part.undeleted {
            return Ok(None);
        }
        all.left.extend(part.left);
        all.changed.extend(part.changed);
        all.moved.extend(part.moved);
    }
    Ok(Some(report(all, last.version, wanted)?))
}

/// The parts of the change from `first` to `last`, fragment by fragment, in fragment order.
pub(in crate::table) fn fragment_parts<'a>(
    first: &'a Manifest,
    last: &'a Manifest,
) -> Result<Vec<Part<'a>>> {
    let mut parts = Vec::new();
    let (mut old, mut new) = (
        first.fragments.iter().peekable(),
        last.fragments.iter().peekable(),
    );
    loop {
        match (old.peek().copied(), new.peek().copied()) {
            (None, None) => break,
            (Some(o), n) if n.is_none_or(|n| o.id < n.id) => {
                parts.push(Part::Dropped(o));
                old.next();
            }
            (o, Some(n)) if o.is_none_or(|o| n.id < o.id) => {
                parts.push(Part::Added(n));
                new.next();
            }
            (Some(o), Some(n)) => {
                if o.deletion != n.deletion || o.patches != n.patches {
                    parts.push(Part::Deletions(o, n));
                }
                old.next();
                new.next();
            }
            _ => return Err(Error::internal("fragment lists out of order")),
        }
    }
    Ok(parts)
}

async fn read_part(store: &TableStore, part: Part<'_>, from: u64) -> Result<Found> {
    let mut found = Found::default();
    match part {
        Part::Deletions(o, n) => {
            let (deleted, undeleted) = store
                .deletion_change(o.deletion.as_ref(), n.deletion.as_ref(), o.physical_rows)
                .await?;
            found.undeleted = !undeleted.is_empty();
            found.left = ids_at(o, &deleted)?;
            // Rows patched in the range stay where they were: they left their values there
            // and arrived with new ones (an update), unless deleted since.
            let (mut patched, versions) = patched_between(o, n);
            // Patches taken back (a restore): the ends cannot tell which values returned.
            found.undeleted |= o.patches.len() > n.patches.len() - versions.len();
            patched -= &deleted;
            for (id, at) in ids_at(n, &patched)? {
                let version = (versions.iter().rev())
                    .find(|(offsets, _)| offsets.contains(at.offset()))
                    .map_or(from, |(_, version)| *version);
                found.left.push((id, at));
                found.changed.push((id, at, version));
            }
        }
        Part::Dropped(o) => found.left = ids_at(o, &live_offsets(store, o).await?)?,
        Part::Added(n) => {
            // By the bounds the manifest keeps, a fragment whose rows all last changed by
            // `from` (or never recorded it) only moved rows: its versions need not be read.
            let lineage = match n.lineage.updated_bounds() {
                Some((_, newest)) if newest > from => {
                    Some(store.lineage_of(&n.lineage, n.physical_rows).await?)
                }
                _ => None,
            };
            for (id, at) in ids_at(n, &live_offsets(store, n).await?)? {
                match lineage.as_ref().and_then(|l| l.updated_at(at.offset())) {
                    Some(version) if version > from => found.changed.push((id, at, version)),
                    // Unknown: last changed before natal recorded lineage, so before `from`.
                    _ => found.moved.push(id),
                }
            }
        }
    }
    Ok(found)
}

/// The offsets of the rows whose values differ between two versions of a fragment, `o` and
/// then `n`, by their patches: those the patches either holds and the other does not hold.
/// With them, the offsets and version of each patch `n` added (oldest first).
pub(in crate::table) fn patched_between<'a>(
    o: &'a Fragment,
    n: &'a Fragment,
) -> (RoaringBitmap, Vec<(&'a RoaringBitmap, u64)>) {
    let shared = (o.patches.iter().zip(&n.patches))
        .take_while(|(a, b)| a == b)
        .count();
    let (taken_back, added) = (&o.patches[shared..], &n.patches[shared..]);
    let mut offsets = RoaringBitmap::new();
    for patch in taken_back.iter().chain(added) {
        offsets |= patch.offsets.as_ref();
    }
    let versions = (added.iter())
        .map(|p| (p.offsets.as_ref(), p.version))
        .collect();
    (offsets, versions)
}

/// The offsets of a fragment's live rows.
pub(in crate::table) async fn live_offsets(
    store: &TableStore,
    fragment: &Fragment,
) -> Result<RoaringBitmap> {
    let mut offsets = RoaringBitmap::new();
    offsets.insert_range(0..fragment.physical_rows);
    if let Some(deleted) = store.fragment_deletions(fragment).await? {
        offsets -= deleted.as_ref();
    }
    Ok(offsets)
}

/// The ids of the rows at `offsets` of `fragment`, with their addresses.
pub(in crate::table) fn ids_at(
    fragment: &Fragment,
    offsets: &RoaringBitmap,
) -> Result<Vec<(u64, RowAddress)>> {
    let at = |offset: u32| RowAddress::new(fragment.id, offset);
    let Some(sequence) = fragment.row_ids.sequence() else {
        let base = at(0).as_u64();
        return Ok(offsets
            .iter()
            .map(|o| (base + u64::from(o), at(o)))
            .collect());
    };
    // Offsets ascend: one walk over the sequence.
    (sequence.get_many(offsets.iter()).zip(offsets.iter()))
        .map(|(id, offset)| {
            let id = id.ok_or_else(|| {
                Error::internal(format!("an offset past fragment {}'s row ids", fragment.id))
            })?;
            Ok((id.as_u64(), at(offset)))
        })
        .collect()
}

/// The report of what the parts found, in report order (by row id), holding the kinds
/// `wanted`; deletes carry `to`.
fn report(
    mut found: Found,
    to: u64,
    wanted: &dyn Fn(ChangeType) -> bool,
) -> Result<(Vec<Change>, Counts)> {
    // Stable sorts: they find the ascending runs the parts came in and merge them.
    found.left.sort_by_key(|&(id, _)| id);
    found.changed.sort_by_key(|&(id, _, _)| id);
    found.moved.sort();
    let mut counts = Counts::default();
    // At most: a pair per changed row, a delete per row left (pages only touched if used).
    let mut report = Vec::with_capacity(2 * found.changed.len() + found.left.len());
    let mut push = |version, id, kind, at| {
        counts.add(kind);
        if wanted(kind) {
            let at = Some(at);
            report.push(Change {
                version,
                id,
                kind,
                at,
            });
        }
    };
    // One walk up the ids of the three lists: a row changed is an update if it left a
    // place at `from`, else an insert; a row left and neither changed nor moved was deleted.
    let mut changed = found.changed.iter().peekable();
    let mut moved = found.moved.iter().peekable();
    let not_live = |id: u64| {
        Error::internal(format!(
            "row {id} was moved unchanged in the range but was not live before it"
        ))
    };
    for &(id, before) in &found.left {
        while let Some(&(c, at, version)) = changed.next_if(|c| c.0 < id) {
            push(version, c, ChangeType::Insert, at);
        }
        if let Some(&(_, at, version)) = changed.next_if(|c| c.0 == id) {
            push(version, id, ChangeType::UpdatePreimage, before);
            push(version, id, ChangeType::UpdatePostimage, at);
            continue;
        }
        if let Some(&m) = moved.next_if(|&&m| m < id) {
            return Err(not_live(m));
        }
        if moved.next_if(|&&m| m == id).is_none() {
            push(to, id, ChangeType::Delete, before);
        }
    }
    for &(id, at, version) in changed {
        push(version, id, ChangeType::Insert, at);
    }
    if let Some(&m) = moved.next() {
        return Err(not_live(m));
    }
    Ok((report, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ends_tell_updates_inserts_moves_and_deletes_apart() {
        let at = RowAddress::new;
        let found = Found {
            // Rows 1, 2 and 3 left fragment 0.
            left: vec![(3, at(0, 3)), (1, at(0, 1)), (2, at(0, 2))],
            // Row 1 updated in version 5, row 9 inserted in 6.
            changed: vec![(9, at(2, 0), 6), (1, at(1, 0), 5)],
            // Row 2 compacted into fragment 1.
            moved: vec![2],
            undeleted: false,
        };
        let (changes, counts) = report(found, 7, &|_| true).expect("report");
        let kinds: Vec<(u64, u64, ChangeType, Option<RowAddress>)> = (changes.into_iter())
            .map(|c| (c.version, c.id, c.kind, c.at))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (5, 1, ChangeType::UpdatePreimage, Some(at(0, 1))),
                (5, 1, ChangeType::UpdatePostimage, Some(at(1, 0))),
                (7, 3, ChangeType::Delete, Some(at(0, 3))),
                (6, 9, ChangeType::Insert, Some(at(2, 0))),
            ]
        );
        let expected = Counts {
            inserted: 1,
            updated: 1,
            deleted: 1,
        };
        assert_eq!(counts, expected);
        let inconsistent = Found {
            moved: vec![4],
            ..Found::default()
        };
        assert!(report(inconsistent, 7, &|_| true).is_err());
    }
}
