//! The relocation view: where every moved row is now.
//!
//! It is the in-memory transpose of the carried fragments' forward sequences: for each
//! position whose id differs from its own address, an entry id → address. Nothing is
//! persisted except an optional checkpoint of the result, and deletion vectors are never read.
//!
//! Layout, chosen for resident size (bytes per moved row, seed 000's headline figure):
//! - **range entries** (24 B each) for runs of consecutive ids moved to consecutive addresses
//!   — what compaction produces;
//! - **point entries** for the rest — what updates produce. Ids are grouped by their birth
//!   fragment (the high 32 bits); each group keeps its moved offsets (the low 32 bits) as a
//!   roaring bitmap, whose rank numbers the group's points. Each point stores only a *slot*:
//!   the row's position in the concatenation of all carried fragments (which a small table of
//!   carried fragments turns back into an address), bit-packed to the width the largest slot
//!   needs. A point costs the slot's width plus 2 bytes (sparse groups) or less (dense ones):
//!   3–4 bytes on the benchmarks (`BENCHMARKS.md`), where a sorted (id, slot) list cost 8.
//!
//! When an id appears twice, the larger address wins: writes only ever land at newer
//! fragments, so the larger address is the current one.

use std::collections::BTreeSet;

use roaring::RoaringBitmap;

use super::packed::PackedInts;
use super::{FragmentId, IdSet, RowAddress, RowId, RowIdSequence};

/// Runs shorter than this stay point entries: a range entry costs as much as three points.
const MIN_RANGE_LEN: u64 = 3;

/// A run of `len` consecutive ids that moved to `len` consecutive addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeEntry {
    /// The first id of the run.
    pub id_start: RowId,
    /// Where the first id is now.
    pub addr_start: RowAddress,
    /// Ids in the run.
    pub len: u32,
}

impl RangeEntry {
    fn contains(&self, id: u64) -> bool {
        id >= self.id_start.as_u64() && id - self.id_start.as_u64() < self.len as u64
    }
}

/// A carried fragment, as the view needs it: its id and physical row count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CarriedFragment {
    /// The fragment.
    pub id: FragmentId,
    /// Rows stored in it, deleted or not.
    pub physical_rows: u32,
}

/// Maps slots (positions across all carried fragments) to addresses and back.
#[derive(Debug, Clone, Default)]
struct SlotTable {
    /// (fragment id, first slot), sorted by fragment id and so by slot.
    starts: Vec<(FragmentId, u64)>,
}

impl SlotTable {
    fn new(carried: &[CarriedFragment]) -> Self {
        let mut starts = Vec::with_capacity(carried.len());
        let mut next = 0u64;
        let mut sorted = carried.to_vec();
        sorted.sort_by_key(|c| c.id);
        for c in sorted {
            starts.push((c.id, next));
            next += c.physical_rows as u64;
        }
        Self { starts }
    }

    fn slot_of(&self, addr: RowAddress) -> Option<u64> {
        let i = self
            .starts
            .binary_search_by_key(&addr.fragment_id(), |&(f, _)| f)
            .ok()?;
        Some(self.starts[i].1 + addr.offset() as u64)
    }

    fn address_of(&self, slot: u64) -> RowAddress {
        let i = self.starts.partition_point(|&(_, start)| start <= slot) - 1;
        let (fragment, start) = self.starts[i];
        RowAddress::new(fragment, (slot - start) as u32)
    }
}

/// The point entries of the ids born in one fragment.
#[derive(Debug, Clone)]
struct PointBlock {
    birth_fragment: FragmentId,
    /// The moved ids' offsets in their birth fragment; the i-th (by rank) is point
    /// `first + i`.
    offsets: RoaringBitmap,
    first: usize,
}

/// The id → address map of every moved row. Build it with [`RelocationView::build`] or
/// [`RelocationView::merge`]; query it with [`RelocationView::lookup`].
#[derive(Debug, Clone, Default)]
pub struct RelocationView {
    ranges: Vec<RangeEntry>,
    /// Sorted by birth fragment.
    point_blocks: Vec<PointBlock>,
    point_slots: PackedInts,
    slots: SlotTable,
}

impl RelocationView {
    /// Transposes the sequences of carried fragments. `all_carried` lists every carried
    /// fragment of the snapshot (it defines slots); `sequences` those to transpose.
    pub fn build<'a>(
        all_carried: &[CarriedFragment],
        sequences: impl IntoIterator<Item = (FragmentId, &'a RowIdSequence)>,
    ) -> Self {
        let slots = SlotTable::new(all_carried);
        let pairs = moved_pairs(sequences, None);
        Self::from_sorted_pairs(pairs, slots)
    }

