//! How a scan's fragments are shared out among DataFusion partitions: about equal bytes in
//! each, fragments kept whole and in order where that balances, and a large fragment split
//! into row ranges where it does not (a table of one big fragment still reads on every core).

use std::ops::Range;

use crate::format::Fragment;
use crate::rowid::FragmentId;

/// A fragment is split only into pieces of at least this many rows: a piece costs its
/// partition a reader and a row selection.
const MIN_PIECE_ROWS: u32 = 64 * 1024;

/// What one partition reads of one fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    pub fragment: FragmentId,
    /// `None`: every row; otherwise the offsets this partition reads.
    pub rows: Option<Range<u32>>,
}

/// `fragments` in `partitions` groups of about equal bytes, in fragment order. A partition
/// is filled up to its share (give or take an eighth); a fragment that would overflow it by
/// more is split at the row where the share ends, when both pieces are at least
/// [`MIN_PIECE_ROWS`] rows. Never more groups than pieces (at least one, maybe empty).
pub(crate) fn partition_fragments(fragments: &[&Fragment], partitions: usize) -> Vec<Vec<Piece>> {
    let whole = |f: &Fragment| Piece {
        fragment: f.id,
        rows: None,
    };
    if partitions <= 1 {
        return vec![fragments.iter().map(|f| whole(f)).collect()];
    }
    let bytes = |f: &Fragment| {
        f.files
            .iter()
            .map(|d| d.file_size_bytes)
            .sum::<u64>()
            .max(1)
    };
    let total: u64 = fragments.iter().map(|f| bytes(f)).sum();
    let share = total.div_ceil(partitions as u64).max(1);
    let slack = share / 8;
    let mut out: Vec<Vec<Piece>> = vec![Vec::new()];
    let mut load = 0u64;
    for fragment in fragments {
        let (size, rows) = (bytes(fragment), fragment.physical_rows);
        let mut start = 0u32;
        loop {
            let rest_rows = rows - start;
            let rest = if rows == 0 {
                size
            } else {
                size * u64::from(rest_rows) / u64::from(rows)
            };
            let last = out.len() == partitions;
            let room = share.saturating_sub(load);
            // The rows that fill this partition's room, if splitting there leaves two
            // pieces worth their reader.
            let fits = (rows > 0)
                .then(|| u32::try_from(room * u64::from(rows) / size).unwrap_or(rest_rows))
                .filter(|&n| n >= MIN_PIECE_ROWS && rest_rows.saturating_sub(n) >= MIN_PIECE_ROWS);
            let piece = |range: Range<u32>| Piece {
                fragment: fragment.id,
                rows: (range != (0..rows)).then_some(range),
            };
            let partition = out.len() - 1;
            if last || rest <= room + slack || (load == 0 && fits.is_none()) {
                out[partition].push(piece(start..rows));
                load += rest;
                if !last && load + slack >= share {
                    out.push(Vec::new());
                    load = 0;
                }
                break;
            }
            if let Some(n) = fits {
                out[partition].push(piece(start..start + n));
                start += n;
            }
            // The rest goes on in the next partition.
            out.push(Vec::new());
            load = 0;
        }
    }
    out.retain(|p| !p.is_empty());
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{DataFile, TablePath};
    use proptest::prelude::*;

    fn fragment(id: FragmentId, rows: u32, bytes: u64) -> Fragment {
        Fragment {
            id,
            files: vec![DataFile {
                path: TablePath::parse("data/x.parquet").expect("path"),
                field_ids: vec![0],
                row_count: rows as u64,
                file_size_bytes: bytes,
                column_stats: Vec::new(),
                blob_reuse_index: None,
            }],
            deletion: None,
            physical_rows: rows,
            row_ids: crate::format::FragmentRowIds::Native,
            lineage: Default::default(),
            patches: Vec::new(),
        }
    }

    fn rows_of(pieces: &[Piece], fragments: &[Fragment]) -> u64 {
        pieces
            .iter()
            .map(|p| {
                let f = fragments
                    .iter()
                    .find(|f| f.id == p.fragment)
                    .expect("known");
                p.rows
                    .clone()
                    .map_or(f.physical_rows as u64, |r| (r.end - r.start) as u64)
            })
            .sum()
    }

    #[test]
    fn one_big_fragment_is_split_in_halves() {
        let fragments = [fragment(0, 800_000, 8_000_000)];
        let refs: Vec<&Fragment> = fragments.iter().collect();
        let parts = partition_fragments(&refs, 2);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0][0].rows, Some(0..400_000));
        assert_eq!(parts[1][0].rows, Some(400_000..800_000));
    }

    #[test]
    fn equal_fragments_stay_whole() {
        let fragments: Vec<Fragment> = (0..6).map(|i| fragment(i, 1_000_000, 10_000_000)).collect();
        let refs: Vec<&Fragment> = fragments.iter().collect();
        let parts = partition_fragments(&refs, 2);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().flatten().all(|p| p.rows.is_none()));
        assert_eq!(parts[0].len(), 3);
    }

    #[test]
    fn small_fragments_are_never_split() {
        let fragments = [fragment(0, 1000, 10_000), fragment(1, 10, 100)];
        let refs: Vec<&Fragment> = fragments.iter().collect();
        let parts = partition_fragments(&refs, 4);
        assert!(parts.iter().flatten().all(|p| p.rows.is_none()));
    }

    proptest! {
        /// Every row of every fragment is read by exactly one piece, pieces of one fragment
        /// in order, and no partition holds much more than its share of the bytes.
        #[test]
        fn every_row_once_and_balanced(
            sizes in prop::collection::vec((0u32..3_000_000, 1u64..100), 0..12),
            partitions in 1usize..6,
        ) {
            let fragments: Vec<Fragment> = sizes
                .iter()
                .enumerate()
                .map(|(i, (rows, per_row))| fragment(i as u32, *rows, *rows as u64 * per_row + 1))
                .collect();
            let refs: Vec<&Fragment> = fragments.iter().collect();
            let parts = partition_fragments(&refs, partitions);
            prop_assert!(!parts.is_empty() && parts.len() <= partitions.max(1));
            for f in &fragments {
                let mut ranges: Vec<Range<u32>> = parts
                    .iter()
                    .flatten()
                    .filter(|p| p.fragment == f.id)
                    .map(|p| p.rows.clone().unwrap_or(0..f.physical_rows))
                    .collect();
                prop_assert!(!ranges.is_empty(), "fragment {} is read", f.id);
                ranges.sort_by_key(|r| r.start);
                let mut next = 0;
                for r in ranges {
                    prop_assert_eq!(r.start, next);
                    next = r.end;
                }
                prop_assert_eq!(next, f.physical_rows);
            }
            let total: u64 = fragments.iter().map(|f| f.physical_rows as u64).sum();
            prop_assert_eq!(parts.iter().map(|p| rows_of(p, &fragments)).sum::<u64>(), total);
        }
    }
}
