//! [`RowIdSequence`]: the ids of a carried fragment's rows, by position (seq[i] = id of the
//! row at offset i). Only fragments written by update or compaction carry one; a native
//! fragment's ids are implicit (invariant I3).

use std::ops::Range;
use std::sync::OnceLock;

use super::id_set::{gallop, IdCursor, IdSet};
use super::segment::{EncodedU64Array, SegmentCursor, U64Segment};
use super::{FragmentId, RowAddress, RowId};

/// Gaps wider than this after a dense run start a new segment: a new `Range` costs less than
/// encoding the gap.
const SPLIT_GAP: u64 = 256;

/// The ids of a fragment's rows by offset, as compressed segments (ranges, ranges with holes, bit-packed arrays).
#[derive(Debug, Clone, Default)]
pub struct RowIdSequence {
    segments: Vec<U64Segment>,
    /// The offset each segment starts at, for finding an offset's segment by binary search.
    starts: Vec<usize>,
    /// Built by the first [`Self::find_ids`]: opening a version and scanning need none.
    search: OnceLock<SearchIndex>,
}

impl PartialEq for RowIdSequence {
    fn eq(&self, other: &Self) -> bool {
        // The rest is derived from the segments.
        self.segments == other.segments
    }
}

impl Eq for RowIdSequence {}

/// Where ids lie among a sequence's segments, for searches of a few of them.
#[derive(Debug, Clone)]
struct SearchIndex {
    /// Each segment's largest id as written (0 for an unsorted one), for finding an id's
    /// segment by search within its stretch.
    lasts: Vec<u64>,
    /// The segments split into stretches.
    stretches: Vec<Stretch>,
}

/// Consecutive segments, all sorted with ascending bounds (any id lies in at most one of
/// them, found by its place among their last ids), or one unsorted segment.
#[derive(Debug, Clone)]
struct Stretch {
    segments: Range<usize>,
    /// The smallest id of a sorted stretch; `None` for an unsorted segment.
    first: Option<u64>,
}

/// Where a walk over a sequence by ascending offset is: its segment, the offset that segment
/// starts at, and the position inside it. Keep one per walk (a scan of one fragment keeps
/// one across its batches) so the walk never starts over.
#[derive(Debug, Clone, Copy, Default)]
pub struct SequenceCursor {
    started: bool,
    segment: usize,
    start: usize,
    within: SegmentCursor,
}

impl RowIdSequence {
    /// A sequence of `segments`, one after another.
    pub fn from_segments(segments: Vec<U64Segment>) -> Self {
        let mut starts = Vec::with_capacity(segments.len());
        let mut start = 0;
        for segment in &segments {
            starts.push(start);
            start += segment.len();
        }
        Self {
            segments,
            starts,
            search: OnceLock::new(),
        }
    }

    fn search_index(&self) -> &SearchIndex {
        self.search.get_or_init(|| {
            let mut lasts = Vec::with_capacity(self.segments.len());
            let mut stretches: Vec<Stretch> = Vec::new();
            for (index, segment) in self.segments.iter().enumerate() {
                let bounds = segment.bounds();
                lasts.push(bounds.map_or(0, |(_, last)| last));
                let after_previous = |s: &Stretch| s.first.is_some() && index > 0;
                match (bounds, stretches.last_mut()) {
                    (Some((first, _)), Some(s))
                        if after_previous(s) && lasts[index - 1] < first =>
                    {
                        s.segments.end = index + 1;
                    }
                    (bounds, _) => stretches.push(Stretch {
                        segments: index..index + 1,
                        first: bounds.map(|(first, _)| first),
                    }),
                }
            }
            SearchIndex { lasts, stretches }
        })
    }