    /// The part of [`Self::build`]'s view that answers for `wanted`: one pass over the
    /// sequences keeping only those ids' entries, so a few lookups need not sort every
    /// moved row. Lookups of ids in `wanted` answer as the whole view's would.
    pub fn build_for<'a>(
        all_carried: &[CarriedFragment],
        sequences: impl IntoIterator<Item = (FragmentId, &'a RowIdSequence)>,
        wanted: &IdSet,
    ) -> Self {
        let slots = SlotTable::new(all_carried);
        let pairs = moved_pairs(sequences, Some(wanted));
        Self::from_sorted_pairs(pairs, slots)
    }

    /// Combines an older view (from a checkpoint) with entries transposed from newer
    /// fragments. Every newer entry beats every older one: newer fragments have larger ids.
    /// Older entries whose target fragment is not in `all_carried` are dropped.
    pub fn merge<'a>(
        all_carried: &[CarriedFragment],
        older: impl IntoIterator<Item = RangeEntry>,
        newer_sequences: impl IntoIterator<Item = (FragmentId, &'a RowIdSequence)>,
    ) -> Self {
        let slots = SlotTable::new(all_carried);
        let newer = Self::from_sorted_pairs(moved_pairs(newer_sequences, None), slots.clone());
        let mut pairs: Vec<(u64, u64)> = Vec::new();
        let mut older_ranges: Vec<RangeEntry> = Vec::new();
        for entry in older {
            if slots.slot_of(entry.addr_start).is_none() {
                continue; // target fragment removed since the checkpoint
            }
            if entry.len as u64 >= MIN_RANGE_LEN {
                older_ranges.push(entry);
            } else {
                for k in 0..entry.len as u64 {
                    pairs.push((entry.id_start.as_u64() + k, entry.addr_start.as_u64() + k));
                }
            }
        }
        // Older points survive unless a newer entry names the same id.
        pairs.retain(|&(id, _)| newer.lookup_raw(id).is_none());
        // Older ranges lose the ids a newer entry names.
        let mut ranges = Vec::new();
        for entry in older_ranges {
            subtract_newer(entry, &newer, &mut ranges);
        }
        for (id, addr) in newer.iter_points() {
            pairs.push((id.as_u64(), addr.as_u64()));
        }
        pairs.sort_unstable();
        ranges.extend(newer.ranges.iter().copied());
        ranges.sort_by_key(|r| r.id_start);
        let mut view = Self::from_sorted_pairs(pairs, slots);
        view.ranges.extend(ranges);
        view.ranges.sort_by_key(|r| r.id_start);
        view
    }

