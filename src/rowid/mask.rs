//! Row masks: which offsets of which fragments a set of row ids selects.
//!
//! A mask is a block-list world: **native id ranges ∩ fragment − tombstones + moved rows**.
//! Nothing here materializes the live rows of the table; cost follows the size of the query
//! set and of the relocation view.

use std::collections::BTreeMap;

use roaring::{RoaringBitmap, RoaringTreemap};

use super::{FragmentId, RelocationView, RowAddress, RowId, RowIdSequence};

/// What a mask needs to know of a fragment.
#[derive(Debug, Clone, Copy)]
pub struct FragmentLayout<'a> {
    /// The fragment.
    pub id: FragmentId,
    /// Rows stored in it, deleted or not.
    pub physical_rows: u32,
    /// Present for carried fragments.
    pub sequence: Option<&'a RowIdSequence>,
}

impl FragmentLayout<'_> {
    /// Offsets of this fragment whose rows were born here, intersected with `ids`.
    fn native_offsets(&self, ids: &RoaringTreemap) -> RoaringBitmap {
        let start = RowAddress::new(self.id, 0).as_u64();
        let end = start + self.physical_rows as u64;
        let mut out = RoaringBitmap::new();
        match self.sequence {
            None => {
                let mut range = RoaringTreemap::new();
                range.insert_range(start..end);
                range &= ids;
                out.extend(range.iter().map(|id| (id - start) as u32));
            }
            Some(seq) => {
                for (offset, id) in seq.iter().enumerate() {
                    let own = start + offset as u64;
                    if id.as_u64() == own && ids.contains(own) {
                        out.insert(offset as u32);
                    }
                }
            }
        }
        out
    }
}

/// The offsets, per fragment, where the rows whose ids are in `ids` are if they are live:
/// deletions are not applied. The caller removes each named fragment's outright deletions
/// (moves may be left out, see `DeletionVector::only_moves`), so it reads the deletions of
/// only the fragments that hold a candidate. Fragments with no candidate are absent.
pub fn candidate_offsets(
    ids: &RoaringTreemap,
    fragments: &[FragmentLayout<'_>],
    view: &RelocationView,
) -> BTreeMap<FragmentId, RoaringBitmap> {
    let mut masks: BTreeMap<FragmentId, RoaringBitmap> = BTreeMap::new();
    if ids.is_empty() {
        return masks;
    }
    let (Some(min_id), Some(max_id)) = (ids.min(), ids.max()) else {
        return masks;
    };
    let min_fragment = RowId::from_u64(min_id).birth_fragment();
    let max_fragment = RowId::from_u64(max_id).birth_fragment();
    for fragment in fragments {
        // Native rows of a fragment have ids inside the fragment's own address range.
        if fragment.id < min_fragment || fragment.id > max_fragment {
            continue;
        }
        let offsets = fragment.native_offsets(ids);
        if !offsets.is_empty() {
            masks.insert(fragment.id, offsets);
        }
    }
    // A moved row is where the view says, never at its birth address, whatever the birth
    // fragment's deletions say (a fragment whose deletions are all moves may pass none).
    let mut add_moved = |id: RowId, addr: RowAddress| {
        let birth = id.birth_address();
        if let Some(mask) = masks.get_mut(&birth.fragment_id()) {
            mask.remove(birth.offset());
        }
        masks
            .entry(addr.fragment_id())
            .or_default()
            .insert(addr.offset());
    };
    if ids.len() <= view.moved_rows() {
        for id in ids.iter().map(RowId::from_u64) {
            if let Some(addr) = view.lookup(id) {
                add_moved(id, addr);
            }
        }
    } else {
        for (id, addr) in view.iter_points() {
            if ids.contains(id.as_u64()) {
                add_moved(id, addr);
            }
        }
        for entry in view.range_entries() {
            for k in 0..entry.len as u64 {
                let id = entry.id_start.as_u64() + k;
                if ids.contains(id) {
                    add_moved(
                        RowId::from_u64(id),
                        RowAddress::from_u64(entry.addr_start.as_u64() + k),
                    );
                }
            }
        }
    }
    masks.retain(|_, mask| !mask.is_empty());
    masks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rowid::CarriedFragment;

    #[test]
    fn candidates_follow_moves() {
        // Fragment 0: 10 native rows; row 3 deleted, row 4 updated into fragment 1.
        let mut deleted0 = RoaringBitmap::new();
        deleted0.insert(3);
        deleted0.insert(4);
        let seq1 = RowIdSequence::from_ids(&[RowAddress::new(0, 4).as_u64()]);
        let fragments = [
            FragmentLayout {
                id: 0,
                physical_rows: 10,
                sequence: None,
            },
            FragmentLayout {
                id: 1,
                physical_rows: 1,
                sequence: Some(&seq1),
            },
        ];
        let view = RelocationView::build(
            &[CarriedFragment {
                id: 1,
                physical_rows: 1,
            }],
            [(1, &seq1)],
        );
        let mut ids = RoaringTreemap::new();
        ids.insert_range(RowAddress::new(0, 2).as_u64()..RowAddress::new(0, 6).as_u64());
        ids.insert(RowAddress::new(1, 0).as_u64()); // never existed: fragment 1 holds a moved row
        let mut masks = candidate_offsets(&ids, &fragments, &view);
        assert_eq!(
            masks[&0].iter().collect::<Vec<_>>(),
            vec![2, 3, 5],
            "4 moved"
        );
        *masks.get_mut(&0).unwrap() -= &deleted0;
        assert_eq!(masks[&0].iter().collect::<Vec<_>>(), vec![2, 5]);
        assert_eq!(masks[&1].iter().collect::<Vec<_>>(), vec![0]);
        assert_eq!(masks.len(), 2);
    }
}
