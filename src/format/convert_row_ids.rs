//! Row-id sequences to and from protobuf: the segment kinds of `rowid::segment`, each
//! checked on the way in (ranges not reversed, holes and bitmaps inside their range, packed
//! arrays of a known width). Shared by manifests, fragment segments and `_rowids/` files.

use super::proto;
use crate::rowid::{EncodedU64Array, RowIdSequence, U64Segment};

pub(super) fn sequence_to_proto(sequence: &RowIdSequence) -> proto::RowIdSequence {
    proto::RowIdSequence {
        segments: sequence.segments().iter().map(segment_to_proto).collect(),
    }
}

pub(super) fn sequence_from_proto(raw: proto::RowIdSequence) -> Result<RowIdSequence, String> {
    let segments = raw
        .segments
        .into_iter()
        .map(segment_from_proto)
        .collect::<Result<_, _>>()?;
    Ok(RowIdSequence::from_segments(segments))
}

fn array_from_proto(raw: proto::EncodedU64Array) -> Result<EncodedU64Array, String> {
    let (width, base, packed) = (raw.width as usize, raw.base, &raw.packed[..]);
    if ![2, 4, 8].contains(&width) || !packed.len().is_multiple_of(width) {
        return Err(format!(
            "bad packed array (width {width}, {} bytes)",
            packed.len()
        ));
    }
    Ok(match width {
        2 => EncodedU64Array::U16 {
            base,
            offsets: offsets(packed, base, u16::from_le_bytes, u16::MAX)?,
        },
        4 => EncodedU64Array::U32 {
            base,
            offsets: offsets(packed, base, u32::from_le_bytes, u32::MAX)?,
        },
        // Full width: each word its own value, the base added here.
        _ => EncodedU64Array::U64(
            (packed.as_chunks().0.iter())
                .map(|w| {
                    u64::from_le_bytes(*w)
                        .checked_add(base)
                        .ok_or_else(overflow)
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// A narrow array's offsets from `base`: little-endian words of `N` bytes converted whole
/// (`as_chunks`, which the compiler turns into a copy; a cold open after 10M updates of 100M
/// rows decodes 10M of them). Offsets are added to the base on read, so none may carry it
/// past `u64::MAX`: a base with room for the width's `widest` offset cannot, and only a
/// base that near the end has its offsets looked at.
fn offsets<const N: usize, T: Copy + Into<u64>>(
    packed: &[u8],
    base: u64,
    from_le_bytes: impl Fn([u8; N]) -> T,
    widest: T,
) -> Result<Vec<T>, String> {
    let offsets: Vec<T> = (packed.as_chunks().0.iter())
        .map(|w| from_le_bytes(*w))
        .collect();
    let fits = |offset: T| base.checked_add(offset.into()).is_some();
    match fits(widest) || offsets.iter().all(|&o| fits(o)) {
        true => Ok(offsets),
        false => Err(overflow()),
    }
}

fn overflow() -> String {
    "packed array value overflows u64".to_string()
}

fn array_to_proto(array: &EncodedU64Array) -> proto::EncodedU64Array {
    let (base, width, packed): (u64, u32, Vec<u8>) = match array {
        EncodedU64Array::U16 { base, offsets } => (
            *base,
            2,
            offsets.iter().flat_map(|o| o.to_le_bytes()).collect(),
        ),
        EncodedU64Array::U32 { base, offsets } => (
            *base,
            4,
            offsets.iter().flat_map(|o| o.to_le_bytes()).collect(),
        ),
        EncodedU64Array::U64(values) => {
            (0, 8, values.iter().flat_map(|v| v.to_le_bytes()).collect())
        }
    };
    proto::EncodedU64Array {
        base,
        width,
        packed: packed.into(),
    }
}

fn segment_from_proto(raw: proto::U64Segment) -> Result<U64Segment, String> {
    use proto::u64_segment::Segment as S;
    let check_range = |start: u64, end: u64| {
        if start > end {
            Err(format!("segment range {start}..{end} is reversed"))
        } else {
            Ok(start..end)
        }
    };
    match raw.segment.ok_or("empty segment")? {
        S::Range(r) => Ok(U64Segment::Range(check_range(r.start, r.end)?)),
        S::RangeWithHoles(r) => {
            let range = check_range(r.start, r.end)?;
            let holes = array_from_proto(r.holes.ok_or("segment without holes")?)?;
            let sorted_inside = holes.iter().zip(holes.iter().skip(1)).all(|(a, b)| a < b)
                && holes.iter().all(|h| range.contains(&h));
            if !sorted_inside {
                return Err("segment holes unsorted or outside its range".into());
            }
            Ok(U64Segment::RangeWithHoles { range, holes })
        }
        S::RangeWithBitmap(r) => {
            let range = check_range(r.start, r.end)?;
            let span = range.end - range.start;
            if (r.bitmap.len() as u64) != span.div_ceil(8) {
                return Err("segment bitmap does not match its range".into());
            }
            let len = r.bitmap.iter().map(|b| b.count_ones() as usize).sum();
            Ok(U64Segment::RangeWithBitmap {
                range,
                bitmap: r.bitmap,
                len,
            })
        }
        S::SortedArray(a) => Ok(U64Segment::SortedArray(array_from_proto(a)?)),
        S::Array(a) => Ok(U64Segment::Array(array_from_proto(a)?)),
    }
}

fn segment_to_proto(segment: &U64Segment) -> proto::U64Segment {
    use proto::u64_segment::{Range, RangeWithBitmap, RangeWithHoles, Segment as S};
    let segment = match segment {
        U64Segment::Range(r) => S::Range(Range {
            start: r.start,
            end: r.end,
        }),
        U64Segment::RangeWithHoles { range, holes } => S::RangeWithHoles(RangeWithHoles {
            start: range.start,
            end: range.end,
            holes: Some(array_to_proto(holes)),
        }),
        U64Segment::RangeWithBitmap { range, bitmap, .. } => S::RangeWithBitmap(RangeWithBitmap {
            start: range.start,
            end: range.end,
            bitmap: bitmap.clone(),
        }),
        U64Segment::SortedArray(a) => S::SortedArray(array_to_proto(a)),
        U64Segment::Array(a) => S::Array(array_to_proto(a)),
    };
    proto::U64Segment {
        segment: Some(segment),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(base: u64, width: u32, words: &[u64]) -> proto::EncodedU64Array {
        let packed: Vec<u8> = (words.iter())
            .flat_map(|w| w.to_le_bytes()[..width as usize].to_vec())
            .collect();
        proto::EncodedU64Array {
            base,
            width,
            packed: packed.into(),
        }
    }

    #[test]
    fn packed_arrays_decode_their_values_and_refuse_ones_past_u64() {
        let decoded = |base, width, words: &[u64]| {
            array_from_proto(packed(base, width, words)).map(|a| a.iter().collect::<Vec<_>>())
        };
        assert_eq!(decoded(7, 2, &[0, 1, 65535]), Ok(vec![7, 8, 65542]));
        assert_eq!(
            decoded(7, 4, &[0, u32::MAX as u64]),
            Ok(vec![7, 7 + u32::MAX as u64])
        );
        assert_eq!(decoded(0, 8, &[3, u64::MAX]), Ok(vec![3, u64::MAX]));
        // A base near u64::MAX: its offsets are checked one by one.
        let near = u64::MAX - 10;
        assert_eq!(decoded(near, 2, &[0, 10]), Ok(vec![near, u64::MAX]));
        assert!(decoded(near, 2, &[0, 11]).is_err());
        assert_eq!(decoded(near, 4, &[10]), Ok(vec![u64::MAX]));
        assert!(decoded(near, 4, &[65536]).is_err());
        assert!(decoded(1, 8, &[u64::MAX]).is_err());
        // Widths natal does not write, and bytes that are not whole words.
        assert!(decoded(0, 3, &[1]).is_err());
        let mut ragged = packed(0, 2, &[1, 2]);
        ragged.packed.truncate(3);
        assert!(array_from_proto(ragged).is_err());
        assert_eq!(decoded(5, 2, &[]), Ok(vec![]));
    }
}
