//! The two 64-bit row names: [`RowAddress`] (where a row is now) and [`RowId`] (where it was
//! born). They share a layout — `fragment << 32 | offset` — but never a meaning: the only
//! conversions between them are [`RowId::birth_address`] (the identity a never-moved row
//! resolves through) and [`RowAddress::as_native_id`] (the id a row gets when first written).

use std::fmt;

/// A fragment's id. Allocated from the manifest's high-water mark and never reused.
pub type FragmentId = u32;

/// Where a row is stored now: `fragment << 32 | offset` (`_rowaddr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowAddress(u64);

impl RowAddress {
    /// The address of row `offset` of `fragment`.
    pub const fn new(fragment: FragmentId, offset: u32) -> Self {
        Self(((fragment as u64) << 32) | offset as u64)
    }

    /// An address from its `_rowaddr` value.
    pub const fn from_u64(raw: u64) -> Self {
        Self(raw)
    }

    /// Its `_rowaddr` value.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The fragment it is in.
    pub const fn fragment_id(self) -> FragmentId {
        (self.0 >> 32) as FragmentId
    }

    /// Its row within the fragment.
    pub const fn offset(self) -> u32 {
        self.0 as u32
    }

    /// The id of a row written here for the first time (invariant I3).
    pub const fn as_native_id(self) -> RowId {
        RowId(self.0)
    }
}

impl fmt::Display for RowAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.fragment_id(), self.offset())
    }
}

/// A row's id: its address at first write (`_rowid`). Never changes while the row lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowId(u64);

impl RowId {
    /// An id from its `_rowid` value.
    pub const fn from_u64(raw: u64) -> Self {
        Self(raw)
    }

    /// Its `_rowid` value.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The address the row was born at; where it still is unless the relocation view says
    /// otherwise.
    pub const fn birth_address(self) -> RowAddress {
        RowAddress(self.0)
    }

    /// The fragment the row was born in.
    pub const fn birth_fragment(self) -> FragmentId {
        (self.0 >> 32) as FragmentId
    }
}

impl fmt::Display for RowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip() {
        let addr = RowAddress::new(7, 42);
        assert_eq!(addr.fragment_id(), 7);
        assert_eq!(addr.offset(), 42);
        assert_eq!(addr.as_u64(), (7u64 << 32) | 42);
        assert_eq!(addr.as_native_id().birth_address(), addr);
        assert_eq!(addr.to_string(), "(7, 42)");
        let max = RowAddress::new(u32::MAX, u32::MAX);
        assert_eq!(max.fragment_id(), u32::MAX);
        assert_eq!(max.offset(), u32::MAX);
    }
}