    /// Calls `found(offset, id)` for each id of `wanted` this sequence holds. A sorted
    /// stretch is searched only where wanted ids fall: each one's segment is found by an
    /// exponential search over the stretch's last ids from the one before, so segments
    /// between two wanted ids cost nothing (a few ids among many carried rows touch few of
    /// their segments).
    pub fn find_ids(&self, wanted: &IdSet, found: &mut impl FnMut(usize, u64)) {
        let mut cursor = IdCursor::default();
        let index = self.search_index();
        for stretch in &index.stretches {
            let range = stretch.segments.clone();
            let Some(first) = stretch.first else {
                let offset = self.starts[range.start];
                let mut at = |index: usize, id: u64| found(offset + index, id);
                self.segments[range.start].find_each(wanted, &mut cursor, &mut at);
                continue;
            };
            let lasts = &index.lasts[range.clone()];
            let end = lasts[lasts.len() - 1].saturating_add(1);
            let ids = wanted.between(first, end, &mut cursor);
            let (mut k, mut i) = (0, 0);
            while i < ids.len() {
                // The first segment whose last id is at or above the wanted one.
                k += gallop(&lasts[k..], ids[i]);
                let Some(&last) = lasts.get(k) else { break };
                let n = match last.checked_add(1) {
                    Some(past) => gallop(&ids[i..], past),
                    None => ids.len() - i,
                };
                let segment = range.start + k;
                let offset = self.starts[segment];
                let mut at = |index: usize, id: u64| found(offset + index, id);
                self.segments[segment].find_in(&ids[i..i + n], &mut at);
                (i, k) = (i + n, k + 1);
            }
        }
    }

    /// Encodes ids in order, splitting at direction changes, and at wide gaps after dense
    /// runs, so each segment takes its cheapest form. A sparse run (rows moved by scattered
    /// updates) goes on across gaps: it is a sorted array however wide they are, and splitting
    /// it would make many small segments that cost their overhead in bytes and in every
    /// search for an id among them.
    pub fn from_ids(ids: &[u64]) -> Self {
        let mut segments = Vec::new();
        let mut start = 0;
        let mut increasing_from = 0;
        for i in 1..=ids.len() {
            let breaks = i == ids.len() || {
                let (prev, next) = (ids[i - 1], ids[i]);
                // At least every other id of its span: a wide gap cuts only such a run.
                let dense = || prev - ids[increasing_from] < 2 * (i - increasing_from) as u64;
                next <= prev || (next - prev > SPLIT_GAP && dense())
            };
            if !breaks {
                continue;
            }
            // Short increasing runs would cost more as segments than as part of an Array.
            if i - increasing_from >= 16 || i == ids.len() {
                if increasing_from > start {
                    push_run(&mut segments, &ids[start..increasing_from]);
                }
                push_run(&mut segments, &ids[increasing_from..i]);
                start = i;
            }
            increasing_from = i;
        }
        Self::from_segments(segments)
    }

    /// Its segments, in offset order.
    pub fn segments(&self) -> &[U64Segment] {
        &self.segments
    }

    /// Ids held (the fragment's physical rows).
    pub fn len(&self) -> usize {
        self.segments.iter().map(U64Segment::len).sum()
    }

