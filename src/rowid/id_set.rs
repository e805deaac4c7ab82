//! [`IdSet`]: a small set of ids asked about very many times — the ids a take wants, tested
//! against every moved row while a view for just them is built.

use super::RowId;

/// Bits of prefilter per id: with 16, about one probe in 16 of an absent id passes it.
const BITS_PER_ID: usize = 16;

/// A sorted list of ids behind a one-probe bit-array prefilter (a one-hash Bloom filter): most
/// absent ids are turned away by one memory read, the rest by a binary search.
#[derive(Debug, Clone)]
pub struct IdSet {
    /// `1 << shift` bits, indexed by the top bits of a multiplicative hash.
    bits: Vec<u64>,
    shift: u32,
    sorted: Vec<u64>,
}

impl IdSet {
    /// A set of `ids`.
    pub fn new(ids: impl IntoIterator<Item = RowId>) -> Self {
        let mut sorted: Vec<u64> = ids.into_iter().map(RowId::as_u64).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let bit_count = (sorted.len() * BITS_PER_ID).next_power_of_two().max(64);
        let shift = 64 - bit_count.trailing_zeros();
        let mut set = Self {
            bits: vec![0; bit_count / 64],
            shift,
            sorted,
        };
        for i in 0..set.sorted.len() {
            let slot = set.slot(set.sorted[i]);
            set.bits[slot / 64] |= 1 << (slot % 64);
        }
        set
    }

    fn slot(&self, id: u64) -> usize {
        // Fibonacci hashing: the top bits of id × 2^64/φ spread neighbouring ids apart.
        (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Whether `id` (a raw `_rowid` value) is in the set.
    pub fn contains(&self, id: u64) -> bool {
        let slot = self.slot(id);
        self.bits[slot / 64] & (1 << (slot % 64)) != 0 && self.sorted.binary_search(&id).is_ok()
    }

    /// The ids, ascending.
    pub fn sorted(&self) -> &[u64] {
        &self.sorted
    }

    /// The ids in `start..end`, searched for from where `cursor` was left: spans asked for
    /// in ascending order (the sorted segments of one sequence) cost a search over the ids
    /// skipped since the last one, not over the whole set.
    pub fn between(&self, start: u64, end: u64, cursor: &mut IdCursor) -> &[u64] {
        let ids = &self.sorted[..];
        let back = cursor.0 > 0 && ids.get(cursor.0 - 1).is_some_and(|&v| v >= start);
        let from = match back {
            true => ids[..cursor.0].partition_point(|&v| v < start),
            false => cursor.0 + gallop(&ids[cursor.0..], start),
        };
        let to = from + gallop(&ids[from..], end);
        cursor.0 = from;
        &ids[from..to]
    }

    /// Ids in the set.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True when the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

/// Where the last [`IdSet::between`] began, to search onward from.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdCursor(usize);

/// How many of ascending `values` lie below `t`, by exponential search from the start and a
/// binary search within its last step: O(log of the answer), for searches that move forward
/// a little at a time.
pub(crate) fn gallop<T: Copy + Ord>(values: &[T], t: T) -> usize {
    let mut bound = 1;
    while bound <= values.len() && values[bound - 1] < t {
        bound *= 2;
    }
    // Every value before `bound / 2` is below `t`; the one at `bound - 1` (if any) is not.
    let (lo, hi) = (bound / 2, bound.min(values.len()));
    lo + values[lo..hi].partition_point(|&x| x < t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_exactly_for_members_and_strangers() {
        let members: Vec<u64> = (0..1000u64).map(|i| i * 7919 + (i << 32)).collect();
        let set = IdSet::new(members.iter().map(|&i| RowId::from_u64(i)));
        assert_eq!(set.len(), 1000);
        assert!(members.iter().all(|&id| set.contains(id)));
        let strangers = (0..100_000u64).filter(|i| !members.contains(i));
        assert!(strangers.into_iter().all(|id| !set.contains(id)));
        assert!(!IdSet::new([]).contains(0));
    }

    #[test]
    fn between_answers_as_a_filter_whatever_the_order_asked() {
        let set = IdSet::new((0..300u64).map(|i| RowId::from_u64(i * i % 1009)));
        let spans = [
            (0, 50),
            (40, 41),
            (60, 400),
            (10, 20),
            (500, 2000),
            (5, 5),
            (0, 2000),
        ];
        let mut cursor = IdCursor::default();
        for (start, end) in spans {
            let got = set.between(start, end, &mut cursor);
            let want: Vec<u64> = (set.sorted().iter().copied())
                .filter(|v| (start..end).contains(v))
                .collect();
            assert_eq!(got, want, "{start}..{end}");
        }
        for (from, v) in [(0, 0), (0, 1_000_000), (3, 17), (300, 5), (299, 1008)] {
            let want = set.sorted()[from.min(set.len())..].partition_point(|&x| x < v);
            assert_eq!(gallop(&set.sorted()[from.min(set.len())..], v), want);
        }
    }
}
