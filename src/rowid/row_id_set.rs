//! [`RowIdSet`]: a set of row ids, as callers name the rows of a take, a delete or an
//! update: compressed (a roaring treemap), so a million ids cost little more than their
//! ranges, and typed, so an id is never mistaken for an address.

use std::ops::{BitAnd, BitOr};

use roaring::RoaringTreemap;

use super::RowId;

/// A set of row ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowIdSet(RoaringTreemap);

impl RowIdSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every id in `start..=end`.
    pub fn range(start: RowId, end: RowId) -> Self {
        let mut ids = RoaringTreemap::new();
        if start <= end {
            ids.insert_range(start.as_u64()..=end.as_u64());
        }
        Self(ids)
    }

    /// Adds `id`; false if it was there already.
    pub fn insert(&mut self, id: RowId) -> bool {
        self.0.insert(id.as_u64())
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: RowId) -> bool {
        self.0.contains(id.as_u64())
    }

    /// How many ids the set holds.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// True when the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = RowId> + '_ {
        self.0.iter().map(RowId::from_u64)
    }

    /// The ids as the bitmap masks are computed from.
    pub(crate) fn as_treemap(&self) -> &RoaringTreemap {
        &self.0
    }
}

impl From<RoaringTreemap> for RowIdSet {
    fn from(ids: RoaringTreemap) -> Self {
        Self(ids)
    }
}

impl FromIterator<RowId> for RowIdSet {
    fn from_iter<I: IntoIterator<Item = RowId>>(ids: I) -> Self {
        Self(ids.into_iter().map(RowId::as_u64).collect())
    }
}

impl BitAnd for RowIdSet {
    type Output = RowIdSet;
    fn bitand(self, other: RowIdSet) -> RowIdSet {
        RowIdSet(self.0 & other.0)
    }
}

impl BitOr for RowIdSet {
    type Output = RowIdSet;
    fn bitor(self, other: RowIdSet) -> RowIdSet {
        RowIdSet(self.0 | other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[u64]) -> RowIdSet {
        ids.iter().map(|&v| RowId::from_u64(v)).collect()
    }

    #[test]
    fn ranges_unions_and_intersections_hold_their_ids() {
        let range = RowIdSet::range(RowId::from_u64(5), RowId::from_u64(9));
        assert_eq!(range.len(), 5);
        assert!(range.contains(RowId::from_u64(9)) && !range.contains(RowId::from_u64(10)));
        assert!(RowIdSet::range(RowId::from_u64(9), RowId::from_u64(5)).is_empty());
        let both = range.clone() & set(&[1, 7, 9, u64::MAX]);
        assert_eq!(both, set(&[7, 9]));
        let either = range | set(&[1 << 40]);
        assert_eq!(either.len(), 6);
        let ids: Vec<u64> = either.iter().map(RowId::as_u64).collect();
        assert_eq!(ids, vec![5, 6, 7, 8, 9, 1 << 40]);
    }
}
