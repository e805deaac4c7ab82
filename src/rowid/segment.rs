//! [`U64Segment`]: one run of a fragment's row-id sequence, in the cheapest encoding that fits.
//!
//! Decision tree, applied by [`U64Segment::from_slice`]:
//! ```text
//! not strictly increasing ............................ Array          len × width
//! increasing, no gaps ................................ Range          16 B
//! increasing, gaps: the smallest of
//!     RangeWithHoles   holes × width
//!     RangeWithBitmap  span / 8
//!     SortedArray      len × width
//! ```
//! `width` is the narrowest of 2, 4 or 8 bytes that holds `value - min` ([`EncodedU64Array`]).

use std::ops::Range;

use super::id_set::{gallop, IdCursor, IdSet};

/// Unsigned integers stored as offsets from a base, in the narrowest width that fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodedU64Array {
    /// Values within `u16::MAX` of the smallest.
    U16 {
        /// The smallest value.
        base: u64,
        /// Each value minus `base`.
        offsets: Vec<u16>,
    },
    /// Values within `u32::MAX` of the smallest.
    U32 {
        /// The smallest value.
        base: u64,
        /// Each value minus `base`.
        offsets: Vec<u32>,
    },
    /// Any values, at full width.
    U64(Vec<u64>),
}

impl EncodedU64Array {
    /// The smallest encoding of `values`, in their order.
    pub fn from_values(values: &[u64]) -> Self {
        let (Some(&min), Some(&max)) = (values.iter().min(), values.iter().max()) else {
            return Self::U16 {
                base: 0,
                offsets: Vec::new(),
            };
        };
        let span = max - min;
        if span <= u16::MAX as u64 {
            Self::U16 {
                base: min,
                offsets: values.iter().map(|v| (v - min) as u16).collect(),
            }
        } else if span <= u32::MAX as u64 {
            Self::U32 {
                base: min,
                offsets: values.iter().map(|v| (v - min) as u32).collect(),
            }
        } else {
            Self::U64(values.to_vec())
        }
    }

    /// Bytes one value takes for a span (`max - min`).
    pub fn width_for_span(span: u64) -> usize {
        if span <= u16::MAX as u64 {
            2
        } else if span <= u32::MAX as u64 {
            4
        } else {
            8
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        match self {
            Self::U16 { offsets, .. } => offsets.len(),
            Self::U32 { offsets, .. } => offsets.len(),
            Self::U64(values) => values.len(),
        }
    }

    /// True when no value is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<u64> {
        match self {
            Self::U16 { base, offsets } => offsets.get(index).map(|&o| base + o as u64),
            Self::U32 { base, offsets } => offsets.get(index).map(|&o| base + o as u64),
            Self::U64(values) => values.get(index).copied(),
        }
    }

    /// How many values from index `from` on lie below `v`, for ascending arrays: an
    /// exponential search over the stored words themselves (one match on the width, not one
    /// per probe), O(log of the answer), for searches that move forward a little at a time.
    pub fn count_below(&self, from: usize, v: u64) -> usize {
        self.count_below_by(from, v, Gallop)
    }

    /// [`Self::count_below`] by binary search: fewer probes when the answer may be anywhere
    /// (one wanted id in a segment), more when it is near `from`.
    pub fn count_below_far(&self, from: usize, v: u64) -> usize {
        self.count_below_by(from, v, Binary)
    }

    fn count_below_by(&self, from: usize, v: u64, search: impl SearchBelow) -> usize {
        fn narrowed<T: Copy + Ord + TryFrom<u64>>(
            offsets: &[T],
            from: usize,
            base: u64,
            v: u64,
            search: impl SearchBelow,
        ) -> usize {
            let rest = offsets.get(from..).unwrap_or_default();
            let Some(relative) = v.checked_sub(base) else {
                return 0; // below the base: no value is below it
            };
            match T::try_from(relative) {
                Ok(t) => search.below(rest, t),
                Err(_) => rest.len(), // past the widest offset: every value is below it
            }
        }
        match self {
            Self::U16 { base, offsets } => narrowed(offsets, from, *base, v, search),
            Self::U32 { base, offsets } => narrowed(offsets, from, *base, v, search),
            // Full width: offsets from 0, each its own value.
            Self::U64(values) => narrowed(values, from, 0, v, search),
        }
    }

