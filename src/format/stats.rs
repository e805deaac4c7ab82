//! Per-column statistics of a data file, copied from the Parquet footer at write time.
//! String and binary bounds are truncated to [`MAX_STAT_BYTES`] bytes: the minimum becomes a
//! prefix, the maximum is rounded up, so both stay bounds of every value in the file.

use super::FieldId;

/// Longest string/binary bound kept in a manifest.
pub const MAX_STAT_BYTES: usize = 64;

/// One statistic value, in the widest type of its family.
#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    /// A boolean.
    Boolean(bool),
    /// A signed integer, date, time, timestamp or duration (as its integer value).
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float.
    Float(f64),
    /// A string, maybe truncated (`ColumnStats::bounds_only`).
    Utf8(String),
    /// Bytes, maybe truncated.
    Binary(Vec<u8>),
}

impl StatValue {
    /// Orders two values of one family; values of different families are unordered.
    pub fn less_than(&self, other: &StatValue) -> bool {
        match (self, other) {
            (StatValue::Boolean(a), StatValue::Boolean(b)) => a < b,
            (StatValue::Int(a), StatValue::Int(b)) => a < b,
            (StatValue::UInt(a), StatValue::UInt(b)) => a < b,
            (StatValue::Float(a), StatValue::Float(b)) => a < b,
            (StatValue::Utf8(a), StatValue::Utf8(b)) => a < b,
            (StatValue::Binary(a), StatValue::Binary(b)) => a < b,
            _ => false,
        }
    }
}

/// Statistics of one column of one data file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ColumnStats {
    /// The column.
    pub field_id: FieldId,
    /// The smallest value (a lower bound if `bounds_only`); `None`: unknown or all null.
    pub min: Option<StatValue>,
    /// The largest value (an upper bound if `bounds_only`).
    pub max: Option<StatValue>,
    /// Nulls; `None`: unknown.
    pub null_count: Option<u64>,
    /// Floats only. Min and max skip NaN, so pruning by them is sound only when this is 0.
    pub nan_count: Option<u64>,
    /// True when min/max are bounds, not the exact extremes (truncated strings).
    pub bounds_only: bool,
    /// The column's size in the file before compression; `None` in files written before
    /// natal recorded it.
    pub uncompressed_bytes: Option<u64>,
}

/// Truncates a string minimum to a prefix of at most `MAX_STAT_BYTES` bytes.
/// Returns the bound and whether it was truncated.
pub fn truncate_min_utf8(value: &str) -> (String, bool) {
    if value.len() <= MAX_STAT_BYTES {
        return (value.to_string(), false);
    }
    let mut end = MAX_STAT_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    (value[..end].to_string(), true)
}

/// Rounds a string maximum up to at most `MAX_STAT_BYTES` bytes: a prefix whose last
/// character is incremented. `None` if no such bound exists (every character is maximal).
pub fn truncate_max_utf8(value: &str) -> Option<(String, bool)> {
    if value.len() <= MAX_STAT_BYTES {
        return Some((value.to_string(), false));
    }
    let (prefix, _) = truncate_min_utf8(value);
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        // Skip the surrogate range, which holds no chars.
        if (0xD800..0xE000).contains(&next) {
            next = 0xE000;
        }
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return Some((chars.into_iter().collect(), true));
        }
    }
    None
}

/// Truncates a binary minimum to a prefix.
pub fn truncate_min_binary(value: &[u8]) -> (Vec<u8>, bool) {
    let end = value.len().min(MAX_STAT_BYTES);
    (value[..end].to_vec(), end < value.len())
}

/// Rounds a binary maximum up: a prefix whose last non-0xFF byte is incremented.
pub fn truncate_max_binary(value: &[u8]) -> Option<(Vec<u8>, bool)> {
    if value.len() <= MAX_STAT_BYTES {
        return Some((value.to_vec(), false));
    }
    let mut prefix = value[..MAX_STAT_BYTES].to_vec();
    while let Some(last) = prefix.pop() {
        if last < u8::MAX {
            prefix.push(last + 1);
            return Some((prefix, true));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn truncated_bounds_still_bound(value in "\\PC{0,100}") {
            let (min, _) = truncate_min_utf8(&value);
            prop_assert!(min.len() <= MAX_STAT_BYTES);
            prop_assert!(min.as_str() <= value.as_str());
            if let Some((max, _)) = truncate_max_utf8(&value) {
                prop_assert!(max.len() <= MAX_STAT_BYTES + 4);
                prop_assert!(max.as_str() >= value.as_str());
            }
        }

        #[test]
        fn truncated_binary_bounds_still_bound(value in prop::collection::vec(any::<u8>(), 0..100)) {
            let (min, _) = truncate_min_binary(&value);
            prop_assert!(min.as_slice() <= value.as_slice());
            if let Some((max, _)) = truncate_max_binary(&value) {
                prop_assert!(max.len() <= MAX_STAT_BYTES);
                prop_assert!(max.as_slice() >= value.as_slice());
            }
        }
    }
}
