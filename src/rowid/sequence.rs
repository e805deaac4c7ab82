//! [`RowIdSequence`]: the ids of a carried fragment's rows, by position (seq[i] = id of the
//! row at offset i). Only fragments written by update or compaction carry one; a native
//! fragment's ids are implicit (invariant I3).

use super::segment::{EncodedU64Array, U64Segment};
use super::{FragmentId, RowAddress, RowId};

/// Gaps wider than this start a new segment: a new `Range` costs less than encoding the gap.
const SPLIT_GAP: u64 = 256;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowIdSequence {
    segments: Vec<U64Segment>,
}

impl RowIdSequence {
    pub fn from_segments(segments: Vec<U64Segment>) -> Self {
        Self { segments }
    }

    /// Encodes ids in order, splitting at direction changes and wide gaps so each segment
    /// takes its cheapest form.
    pub fn from_ids(ids: &[u64]) -> Self {
        let mut segments = Vec::new();
        let mut start = 0;
        let mut increasing_from = 0;
        for i in 1..=ids.len() {
            let breaks = i == ids.len() || {
                let (prev, next) = (ids[i - 1], ids[i]);
                next <= prev || next - prev > SPLIT_GAP
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
        Self { segments }
    }

    pub fn segments(&self) -> &[U64Segment] {
        &self.segments
    }

    pub fn len(&self) -> usize {
        self.segments.iter().map(U64Segment::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = RowId> + '_ {
        self.segments
            .iter()
            .flat_map(|s| s.iter())
            .map(RowId::from_u64)
    }

    /// The id at `offset`, if the sequence is that long.
    pub fn get(&self, offset: usize) -> Option<RowId> {
        let mut remaining = offset;
        for segment in &self.segments {
            let len = segment.len();
            if remaining < len {
                return segment.get(remaining).map(RowId::from_u64);
            }
            remaining -= len;
        }
        None
    }

    /// The ids at `offsets`, in one walk over the segments when the offsets ascend (as a
    /// scan yields them) rather than a search from the start for each; `None` past the end.
    /// Offsets that go back restart the walk, so any order is answered, only slower.
    pub fn get_many<'a>(
        &'a self,
        offsets: impl IntoIterator<Item = u32> + 'a,
    ) -> impl Iterator<Item = Option<RowId>> + 'a {
        // The segment the walk is in, and the offset it starts at.
        let (mut segment, mut start) = (0usize, 0usize);
        offsets.into_iter().map(move |offset| {
            let offset = offset as usize;
            if offset < start {
                (segment, start) = (0, 0);
            }
            while let Some(current) = self.segments.get(segment) {
                let len = current.len();
                if offset < start + len {
                    return current.get(offset - start).map(RowId::from_u64);
                }
                start += len;
                segment += 1;
            }
            None
        })
    }

    /// The sequence of a fragment whose rows are all native: ids equal addresses.
    pub fn native(fragment: FragmentId, rows: u32) -> Self {
        let start = RowAddress::new(fragment, 0).as_u64();
        Self {
            segments: vec![U64Segment::Range(start..start + rows as u64)],
        }
    }

    pub fn heap_size(&self) -> usize {
        self.segments.capacity() * std::mem::size_of::<U64Segment>()
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

    /// Ids moved by random updates: increasing, from ten birth fragments at random offsets.
    #[test]
    fn scattered_increasing_ids_cost_about_two_bytes_each() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut ids: Vec<u64> = (0..1000)
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
            "{} segments",
            seq.segments().len()
        );
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

        /// Ascending offsets (a scan's), and any others, read as one `get` each would.
        #[test]
        fn get_many_reads_as_get(
            ids in prop::collection::vec(prop_oneof![0u64..2000, any::<u64>()], 0..400),
            mut offsets in prop::collection::vec(0u32..420, 0..100),
            ascending in any::<bool>(),
        ) {
            if ascending {
                offsets.sort_unstable();
            }
            let seq = RowIdSequence::from_ids(&ids);
            let many: Vec<Option<RowId>> = seq.get_many(offsets.iter().copied()).collect();
            let one_by_one: Vec<Option<RowId>> =
                offsets.iter().map(|&o| seq.get(o as usize)).collect();
            prop_assert_eq!(many, one_by_one);
        }
    }
}