    /// The values in order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Self::U16 { base, offsets } => Box::new(offsets.iter().map(move |&o| base + o as u64)),
            Self::U32 { base, offsets } => Box::new(offsets.iter().map(move |&o| base + o as u64)),
            Self::U64(values) => Box::new(values.iter().copied()),
        }
    }

    /// Bytes held on the heap.
    pub fn heap_size(&self) -> usize {
        match self {
            Self::U16 { offsets, .. } => offsets.capacity() * 2,
            Self::U32 { offsets, .. } => offsets.capacity() * 4,
            Self::U64(values) => values.capacity() * 8,
        }
    }
}

/// A search of ascending values for how many lie below a target, at any width.
trait SearchBelow: Copy {
    fn below<T: Copy + Ord>(self, values: &[T], t: T) -> usize;
}

/// Exponential search from the start: O(log of the answer).
#[derive(Clone, Copy)]
struct Gallop;

impl SearchBelow for Gallop {
    fn below<T: Copy + Ord>(self, values: &[T], t: T) -> usize {
        gallop(values, t)
    }
}

/// Binary search: O(log of the length).
#[derive(Clone, Copy)]
struct Binary;

impl SearchBelow for Binary {
    fn below<T: Copy + Ord>(self, values: &[T], t: T) -> usize {
        values.partition_point(|&x| x < t)
    }
}

/// Where a walk by ascending index stopped inside one [`U64Segment`], so the next read
/// resumes there rather than from the segment's start (see [`U64Segment::get_from`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SegmentCursor {
    started: bool,
    /// The last index answered.
    index: usize,
    /// Holes: how many lie below the last value. Bitmaps: the byte the last value is in.
    position: usize,
    /// Bitmaps: the set bits before `position`.
    rank: u64,
}