    fn from_sorted_pairs(mut pairs: Vec<(u64, u64)>, slots: SlotTable) -> Self {
        pairs.sort_unstable_by_key(|&(id, _)| id);
        // Keep the largest address per id.
        pairs.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = earlier.1.max(later.1);
                true
            } else {
                false
            }
        });
        let mut ranges = Vec::new();
        let mut points: Vec<(u64, u64)> = Vec::new();
        let mut i = 0;
        while i < pairs.len() {
            let mut j = i + 1;
            while j < pairs.len()
                && pairs[j].0 == pairs[j - 1].0 + 1
                && pairs[j].1 == pairs[j - 1].1 + 1
                && RowAddress::from_u64(pairs[j].1).fragment_id()
                    == RowAddress::from_u64(pairs[i].1).fragment_id()
                && RowId::from_u64(pairs[j].0).birth_fragment()
                    == RowId::from_u64(pairs[i].0).birth_fragment()
                && (j - i) < u32::MAX as usize
            {
                j += 1;
            }
            if (j - i) as u64 >= MIN_RANGE_LEN {
                ranges.push(RangeEntry {
                    id_start: RowId::from_u64(pairs[i].0),
                    addr_start: RowAddress::from_u64(pairs[i].1),
                    len: (j - i) as u32,
                });
            } else {
                points.extend_from_slice(&pairs[i..j]);
            }
            i = j;
        }
        drop(pairs);
        let birth = |id: u64| RowId::from_u64(id).birth_fragment();
        let mut point_blocks: Vec<PointBlock> = Vec::new();
        let mut first = 0;
        for block in points.chunk_by(|a, b| birth(a.0) == birth(b.0)) {
            // Ids are sorted and distinct, so their offsets are too (the fallback never runs).
            let offsets = block.iter().map(|&(id, _)| id as u32);
            let mut offsets = RoaringBitmap::from_sorted_iter(offsets.clone())
                .unwrap_or_else(|_| offsets.collect());
            offsets.optimize();
            point_blocks.push(PointBlock {
                birth_fragment: birth(block[0].0),
                offsets,
                first,
            });
            first += block.len();
        }
        // Every target is in a carried fragment, which the slot table lists.
        let raw_slots: Vec<u64> = points
            .iter()
            .map(|&(_, addr)| {
                slots
                    .slot_of(RowAddress::from_u64(addr))
                    .unwrap_or(u64::MAX)
            })
            .collect();
        Self {
            ranges,
            point_blocks,
            point_slots: PackedInts::from_values(&raw_slots),
            slots,
        }
    }

    fn point_block(&self, birth_fragment: FragmentId) -> Option<&PointBlock> {
        let b = self
            .point_blocks
            .binary_search_by_key(&birth_fragment, |b| b.birth_fragment)
            .ok()?;
        Some(&self.point_blocks[b])
    }

    /// Where a moved row is now, or `None` if the id never moved (its address is its id).
    /// Does not consult deletions: the caller checks the address is live.
    pub fn lookup(&self, id: RowId) -> Option<RowAddress> {
        self.lookup_raw(id.as_u64())
    }

    fn lookup_raw(&self, id: u64) -> Option<RowAddress> {
        let row = RowId::from_u64(id);
        if let Some(block) = self.point_block(row.birth_fragment()) {
            let offset = id as u32;
            if block.offsets.contains(offset) {
                let k = block.first + block.offsets.rank(offset) as usize - 1;
                return Some(self.slots.address_of(self.point_slots.get(k)));
            }
        }
        let r = self.ranges.partition_point(|e| e.id_start.as_u64() <= id);
        let entry = self.ranges.get(r.checked_sub(1)?)?;
        entry.contains(id).then(|| {
            RowAddress::from_u64(entry.addr_start.as_u64() + (id - entry.id_start.as_u64()))
        })
    }

    /// The runs of moved ids, by first id.
    pub fn range_entries(&self) -> &[RangeEntry] {
        &self.ranges
    }

    /// Moved ids held one by one (outside runs).
    pub fn point_count(&self) -> usize {
        self.point_slots.len()
    }

    /// Every point entry, by id.
    pub fn iter_points(&self) -> impl Iterator<Item = (RowId, RowAddress)> + '_ {
        self.point_blocks.iter().flat_map(move |block| {
            block.offsets.iter().enumerate().map(move |(i, offset)| {
                let id = RowAddress::new(block.birth_fragment, offset).as_native_id();
                let slot = self.point_slots.get(block.first + i);
                (id, self.slots.address_of(slot))
            })
        })
    }

    /// All entries as ranges (points have length 1), sorted by id: what a checkpoint stores.
    pub fn entries(&self) -> Vec<RangeEntry> {
        let mut all: Vec<RangeEntry> = self
            .iter_points()
            .map(|(id_start, addr_start)| RangeEntry {
                id_start,
                addr_start,
                len: 1,
            })
            .chain(self.ranges.iter().copied())
            .collect();
        all.sort_by_key(|e| e.id_start);
        all
    }

    /// Number of moved rows the view covers.
    pub fn moved_rows(&self) -> u64 {
        self.point_slots.len() as u64 + self.ranges.iter().map(|r| r.len as u64).sum::<u64>()
    }

    /// True when no id has moved.
    pub fn is_empty(&self) -> bool {
        self.point_slots.is_empty() && self.ranges.is_empty()
    }

    /// Resident heap bytes: what the view costs to keep in memory.
    pub fn heap_size(&self) -> usize {
        self.ranges.capacity() * std::mem::size_of::<RangeEntry>()
            + self.point_blocks.capacity() * std::mem::size_of::<PointBlock>()
            + self
                .point_blocks
                .iter()
                .map(|b| bitmap_heap_size(&b.offsets))
                .sum::<usize>()
            + self.point_slots.heap_size()
            + self.slots.starts.capacity() * std::mem::size_of::<(FragmentId, u64)>()
    }
}

/// Heap bytes of a roaring bitmap: its containers' values (what its serialized form holds:
/// 2 bytes per array value, 8 KiB per bitset, 4 bytes per run) plus each container's header.
fn bitmap_heap_size(bitmap: &RoaringBitmap) -> usize {
    const CONTAINER_HEADER: usize = 32;
    let stats = bitmap.statistics();
    bitmap.serialized_size() + stats.n_containers as usize * CONTAINER_HEADER
}

