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
    let width = raw.width as usize;
    if ![2, 4, 8].contains(&width) || !raw.packed.len().is_multiple_of(width) {
        return Err(format!(
            "bad packed array (width {width}, {} bytes)",
            raw.packed.len()
        ));
    }
    let words = raw.packed.chunks_exact(width);
    let overflow = || "packed array value overflows u64".to_string();
    Ok(match width {
        2 => EncodedU64Array::U16 {
            base: raw.base,
            offsets: words.map(|w| u16::from_le_bytes([w[0], w[1]])).collect(),
        },
        4 => EncodedU64Array::U32 {
            base: raw.base,
            offsets: words
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
        },
        _ => EncodedU64Array::U64(
            words
                .map(|w| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(w);
                    u64::from_le_bytes(b)
                        .checked_add(raw.base)
                        .ok_or_else(overflow)
                })
                .collect::<Result<_, _>>()?,
        ),
    })
    .and_then(|a| {
        // Narrow encodings add the base on read; make sure that cannot overflow.
        let max_offset = match &a {
            EncodedU64Array::U16 { offsets, .. } => offsets.iter().max().map(|&o| o as u64),
            EncodedU64Array::U32 { offsets, .. } => offsets.iter().max().map(|&o| o as u64),
            EncodedU64Array::U64(_) => None,
        };
        match max_offset {
            Some(o) if raw.base.checked_add(o).is_none() => Err(overflow()),
            _ => Ok(a),
        }
    })
}

fn array_to_proto(array: &EncodedU64Array) -> proto::EncodedU64Array {
    let (base, width, packed) = match array {
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
        packed,
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