    /// True when no id is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids by offset.
    pub fn iter(&self) -> impl Iterator<Item = RowId> + '_ {
        self.segments
            .iter()
            .flat_map(|s| s.iter())
            .map(RowId::from_u64)
    }

    /// The offset ranges, in order, over which ids strictly ascend: read range by range, a
    /// fragment gives its rows in id order within each (how a rewrite merges fragments by
    /// id). A sorted segment is one run or part of one, seen from its bounds; only unsorted
    /// segments are walked.
    pub fn ascending_runs(&self) -> Vec<Range<u32>> {
        let mut runs = Vec::new();
        let (mut start, mut last) = (0u32, None::<u64>);
        let mut descends_at = |offset: usize, id: u64, last: &mut Option<u64>| {
            if last.is_some_and(|l| id <= l) {
                runs.push(start..offset as u32);
                start = offset as u32;
            }
            *last = Some(id);
        };
        for (segment, &offset) in self.segments.iter().zip(&self.starts) {
            match segment.bounds() {
                Some((first, end)) => {
                    descends_at(offset, first, &mut last);
                    last = Some(end);
                }
                None => {
                    for (k, id) in segment.iter().enumerate() {
                        descends_at(offset + k, id, &mut last);
                    }
                }
            }
        }
        let len = self.len() as u32;
        if len > start {
            runs.push(start..len);
        }
        runs
    }

    /// The id at `offset`, if the sequence is that long: a binary search for its segment,
    /// then that segment's own lookup. Reads of many ascending offsets use [`Self::get_many`]
    /// or a [`SequenceCursor`].
    pub fn get(&self, offset: usize) -> Option<RowId> {
        self.get_from(offset as u32, &mut SequenceCursor::default())
    }

    /// The id at `offset`, resuming the walk `cursor` holds: amortized O(1) per offset while
    /// offsets ascend (the next row of the same segment, or the segments after it), a fresh
    /// search when one goes back. Any order is answered correctly.
    pub fn get_from(&self, offset: u32, cursor: &mut SequenceCursor) -> Option<RowId> {
        let offset = offset as usize;
        let in_current = |c: &SequenceCursor| {
            c.started
                && offset >= c.start
                && self
                    .segments
                    .get(c.segment)
                    .is_some_and(|s| offset < c.start + s.len())
        };
        if !in_current(cursor) {
            let next_also = cursor.started
                && offset >= cursor.start
                && self.segments.get(cursor.segment + 1).is_some_and(|_| {
                    let end = cursor.start + self.segments[cursor.segment].len();
                    offset >= end && offset < end + self.segments[cursor.segment + 1].len()
                });
            if next_also {
                cursor.start += self.segments[cursor.segment].len();
                cursor.segment += 1;
            } else {
                // Segments starting at or before `offset`: the last of them holds it.
                let segment = self
                    .starts
                    .partition_point(|&s| s <= offset)
                    .checked_sub(1)?;
                cursor.segment = segment;
                cursor.start = self.starts[segment];
            }
            cursor.within = SegmentCursor::default();
            cursor.started = true;
        }
        let segment = self.segments.get(cursor.segment)?;
        segment
            .get_from(offset - cursor.start, &mut cursor.within)
            .map(RowId::from_u64)
    }

    /// The ids at `offsets`, in one walk over the segments when the offsets ascend (as a
    /// scan yields them) rather than a search from the start for each; `None` past the end.
    pub fn get_many<'a>(
        &'a self,
        offsets: impl IntoIterator<Item = u32> + 'a,
    ) -> impl Iterator<Item = Option<RowId>> + 'a {
        let mut cursor = SequenceCursor::default();
        offsets
            .into_iter()
            .map(move |offset| self.get_from(offset, &mut cursor))
    }

    /// The sequence of a fragment whose rows are all native: ids equal addresses.
    pub fn native(fragment: FragmentId, rows: u32) -> Self {
        let start = RowAddress::new(fragment, 0).as_u64();
        Self::from_segments(vec![U64Segment::Range(start..start + rows as u64)])
    }

    /// Bytes held on the heap.
    pub fn heap_size(&self) -> usize {
        self.segments.capacity() * std::mem::size_of::<U64Segment>()
            + self.starts.capacity() * std::mem::size_of::<usize>()
            + self.search.get().map_or(0, |index| {
                index.lasts.capacity() * std::mem::size_of::<u64>()
                    + index.stretches.capacity() * std::mem::size_of::<Stretch>()
            })
            + self
                .segments
                .iter()
                .map(U64Segment::heap_size)
                .sum::<usize>()
    }
}

/// About what a segment costs stored beyond its values (tags, lengths, base).
const SEGMENT_OVERHEAD: usize = 16;

/// Pushes `values` as one segment or, when they increase over a span too wide for 2-byte
/// offsets, as chunks each spanning at most 2^16 ids if that is smaller. Rows moved by random
/// updates carry increasing ids from many birth fragments, at random offsets: one segment
/// needs 8 bytes per id (the span crosses fragments), chunks about 2, which keeps such a
/// sequence inline in its fragment entry rather than in a file of its own.
fn push_run(segments: &mut Vec<U64Segment>, values: &[u64]) {
    let whole = U64Segment::from_slice(values);
    if let (U64Segment::SortedArray(_), Some(first), Some(last)) =
        (&whole, values.first(), values.last())
    {
        let width = EncodedU64Array::width_for_span(last - first);
        let chunks = chunks_within(values, u16::MAX as u64);
        if chunks.len() * SEGMENT_OVERHEAD + values.len() * 2 < values.len() * width {
            segments.extend(chunks.into_iter().map(U64Segment::from_slice));
            return;
        }
    }
    segments.push(whole);
}

