//! Old values from change data: where a change read takes a deleted row's values and a
//! preimage when the range's commits captured them (`change_capture`).
//!
//! The read's old side is then a snapshot of `from` that also holds the fragments the range
//! captured, and each old-side change is pointed at the first capture of its row in the
//! range (which holds the row's values at `from`). A change whose row no capture holds keeps
//! its place at `from`, which holds the same values: captures only make the read denser,
//! never different.

use std::sync::Arc;

use crate::format::{Fragment, Manifest, Operation};
use crate::rowid::RowAddress;

use super::values::Change;

/// Whether a version of this operation can change rows' values or existence. Compaction
/// moves rows unchanged; the others touch no row.
pub(in crate::table) fn changes_rows(operation: Operation) -> bool {
    !matches!(
        operation,
        Operation::Compact
            | Operation::Checkpoint
            | Operation::CreateIndex
            | Operation::DropIndex
            | Operation::AlterSchema
    )
}

/// Whether version `m` captured every row it removed: an append removes none; a delete or
/// an update did if it lists change data.
fn captured_all(m: &Manifest) -> bool {
    !changes_rows(m.transaction.operation)
        || m.transaction.operation == Operation::Append
        || m.change_data.is_some()
}

/// The old side of a change read over `manifests` (`from` first, `to` last) taken from the
/// range's change data: `from`'s manifest with the captured fragments beside its own, and
/// `report`'s deletes and preimages pointed at their rows' first captures. `None`, and
/// `report` untouched, when some version in the range changed rows without capturing them,
/// the schema changed before the last (captures hold the rows as their commit read them),
/// or a change no capture holds has no place at `from` to fall back to.
pub(in crate::table) fn captured_old_side(
    manifests: &[Arc<Manifest>],
    report: &mut [Change],
) -> Option<Manifest> {
    let (first, rest) = manifests.split_first()?;
    let before_last = &manifests[..manifests.len() - 1];
    if rest.is_empty()
        || !report.iter().any(Change::old_values)
        || !rest.iter().all(|m| captured_all(m))
        || before_last.iter().any(|m| m.schema != first.schema)
    {
        return None;
    }
    // Every captured fragment, oldest commit first.
    let captured: Vec<&Fragment> = rest
        .iter()
        .flat_map(|m| m.change_data.iter().flatten())
        .collect();
    if captured.is_empty() {
        return None;
    }
    let found = first_captures(&captured, report);
    let unplaced = |(change, found): (&Change, &Option<RowAddress>)| {
        change.old_values() && found.is_none() && change.at.is_none()
    };
    if report.iter().zip(&found).any(unplaced) || found.iter().all(Option::is_none) {
        return None;
    }
    for (change, found) in report.iter_mut().zip(found) {
        if found.is_some() {
            change.at = found;
        }
    }
    let mut old_side = Manifest::clone(first);
    old_side.fragments.extend(captured.into_iter().cloned());
    old_side.fragments.sort_by_key(|f| f.id);
    // The fragments are all loaded: the old side is never stored nor searched by id.
    old_side.fragment_segments.clear();
    old_side.relocation_checkpoint = None;
    Some(old_side)
}

/// For each change of `report` (in id order) on the old side, the place of its row's first
/// capture among `captured` (in commit order), if any: every captured row sorted by id, then
/// by commit, the first of each id kept, and walked up beside the report.
fn first_captures(captured: &[&Fragment], report: &[Change]) -> Vec<Option<RowAddress>> {
    let mut rows: Vec<(u64, usize, RowAddress)> = Vec::new();
    for (order, fragment) in captured.iter().enumerate() {
        let ids = fragment
            .row_ids
            .sequence()
            .map(|s| s.iter().map(|id| id.as_u64()));
        let places = (0..fragment.physical_rows).map(|o| RowAddress::new(fragment.id, o));
        rows.extend(
            (ids.into_iter().flatten())
                .zip(places)
                .map(|(id, at)| (id, order, at)),
        );
    }
    rows.sort_unstable_by_key(|&(id, order, _)| (id, order));
    // The first capture wins; later ones hold values changed in the range.
    rows.dedup_by_key(|&mut (id, _, _)| id);
    let mut rows = rows.into_iter().peekable();
    (report.iter())
        .map(|change| {
            if !change.old_values() {
                return None;
            }
            while rows.next_if(|&(id, _, _)| id < change.id).is_some() {}
            rows.peek()
                .filter(|&&(id, _, _)| id == change.id)
                .map(|&(_, _, at)| at)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{DataFile, FragmentRowIds, Lineage, TablePath};
    use crate::rowid::RowIdSequence;
    use crate::table::changes::values::ChangeType;

    fn captured(id: u32, ids: &[u64]) -> Fragment {
        Fragment {
            id,
            files: vec![DataFile {
                path: TablePath::parse("data/c.parquet").expect("a path"),
                field_ids: vec![0],
                row_count: ids.len() as u64,
                file_size_bytes: 1,
                column_stats: Vec::new(),
                blob_reuse_index: None,
            }],
            deletion: None,
            physical_rows: ids.len() as u32,
            row_ids: FragmentRowIds::of(Some(Arc::new(RowIdSequence::from_ids(ids)))),
            lineage: Lineage::native(1),
            patches: Vec::new(),
        }
    }

    #[test]
    fn a_rows_first_capture_in_the_range_holds_its_old_values() {
        // Commit 1 captured rows 3 and 7, commit 2 rows 9 and 7, as its scan met them (7
        // updated twice).
        let captures = [captured(10, &[3, 7]), captured(11, &[9, 7])];
        let refs: Vec<&Fragment> = captures.iter().collect();
        let report = [
            Change::by_id(2, 3, ChangeType::Delete),
            Change::by_id(2, 5, ChangeType::Insert),
            Change::by_id(3, 7, ChangeType::UpdatePreimage),
            Change::by_id(3, 7, ChangeType::UpdatePostimage),
            Change::by_id(3, 8, ChangeType::Delete),
            Change::by_id(3, 9, ChangeType::UpdatePreimage),
        ];
        let at = |f, o| Some(RowAddress::new(f, o));
        assert_eq!(
            first_captures(&refs, &report),
            vec![at(10, 0), None, at(10, 1), None, None, at(11, 0)]
        );
    }
}