/// How many holes lie below the value at `index` of a range starting at `start`: the holes
/// `h` (the k-th, from 0) with `h - start - k <= index`, a prefix since that count only grows.
fn holes_below(holes: &EncodedU64Array, start: u64, index: u64) -> usize {
    let (mut lo, mut hi) = (0usize, holes.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let below = holes.get(mid).map_or(u64::MAX, |h| {
            h.saturating_sub(start).saturating_sub(mid as u64)
        });
        if below <= index {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Set bits of `bitmap` (lowest bit first within each byte) at positions `from..to`.
fn ones_between(bitmap: &[u8], from: usize, to: usize) -> usize {
    if from >= to {
        return 0;
    }
    // Bits a..b of one byte (b <= 8).
    let mask = |a: usize, b: usize| (((1u16 << b) - 1) & !((1u16 << a) - 1)) as u8;
    let ones = |byte: u8| byte.count_ones() as usize;
    let (first, last, end) = (from / 8, (to - 1) / 8, (to - 1) % 8 + 1);
    if first == last {
        return ones(bitmap[first] & mask(from % 8, end));
    }
    let middle: usize = bitmap[first + 1..last].iter().map(|&b| ones(b)).sum();
    ones(bitmap[first] & mask(from % 8, 8)) + middle + ones(bitmap[last] & mask(0, end))
}

/// Whether bit `bit` of `bitmap` (lowest bit first within each byte) is set.
fn bit_is_set(bitmap: &[u8], bit: usize) -> bool {
    bitmap[bit / 8] & (1 << (bit % 8)) != 0
}

/// The position (0..8) of the `n`-th set bit of `byte`, counting from the lowest.
fn nth_set_bit(mut byte: u8, n: u32) -> u32 {
    for _ in 0..n {
        byte &= byte - 1;
    }
    byte.trailing_zeros()
}

/// One run of u64 values (row ids). See the module docs for which variant is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum U64Segment {
    /// Every value in `start..end`: 16 bytes whatever the length.
    Range(Range<u64>),
    /// `start..end` minus a few sorted holes.
    RangeWithHoles {
        /// The values around the holes.
        range: Range<u64>,
        /// The values left out, ascending.
        holes: EncodedU64Array,
    },
    /// `start..end` filtered by a bitmap (bit i set: `start + i` present); for dense gaps.
    RangeWithBitmap {
        /// The values the bitmap picks from.
        range: Range<u64>,
        /// Bit `i` set: `range.start + i` is present.
        bitmap: Vec<u8>,
        /// Values present (the bitmap's set bits).
        len: usize,
    },
    /// Strictly increasing values with wide gaps.
    SortedArray(EncodedU64Array),
    /// Values in any order.
    Array(EncodedU64Array),
}

impl U64Segment {
    /// The cheapest segment that holds exactly `values`, in order.
    pub fn from_slice(values: &[u64]) -> Self {
        let (Some(&first), Some(&last)) = (values.first(), values.last()) else {
            return Self::Range(0..0);
        };
        let increasing = values.windows(2).all(|w| w[0] < w[1]);
        if !increasing {
            return Self::Array(EncodedU64Array::from_values(values));
        }
        let span = last - first + 1;
        let len = values.len() as u64;
        if span == len {
            return Self::Range(first..last + 1);
        }
        let width = EncodedU64Array::width_for_span(span) as u64;
        let holes_cost = (span - len).saturating_mul(width);
        let bitmap_cost = span.div_ceil(8);
        let sorted_cost = len * width;
        if holes_cost <= bitmap_cost && holes_cost <= sorted_cost {
            let mut holes = Vec::with_capacity((span - len) as usize);
            let mut expected = first;
            for &v in values {
                holes.extend(expected..v);
                expected = v + 1;
            }
            Self::RangeWithHoles {
                range: first..last + 1,
                holes: EncodedU64Array::from_values(&holes),
            }
        } else if bitmap_cost <= sorted_cost {
            let mut bitmap = vec![0u8; bitmap_cost as usize];
            for &v in values {
                let bit = (v - first) as usize;
                bitmap[bit / 8] |= 1 << (bit % 8);
            }
            Self::RangeWithBitmap {
                range: first..last + 1,
                bitmap,
                len: values.len(),
            }
        } else {
            Self::SortedArray(EncodedU64Array::from_values(values))
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        match self {
            Self::Range(r) => (r.end - r.start) as usize,
            Self::RangeWithHoles { range, holes } => {
                (range.end - range.start) as usize - holes.len()
            }
            Self::RangeWithBitmap { len, .. } => *len,
            Self::SortedArray(a) | Self::Array(a) => a.len(),
        }
    }

    /// True when no value is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values in order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Self::Range(r) => Box::new(r.clone()),
            Self::RangeWithHoles { range, holes } => {
                let mut holes = holes.iter().peekable();
                Box::new(range.clone().filter(move |v| {
                    if holes.peek() == Some(v) {
                        holes.next();
                        false
                    } else {
                        true
                    }
                }))
            }
            Self::RangeWithBitmap { range, bitmap, .. } => {
                let start = range.start;
                Box::new((range.clone()).filter(move |v| bit_is_set(bitmap, (v - start) as usize)))
            }
            Self::SortedArray(a) | Self::Array(a) => a.iter(),
        }
    }

    /// Calls `found(index, value)` for each id of `wanted_set` this segment holds, in
    /// ascending value order for the sorted kinds: a search for the wanted ids in the
    /// segment's span (onward from `cursor`, where the previous segment's began), and for
    /// each of them a search onward from the one before in the segment, for ranges, holes
    /// and sorted arrays, or a count of the set bits since it for bitmaps (a few wanted ids
    /// need not walk a long segment); a walk for unsorted arrays.
    pub fn find_each(
        &self,
        wanted_set: &IdSet,
        cursor: &mut IdCursor,
        found: &mut impl FnMut(usize, u64),
    ) {
        match self.bounds() {
            Some((first, last)) => self.find_in(
                wanted_set.between(first, last.saturating_add(1), cursor),
                found,
            ),
            None => {
                for (index, v) in self.iter().enumerate() {
                    if wanted_set.contains(v) {
                        found(index, v);
                    }
                }
            }
        }
    }

    /// Bounds every value of a sorted kind lies within (its smallest and largest, as written);
    /// `None` for an unsorted `Array` or an empty segment.
    pub fn bounds(&self) -> Option<(u64, u64)> {
        match self {
            Self::Range(r)
            | Self::RangeWithHoles { range: r, .. }
            | Self::RangeWithBitmap { range: r, .. } => {
                (r.start < r.end).then(|| (r.start, r.end - 1))
            }
            Self::SortedArray(a) => Some((a.get(0)?, a.get(a.len().checked_sub(1)?)?)),
            Self::Array(_) => None,
        }
    }

    /// Calls `found(index, value)` for each of `ids` (ascending) this segment holds, for the
    /// sorted kinds: each a search onward from the one before in the segment, or a count of
    /// the set bits since it for bitmaps (a few wanted ids need not walk a long segment).
    /// Ids outside the segment are not found; an unsorted `Array` finds nothing here.
    pub fn find_in(&self, ids: &[u64], found: &mut impl FnMut(usize, u64)) {
        match self {
            Self::Range(r) => {
                for &v in ids {
                    if r.contains(&v) {
                        found((v - r.start) as usize, v);
                    }
                }
            }
            Self::RangeWithHoles { range, holes } => {
                let mut below = 0;
                for &v in ids {
                    if !range.contains(&v) {
                        continue;
                    }
                    below += holes.count_below(below, v);
                    if holes.get(below) != Some(v) {
                        found((v - range.start) as usize - below, v);
                    }
                }
            }
            Self::SortedArray(a) => {
                // A lone id may lie anywhere in the array: a binary search probes less.
                let far = ids.len() * 8 < a.len();
                let mut at = 0;
                for &v in ids {
                    at += match far {
                        true => a.count_below_far(at, v),
                        false => a.count_below(at, v),
                    };
                    if a.get(at) == Some(v) {
                        found(at, v);
                    }
                }
            }
            Self::RangeWithBitmap { range, bitmap, .. } => {
                // A present value's index is the set bits below it, counted onward from the
                // previous wanted id's.
                let (mut counted_to, mut below) = (0, 0);
                for &v in ids {
                    if !range.contains(&v) {
                        continue;
                    }
                    let bit = (v - range.start) as usize;
                    if bit < bitmap.len() * 8 && bit_is_set(bitmap, bit) {
                        below += ones_between(bitmap, counted_to, bit);
                        counted_to = bit;
                        found(below, v);
                    }
                }
            }
            Self::Array(_) => {}
        }
    }

    /// The value at `index`, if any: O(1) for ranges and arrays, O(log holes) for holes,
    /// O(span / 64) for bitmaps. Reads of ascending indexes use [`Self::get_from`].
    pub fn get(&self, index: usize) -> Option<u64> {
        self.get_from(index, &mut SegmentCursor::default())
    }

    /// The value at `index`, resuming from where `cursor` left off when `index` is at or past
    /// the last one it answered (amortized O(1) over an ascending walk), from the start
    /// otherwise. A cursor belongs to one segment: start a new one for each.
    pub fn get_from(&self, index: usize, cursor: &mut SegmentCursor) -> Option<u64> {
        if index < cursor.index {
            *cursor = SegmentCursor::default();
        }
        let fresh = !cursor.started;
        cursor.started = true;
        cursor.index = index;
        match self {
            Self::Range(r) => {
                let v = r.start.checked_add(index as u64)?;
                (v < r.end).then_some(v)
            }
            Self::SortedArray(a) | Self::Array(a) => a.get(index),
            Self::RangeWithHoles { range, holes } => {
                // The value at `index` is `start + index + h`, h the holes below it.
                let (start, index) = (range.start, index as u64);
                if fresh {
                    cursor.position = holes_below(holes, start, index);
                }
                while let Some(hole) = holes.get(cursor.position) {
                    if hole
                        .saturating_sub(start)
                        .saturating_sub(cursor.position as u64)
                        > index
                    {
                        break;
                    }
                    cursor.position += 1;
                }
                let v = start
                    .checked_add(index)?
                    .checked_add(cursor.position as u64)?;
                (v < range.end).then_some(v)
            }
            Self::RangeWithBitmap { range, bitmap, .. } => {
                // `position` is a byte of the bitmap, `rank` the set bits before it.
                let target = index as u64;
                if fresh {
                    for word in bitmap.chunks_exact(8) {
                        let mut bytes = [0u8; 8];
                        bytes.copy_from_slice(word);
                        let ones = u64::from(u64::from_le_bytes(bytes).count_ones());
                        if cursor.rank + ones > target {
                            break;
                        }
                        cursor.rank += ones;
                        cursor.position += 8;
                    }
                }
                while let Some(&byte) = bitmap.get(cursor.position) {
                    let ones = u64::from(byte.count_ones());
                    if cursor.rank + ones > target {
                        let bit = nth_set_bit(byte, (target - cursor.rank) as u32);
                        let v = range
                            .start
                            .checked_add(cursor.position as u64 * 8 + u64::from(bit))?;
                        return (v < range.end).then_some(v);
                    }
                    cursor.rank += ones;
                    cursor.position += 1;
                }
                None
            }
        }
    }

    /// Bytes held on the heap.
    pub fn heap_size(&self) -> usize {
        match self {
            Self::Range(_) => 0,
            Self::RangeWithHoles { holes, .. } => holes.heap_size(),
            Self::RangeWithBitmap { bitmap, .. } => bitmap.capacity(),
            Self::SortedArray(a) | Self::Array(a) => a.heap_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `find_each` finds what a walk of the segment with the wanted set finds, at the
        /// same indexes, whatever the segment's kind.
        #[test]
        fn find_each_finds_what_a_walk_finds(
            start in 0u64..1_000,
            steps in proptest::collection::vec((1u64..40, any::<bool>()), 1..300),
            shuffle in any::<bool>(),
            picks in proptest::collection::vec(0u64..20_000, 0..60),
            cuts in proptest::collection::vec(0usize..300, 0..4),
            backwards in any::<bool>(),
        ) {
            let mut values = Vec::with_capacity(steps.len());
            let mut next = start;
            for (step, dense) in steps {
                next += if dense { 1 } else { step };
                values.push(next);
            }
            if shuffle {
                values.reverse();
            }
            // Cut into segments searched with one cursor, in order or backwards.
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % values.len()).collect();
            cuts.extend([0, values.len()]);
            cuts.sort_unstable();
            cuts.dedup();
            let mut segments: Vec<(usize, U64Segment)> = (cuts.windows(2))
                .map(|w| (w[0], U64Segment::from_slice(&values[w[0]..w[1]])))
                .collect();
            if backwards {
                segments.reverse();
            }
            let mut wanted: Vec<u64> = picks.into_iter().chain(values.iter().step_by(7).copied()).collect();
            wanted.sort_unstable();
            wanted.dedup();
            let mut walked: Vec<(usize, u64)> = (values.iter().copied().enumerate())
                .filter(|(_, v)| wanted.binary_search(v).is_ok())
                .collect();
            let mut found = Vec::new();
            let set = IdSet::new(wanted.iter().map(|&v| crate::rowid::RowId::from_u64(v)));
            let mut cursor = IdCursor::default();
            for (first, segment) in &segments {
                segment.find_each(&set, &mut cursor, &mut |i, v| found.push((first + i, v)));
            }
            walked.sort_unstable();
            found.sort_unstable();
            prop_assert_eq!(found, walked);
        }
    }

    #[test]
    fn a_bitmap_finds_its_values_by_counting_set_bits() {
        let values: Vec<u64> = (0..1000).filter(|v| v % 3 == 0 || v % 7 == 1).collect();
        let segment = U64Segment::from_slice(&values);
        assert!(matches!(segment, U64Segment::RangeWithBitmap { .. }));
        let wanted: Vec<u64> = (0..1100).filter(|v| v % 5 == 0 || v % 11 == 1).collect();
        let set = IdSet::new(wanted.iter().map(|&v| crate::rowid::RowId::from_u64(v)));
        let mut found = Vec::new();
        segment.find_each(&set, &mut IdCursor::default(), &mut |i, v| {
            found.push((i, v))
        });
        let walked: Vec<(usize, u64)> = (values.iter().copied().enumerate())
            .filter(|(_, v)| wanted.contains(v))
            .collect();
        assert_eq!(found, walked);
        let bitmap = [0b1011_0110u8, 0xFF, 0x00, 0b0000_0101];
        for from in 0..32 {
            for to in 0..32 {
                let naive = (from..to).filter(|&b| bit_is_set(&bitmap, b)).count();
                assert_eq!(ones_between(&bitmap, from, to), naive, "{from}..{to}");
            }
        }
    }

    #[test]
    fn chooses_by_shape() {
        assert!(matches!(U64Segment::from_slice(&[5, 6, 7]), U64Segment::Range(r) if r == (5..8)));
        let holes: Vec<u64> = (0..1000).filter(|v| v % 100 != 0).collect();
        assert!(matches!(
            U64Segment::from_slice(&holes),
            U64Segment::RangeWithHoles { .. }
        ));
        let dense: Vec<u64> = (0..1000).filter(|v| v % 3 == 0).collect();
        assert!(matches!(
            U64Segment::from_slice(&dense),
            U64Segment::RangeWithBitmap { .. }
        ));
        let sparse: Vec<u64> = (0..10).map(|v| v * 1_000_000).collect();
        assert!(matches!(
            U64Segment::from_slice(&sparse),
            U64Segment::SortedArray(_)
        ));
        assert!(matches!(
            U64Segment::from_slice(&[3, 1, 2]),
            U64Segment::Array(_)
        ));
        assert!(U64Segment::from_slice(&[]).is_empty());
    }

    proptest! {
        /// `count_below` counts as a filter does, at every width, from any index, for values
        /// below, inside and past the array's span.
        #[test]
        fn count_below_counts_as_a_filter(
            base in prop_oneof![Just(0u64), 1u64..1 << 40, Just(u64::MAX - (1 << 33))],
            span in prop_oneof![Just(u16::MAX as u64), Just(u32::MAX as u64), Just(1u64 << 33)],
            mut offsets in prop::collection::vec(any::<u64>(), 0..100),
            probes in prop::collection::vec((any::<u64>(), 0usize..120), 1..40),
        ) {
            offsets.iter_mut().for_each(|o| *o %= span + 1);
            offsets.sort_unstable();
            let values: Vec<u64> = offsets.iter().map(|o| base + o).collect();
            let array = EncodedU64Array::from_values(&values);
            for (probe, from) in probes {
                // Near the values, and anywhere.
                let v = match probe % 3 {
                    0 => probe,
                    _ => base.saturating_add(probe % (span + 2)),
                };
                let want = values.iter().skip(from).filter(|&&x| x < v).count();
                prop_assert_eq!(array.count_below(from, v), want, "v {} from {}", v, from);
            }
        }

        #[test]
        fn round_trips_any_values(values in prop::collection::vec(any::<u64>(), 0..200)) {
            let segment = U64Segment::from_slice(&values);
            prop_assert_eq!(segment.len(), values.len());
            prop_assert_eq!(segment.iter().collect::<Vec<_>>(), values.clone());
            for (i, v) in values.iter().enumerate() {
                prop_assert_eq!(segment.get(i), Some(*v));
            }
            prop_assert_eq!(segment.get(values.len()), None);
        }

        /// Dense runs with gaps (holes and bitmaps): every index read alone, and by a cursor
        /// walking up (with repeats and a step back), gives the value at that index.
        #[test]
        fn gapped_runs_read_by_index(
            start in 0u64..1 << 40,
            gaps in prop::collection::vec(prop_oneof![Just(1u64), Just(1), Just(2), 1u64..9], 0..700),
            mut indexes in prop::collection::vec(0usize..720, 0..60),
        ) {
            let mut values = vec![start];
            for g in gaps {
                let next = values[values.len() - 1] + g;
                values.push(next);
            }
            let segment = U64Segment::from_slice(&values);
            for (i, v) in values.iter().enumerate() {
                prop_assert_eq!(segment.get(i), Some(*v));
            }
            prop_assert_eq!(segment.get(values.len()), None);
            indexes.sort_unstable();
            if let Some(&last) = indexes.last() {
                indexes.push(last / 2);
            }
            let mut cursor = SegmentCursor::default();
            for i in indexes {
                prop_assert_eq!(segment.get_from(i, &mut cursor), values.get(i).copied());
            }
        }

        #[test]
        fn round_trips_sorted_runs(start in 0u64..1 << 40, gaps in prop::collection::vec(1u64..40, 0..300)) {
            let mut values = vec![start];
            for g in gaps {
                let next = values[values.len() - 1] + g;
                values.push(next);
            }
            let segment = U64Segment::from_slice(&values);
            prop_assert_eq!(segment.iter().collect::<Vec<_>>(), values);
        }
    }
}