/// Splits increasing `values` greedily into runs whose last value is at most `span` above
/// their first.
fn chunks_within(values: &[u64], span: u64) -> Vec<&[u64]> {
    let mut chunks = Vec::new();
    let mut rest = values;
    while let Some(&first) = rest.first() {
        let end = rest.partition_point(|&v| v - first <= span);
        let (chunk, tail) = rest.split_at(end);
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn compaction_of_two_fragments_is_two_ranges() {
        let mut ids: Vec<u64> = (0..1000).map(|o| RowAddress::new(3, o).as_u64()).collect();
        ids.extend((0..500).map(|o| RowAddress::new(4, o).as_u64()));
        let seq = RowIdSequence::from_ids(&ids);
        assert_eq!(seq.segments().len(), 2);
        assert!(seq
            .segments()
            .iter()
            .all(|s| matches!(s, U64Segment::Range(_))));
        assert_eq!(seq.iter().map(RowId::as_u64).collect::<Vec<_>>(), ids);
    }

    /// Ids moved by random updates: increasing, from ten birth fragments at random offsets,
    /// sparse (0.1% of the rows: every gap is wide) and less so (1.5%: gaps of either kind).
    #[test]
    fn scattered_increasing_ids_cost_about_two_bytes_each() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for count in [1000, 15_000] {
            let mut ids: Vec<u64> = (0..count)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    RowAddress::new((state % 10) as u32, (state >> 8) as u32 % 100_000).as_u64()
                })
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let seq = RowIdSequence::from_ids(&ids);
            assert_eq!(seq.iter().map(RowId::as_u64).collect::<Vec<_>>(), ids);
            for (i, id) in ids.iter().enumerate() {
                assert_eq!(seq.get(i).map(RowId::as_u64), Some(*id));
            }
            let values: usize = seq.segments().iter().map(U64Segment::heap_size).sum();
            assert!(
                values <= ids.len() * 2,
                "{values} bytes for {} ids",
                ids.len()
            );
            // Two 2^16 spans per fragment of 100k rows, and the last id's own run.
            assert!(
                seq.segments().len() <= 21,
                "{} segments for {count} ids",
                seq.segments().len()
            );
        }
    }

    proptest! {
        #[test]
        fn increasing_ids_round_trip(mut ids in prop::collection::vec(any::<u64>(), 0..400), narrow in any::<bool>()) {
            if narrow {
                ids.iter_mut().for_each(|id| *id %= 1 << 22);
            }
            ids.sort_unstable();
            ids.dedup();
            let seq = RowIdSequence::from_ids(&ids);
            prop_assert_eq!(seq.iter().map(RowId::as_u64).collect::<Vec<_>>(), ids.clone());
            for (i, id) in ids.iter().enumerate() {
                prop_assert_eq!(seq.get(i).map(RowId::as_u64), Some(*id));
            }
        }

        #[test]
        fn round_trips(ids in prop::collection::vec(prop_oneof![0u64..2000, any::<u64>()], 0..400)) {
            let seq = RowIdSequence::from_ids(&ids);
            prop_assert_eq!(seq.len(), ids.len());
            prop_assert_eq!(seq.iter().map(RowId::as_u64).collect::<Vec<_>>(), ids.clone());
            for (i, id) in ids.iter().enumerate() {
                prop_assert_eq!(seq.get(i).map(RowId::as_u64), Some(*id));
            }
        }

        /// Ascending offsets (a scan's), and any others, read as the naive walk from the
        /// start does, by `get_many`, `get` and one cursor kept across calls.
        #[test]
        fn lookups_read_as_the_naive_walk(
            ids in ids_of_every_shape(),
            mut offsets in prop::collection::vec(0u32..2100, 0..300),
            ascending in any::<bool>(),
        ) {
            if ascending {
                offsets.sort_unstable();
            }
            let seq = RowIdSequence::from_ids(&ids);
            let naive: Vec<Option<RowId>> =
                offsets.iter().map(|&o| seq.iter().nth(o as usize)).collect();
            let many: Vec<Option<RowId>> = seq.get_many(offsets.iter().copied()).collect();
            prop_assert_eq!(&many, &naive);
            let one_by_one: Vec<Option<RowId>> =
                offsets.iter().map(|&o| seq.get(o as usize)).collect();
            prop_assert_eq!(&one_by_one, &naive);
            // A cursor kept across chunks, as a scan keeps one across its batches.
            let mut cursor = SequenceCursor::default();
            let chunked: Vec<Option<RowId>> = offsets
                .chunks(7)
                .flat_map(|chunk| chunk.iter().map(|&o| seq.get_from(o, &mut cursor)).collect::<Vec<_>>())
                .collect();
            prop_assert_eq!(&chunked, &naive);
        }
    }

    proptest! {
        /// Ascending runs cover the sequence in order, ids ascend within each, and each
        /// starts where an id is not above the one before.
        #[test]
        fn ascending_runs_cut_where_ids_descend(ids in ids_of_every_shape()) {
            let seq = RowIdSequence::from_ids(&ids);
            let runs = seq.ascending_runs();
            let mut next = 0u32;
            for run in &runs {
                prop_assert_eq!(run.start, next);
                prop_assert!(run.start < run.end);
                let run_ids = &ids[run.start as usize..run.end as usize];
                prop_assert!(run_ids.windows(2).all(|w| w[0] < w[1]));
                if run.start > 0 {
                    prop_assert!(ids[run.start as usize] <= ids[run.start as usize - 1]);
                }
                next = run.end;
            }
            prop_assert_eq!(next as usize, ids.len());
        }

        /// `find_ids` finds what a walk with the wanted set finds, at the same offsets,
        /// whatever the segments: runs of every shape, and scattered runs too wide for one
        /// segment (chunked into sorted stretches, as rows moved by random updates are).
        #[test]
        fn find_ids_finds_what_a_walk_finds(
            mut ids in ids_of_every_shape(),
            wide in prop::collection::vec((0u64..1 << 40, 1u64..5000, 2u64..300), 0..3),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
            strangers in prop::collection::vec(0u64..1 << 41, 0..40),
        ) {
            for (start, stride, len) in wide {
                ids.extend((0..len).map(|i| start + i * stride * 17));
            }
            let seq = RowIdSequence::from_ids(&ids);
            let mut wanted: Vec<u64> = strangers;
            if !ids.is_empty() {
                wanted.extend(picks.iter().map(|p| ids[p.index(ids.len())]));
            }
            let set = IdSet::new(wanted.iter().map(|&v| RowId::from_u64(v)));
            let walked: Vec<(usize, u64)> = (ids.iter().copied().enumerate())
                .filter(|&(_, v)| set.contains(v))
                .collect();
            let mut found = Vec::new();
            seq.find_ids(&set, &mut |offset, id| found.push((offset, id)));
            found.sort_unstable();
            prop_assert_eq!(found, walked);
        }
    }

    /// Sequences whose segments take every form: dense runs with holes (RangeWithHoles),
    /// every few ids (RangeWithBitmap), scattered (SortedArray), out of order (Array), whole
    /// runs (Range).
    fn ids_of_every_shape() -> impl Strategy<Value = Vec<u64>> {
        let run = (0u64..1 << 34, 1usize..600, 1u64..12, 0u32..4).prop_map(
            |(start, len, stride, shape)| -> Vec<u64> {
                match shape {
                    0 => (start..start + len as u64).collect(),
                    1 => (start..start + len as u64 * stride)
                        .filter(|v| v % 97 != 0)
                        .collect(),
                    2 => (0..len as u64).map(|i| start + i * stride).collect(),
                    _ => (0..len as u64).map(|i| start + (i * 7919) % 1000).collect(),
                }
            },
        );
        prop::collection::vec(run, 0..5).prop_map(|runs| runs.concat())
    }

    /// An update of every tenth row of 1M leaves a bitmap segment over the whole span; a
    /// walk over all of it (a bulk DELETE's scan) answers every offset in order.
    #[test]
    fn a_walk_over_a_wide_bitmap_reads_every_id() {
        let ids: Vec<u64> = (0..1_000_000u64).filter(|v| v % 10 == 3).collect();
        let seq = RowIdSequence::from_ids(&ids);
        assert!(seq
            .segments()
            .iter()
            .any(|s| matches!(s, U64Segment::RangeWithBitmap { .. })));
        let walked: Vec<u64> = seq
            .get_many(0..ids.len() as u32)
            .map(|id| id.map(RowId::as_u64).unwrap_or(u64::MAX))
            .collect();
        assert_eq!(walked, ids);
        assert_eq!(seq.get(ids.len()), None);
        assert_eq!(seq.get(54_321).map(RowId::as_u64), Some(ids[54_321]));
    }
}