/// (id, address) for every position whose id is not its own address (and is in `only`).
fn moved_pairs<'a>(
    sequences: impl IntoIterator<Item = (FragmentId, &'a RowIdSequence)>,
    only: Option<&IdSet>,
) -> Vec<(u64, u64)> {
    let sequences: Vec<_> = sequences.into_iter().collect();
    let mut pairs = match only {
        None => Vec::with_capacity(sequences.iter().map(|(_, s)| s.len()).sum()),
        Some(wanted) => Vec::with_capacity(wanted.len()),
    };
    for (fragment, sequence) in sequences {
        let base = RowAddress::new(fragment, 0).as_u64();
        let Some(wanted) = only else {
            for (offset, id) in sequence.iter().enumerate() {
                let addr = base + offset as u64;
                if id.as_u64() != addr {
                    pairs.push((id.as_u64(), addr));
                }
            }
            continue;
        };
        // A few ids among many carried rows: searched for where they fall, not walked (a
        // cold take after 1M updates spent 5 ms walking ~1M carried ids).
        sequence.find_ids(wanted, &mut |offset, id| {
            let addr = base + offset as u64;
            if id != addr {
                pairs.push((id, addr));
            }
        });
    }
    pairs
}

/// Pushes the parts of `entry` whose ids no newer entry names.
fn subtract_newer(entry: RangeEntry, newer: &RelocationView, out: &mut Vec<RangeEntry>) {
    let start = entry.id_start.as_u64();
    let end = start + entry.len as u64;
    let mut covered: BTreeSet<u64> = BTreeSet::new();
    for (id, _) in newer.iter_points() {
        if (start..end).contains(&id.as_u64()) {
            covered.insert(id.as_u64());
        }
    }
    for r in &newer.ranges {
        let (s, e) = (r.id_start.as_u64(), r.id_start.as_u64() + r.len as u64);
        for id in s.max(start)..e.min(end) {
            covered.insert(id);
        }
    }
    let mut run_start = start;
    for id in covered.into_iter().chain(std::iter::once(end)) {
        if id > run_start {
            out.push(RangeEntry {
                id_start: RowId::from_u64(run_start),
                addr_start: RowAddress::from_u64(entry.addr_start.as_u64() + (run_start - start)),
                len: (id - run_start) as u32,
            });
        }
        run_start = id + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(f: u32, o: u32) -> u64 {
        RowAddress::new(f, o).as_u64()
    }

    #[test]
    fn updating_the_same_row_twice_leaves_one_point() {
        // Row (0, 5) updated into fragment 2, then again into fragment 3.
        let seq2 = RowIdSequence::from_ids(&[addr(0, 5)]);
        let seq3 = RowIdSequence::from_ids(&[addr(0, 5)]);
        let carried = [
            CarriedFragment {
                id: 2,
                physical_rows: 1,
            },
            CarriedFragment {
                id: 3,
                physical_rows: 1,
            },
        ];
        let view = RelocationView::build(&carried, [(2, &seq2), (3, &seq3)]);
        assert_eq!(view.point_count(), 1);
        assert!(view.range_entries().is_empty());
        assert_eq!(
            view.lookup(RowId::from_u64(addr(0, 5))),
            Some(RowAddress::new(3, 0))
        );
        assert_eq!(view.lookup(RowId::from_u64(addr(0, 6))), None);
    }

    #[test]
    fn compaction_makes_ranges_and_fresh_points() {
        // Fragment 0 (rows 0..100, row 7 deleted and updated into fragment 1) and fragment 1
        // compacted into fragment 2: survivors of 0 and the stray from 1.
        let mut ids: Vec<u64> = (0..100).filter(|&o| o != 7).map(|o| addr(0, o)).collect();
        ids.push(addr(0, 7));
        let seq = RowIdSequence::from_ids(&ids);
        let carried = [CarriedFragment {
            id: 2,
            physical_rows: 100,
        }];
        let view = RelocationView::build(&carried, [(2, &seq)]);
        assert_eq!(view.range_entries().len(), 2);
        assert_eq!(view.point_count(), 1);
        assert_eq!(view.moved_rows(), 100);
        for (pos, &id) in ids.iter().enumerate() {
            assert_eq!(
                view.lookup(RowId::from_u64(id)),
                Some(RowAddress::new(2, pos as u32))
            );
        }
    }

    #[test]
    fn merge_lets_newer_entries_win_and_drops_gone_targets() {
        // Checkpoint: ids (0,0..10) → fragment 5; id (1,3) → fragment 6 (fragment 6 is gone).
        let older = vec![
            RangeEntry {
                id_start: RowId::from_u64(addr(0, 0)),
                addr_start: RowAddress::new(5, 0),
                len: 10,
            },
            RangeEntry {
                id_start: RowId::from_u64(addr(1, 3)),
                addr_start: RowAddress::new(6, 0),
                len: 1,
            },
        ];
        // Newer: id (0,4) updated into fragment 9.
        let seq9 = RowIdSequence::from_ids(&[addr(0, 4)]);
        let carried = [
            CarriedFragment {
                id: 5,
                physical_rows: 10,
            },
            CarriedFragment {
                id: 9,
                physical_rows: 1,
            },
        ];
        let view = RelocationView::merge(&carried, older, [(9, &seq9)]);
        assert_eq!(
            view.lookup(RowId::from_u64(addr(0, 4))),
            Some(RowAddress::new(9, 0))
        );
        assert_eq!(
            view.lookup(RowId::from_u64(addr(0, 3))),
            Some(RowAddress::new(5, 3))
        );
        assert_eq!(
            view.lookup(RowId::from_u64(addr(0, 5))),
            Some(RowAddress::new(5, 5))
        );
        assert_eq!(view.lookup(RowId::from_u64(addr(1, 3))), None);
    }

    #[test]
    fn point_entries_cost_at_most_eight_bytes() {
        let n = 100_000u32;
        // Random-looking ids from ten birth fragments, moved into one carried fragment.
        let ids: Vec<u64> = (0..n)
            .map(|i| addr(i % 10, (i.wrapping_mul(2_654_435_761)) % 1_000_000))
            .collect();
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        let seq = RowIdSequence::from_ids(&unique.iter().rev().copied().collect::<Vec<_>>());
        let carried = [CarriedFragment {
            id: 20,
            physical_rows: unique.len() as u32,
        }];
        let view = RelocationView::build(&carried, [(20, &seq)]);
        let per_row = view.heap_size() as f64 / view.moved_rows() as f64;
        // Sparse: 2 bytes of array container and a 17-bit slot per point.
        assert!(per_row <= 4.8, "{per_row} bytes per moved row");
    }

    /// Updates that moved most rows of ten 100k-row fragments, in 100 commits: dense offset
    /// bitmaps, so a point costs little more than its 20-bit slot.
    #[test]
    fn dense_points_cost_their_slot_width() {
        let mut state = 7u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut carried = Vec::new();
        let mut sequences = Vec::new();
        for commit in 0..100u32 {
            let mut ids: Vec<u64> = (0..10_000)
                .map(|_| {
                    let row = next() % 1_000_000;
                    addr((row / 100_000) as u32, (row % 100_000) as u32)
                })
                .collect();
            ids.sort_unstable();
            ids.dedup();
            carried.push(CarriedFragment {
                id: 10 + commit,
                physical_rows: ids.len() as u32,
            });
            sequences.push((10 + commit, RowIdSequence::from_ids(&ids), ids));
        }
        let view = RelocationView::build(&carried, sequences.iter().map(|(f, s, _)| (*f, s)));
        let per_row = view.heap_size() as f64 / view.moved_rows() as f64;
        assert!(view.moved_rows() > 600_000);
        assert!(per_row <= 3.0, "{per_row} bytes per moved row");
        // The newest copy of every id wins.
        let mut newest = std::collections::BTreeMap::new();
        for (fragment, _, ids) in &sequences {
            for (offset, &id) in ids.iter().enumerate() {
                newest.insert(id, RowAddress::new(*fragment, offset as u32));
            }
        }
        let wrong = newest
            .iter()
            .filter(|(&id, &at)| view.lookup(RowId::from_u64(id)) != Some(at))
            .count();
        assert_eq!(wrong, 0, "ids looked up wrong");
        assert_eq!(view.moved_rows(), newest.len() as u64);
        assert_eq!(view.lookup(RowId::from_u64(addr(3, 100_000))), None);
        // Points and ranges together list every entry once, by id.
        let mut listed = Vec::new();
        for entry in view.entries() {
            for k in 0..entry.len as u64 {
                listed.push((entry.id_start.as_u64() + k, entry.addr_start.as_u64() + k));
            }
        }
        let expected: Vec<(u64, u64)> = newest.iter().map(|(&id, at)| (id, at.as_u64())).collect();
        assert!(listed == expected, "entries differ from the newest copies");
    }
}
