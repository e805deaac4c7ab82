//! Index segments as the manifest records them (DESIGN.md §5, seed 002): which segments make
//! up each logical index, which fragments each covers, and the per-name `segment_seq` numbering
//! with its high-water mark. Pure bookkeeping; the segment files are read and written by `io/index.rs`.
//!
//! Segments store row ids, so a move (compaction) never invalidates them: coverage follows
//! the rows into the compacted fragments. A row rewritten by an update lands in a new,
//! uncovered fragment, so readers scan it instead of trusting its old indexed value.

use roaring::RoaringBitmap;

use super::{FieldId, TablePath};
use crate::error::{Error, Result};
use crate::rowid::FragmentId;

/// One physical segment of a logical index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSegment {
    /// A unique id of the segment.
    pub uuid: String,
    /// The logical index it belongs to.
    pub name: String,
    /// The indexed column, by field id.
    pub field_id: FieldId,
    /// Its file.
    pub path: TablePath,
    /// The fragments whose rows (as of `dataset_version`, or moved since by compaction) the
    /// segment holds.
    pub fragments: RoaringBitmap,
    /// `None` only for segments written without sequence numbers (backfilled on the next
    /// segment commit, [`IndexSection::backfill`]).
    pub segment_seq: Option<u64>,
    /// The version it was built at.
    pub dataset_version: u64,
    /// Entries (rows) it holds.
    pub row_count: u64,
    /// Its file's size.
    pub file_size_bytes: u64,
    /// How its vectors are partitioned, for a vector index segment (its file is natal's
    /// own, `io::vector_index`); `None` for a scalar segment (Parquet).
    pub vector: Option<super::VectorIndex>,
}

/// A logical index's high-water mark: the largest `segment_seq` ever assigned to its name,
/// kept after its segments are removed so no number is handed out twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalIndex {
    /// The index name.
    pub name: String,
    /// `None` for an index that predates sequence numbers.
    pub max_segment_seq: Option<u64>,
}

/// Every index segment of a version, in manifest order, and the logical high-water marks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexSection {
    /// The segments.
    pub segments: Vec<IndexSegment>,
    /// One mark per index name ever used.
    pub logical: Vec<LogicalIndex>,
}

impl IndexSection {
    /// Whether the section records sequence numbers (writers must then keep them:
    /// `flags::INDEX_SEGMENT_SEQ`).
    pub fn uses_segment_seq(&self) -> bool {
        self.segments.iter().any(|s| s.segment_seq.is_some())
            || self.logical.iter().any(|l| l.max_segment_seq.is_some())
    }

    /// The segments of the index `name`.
    pub fn segments_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a IndexSegment> {
        self.segments.iter().filter(move |s| s.name == name)
    }

    /// The field `name` indexes, if it has a segment.
    pub fn field_of(&self, name: &str) -> Option<u32> {
        self.segments_named(name).next().map(|s| s.field_id)
    }

    /// The fragments some segment of `name` covers.
    pub fn covered(&self, name: &str) -> RoaringBitmap {
        self.segments_named(name)
            .fold(RoaringBitmap::new(), |all, s| all | &s.fragments)
    }

    fn high_water(&self, name: &str) -> u64 {
        let logical = self
            .logical
            .iter()
            .filter(|l| l.name == name)
            .filter_map(|l| l.max_segment_seq)
            .max();
        let physical = self
            .segments_named(name)
            .filter_map(|s| s.segment_seq)
            .max();
        logical.max(physical).unwrap_or(0)
    }

    fn set_high_water(&mut self, name: &str, seq: u64) {
        match self.logical.iter_mut().find(|l| l.name == name) {
            Some(l) => l.max_segment_seq = Some(l.max_segment_seq.unwrap_or(0).max(seq)),
            None => self.logical.push(LogicalIndex {
                name: name.to_string(),
                max_segment_seq: Some(seq),
            }),
        }
    }

    /// Gives every segment without a `segment_seq` one, per name in manifest order after the
    /// name's high-water mark, and records every name's high-water mark. Reconstructs no
    /// history: it sets a deterministic baseline for the numbers that follow.
    pub fn backfill(&mut self) {
        let mut names: Vec<String> = self.segments.iter().map(|s| s.name.clone()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let mut next = self.high_water(&name);
            for segment in self.segments.iter_mut().filter(|s| s.name == name) {
                if segment.segment_seq.is_none() {
                    next += 1;
                    segment.segment_seq = Some(next);
                }
            }
            self.set_high_water(&name, next);
        }
    }

    /// Adds `segment` with the next sequence number of its name (after backfilling), and
    /// returns that number. Refuses a name that already indexes another field.
    pub fn add(&mut self, mut segment: IndexSegment) -> Result<u64> {
        if let Some(field) = self.field_of(&segment.name) {
            if field != segment.field_id {
                return Err(Error::invalid(format!(
                    "index {} already indexes another column",
                    segment.name
                )));
            }
        }
        self.backfill();
        let seq = self.high_water(&segment.name) + 1;
        segment.segment_seq = Some(seq);
        self.set_high_water(&segment.name, seq);
        self.segments.push(segment);
        Ok(seq)
    }

    /// Raises this section's high-water marks to `other`'s (a restore keeps the numbers the
    /// newer version handed out).
    pub fn keep_marks_of(&mut self, other: &IndexSection) {
        let mut other = other.clone();
        other.backfill();
        self.backfill();
        for mark in &other.logical {
            if let Some(seq) = mark.max_segment_seq {
                self.set_high_water(&mark.name, seq);
            }
        }
    }

    /// Raises every name's high-water mark by `count` (a restore over a damaged version,
    /// which may have numbered up to `count` more segments of any name).
    pub fn raise_marks_by(&mut self, count: u64) {
        if count == 0 {
            return;
        }
        self.backfill();
        for mark in &mut self.logical {
            mark.max_segment_seq = Some(mark.max_segment_seq.unwrap_or(0) + count);
        }
    }

    /// Removes every segment of `name`, keeping its high-water mark; returns how many.
    pub fn remove(&mut self, name: &str) -> usize {
        self.backfill();
        let before = self.segments.len();
        self.segments.retain(|s| s.name != name);
        before - self.segments.len()
    }

    /// Removes the segment `uuid` (its number keeps its seat); false when there is none.
    pub fn remove_segment(&mut self, uuid: &str) -> bool {
        self.backfill();
        let before = self.segments.len();
        self.segments.retain(|s| s.uuid != uuid);
        before != self.segments.len()
    }

    /// Forgets fragments that are gone (rewritten or removed); a segment left covering none
    /// is removed (its number keeps its seat).
    pub fn retain_fragments(&mut self, exists: impl Fn(FragmentId) -> bool) {
        for segment in &mut self.segments {
            segment.fragments = segment.fragments.iter().filter(|&f| exists(f)).collect();
        }
        self.drop_covering_nothing();
    }

    /// Drops the segments that cover no fragment (sequence numbers backfilled first, so
    /// the high-water mark keeps theirs).
    fn drop_covering_nothing(&mut self) {
        if self.segments.iter().any(|s| s.fragments.is_empty()) {
            self.backfill();
            self.segments.retain(|s| !s.fragments.is_empty());
        }
    }

    /// A row patch of `fragment` gave new values to the columns `field_ids`: the segments
    /// indexing one of them hold those rows' old values, so they no longer cover the
    /// fragment, which readers then scan (as they scan rewritten rows' new fragments) until
    /// a segment indexes it again. A segment left covering nothing is dropped.
    pub fn uncover(&mut self, fragment: FragmentId, field_ids: &[FieldId]) {
        for segment in &mut self.segments {
            if field_ids.contains(&segment.field_id) {
                segment.fragments.remove(fragment);
            }
        }
        self.drop_covering_nothing();
    }

    /// Compaction moved the rows of `inputs` into `outputs` unchanged: where every input is
    /// covered by some segment of a name, the outputs join every segment that covered an
    /// input — together they hold the ids of every row moved, and a segment is dropped only
    /// once it covers nothing, so none that holds a live row's id goes. Otherwise the outputs
    /// stay uncovered and are scanned. Inputs are then forgotten.
    pub fn on_compaction(&mut self, inputs: &[FragmentId], outputs: &[FragmentId]) {
        let mut names: Vec<String> = self.segments.iter().map(|s| s.name.clone()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let covered = self.covered(&name);
            if inputs.is_empty() || !inputs.iter().all(|f| covered.contains(*f)) {
                continue;
            }
            for segment in self
                .segments
                .iter_mut()
                .filter(|s| s.name == name && inputs.iter().any(|f| s.fragments.contains(*f)))
            {
                segment.fragments.extend(outputs.iter().copied());
            }
        }
        let inputs: RoaringBitmap = inputs.iter().copied().collect();
        self.retain_fragments(|f| !inputs.contains(f));
    }

    /// Checks the section against itself: distinct uuids, sequence numbers unique per name
    /// and not above the name's high-water mark.
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        let mut uuids = std::collections::HashSet::new();
        let mut seen = std::collections::HashSet::new();
        for segment in &self.segments {
            if segment.name.is_empty() {
                return Err("an index segment without a name".into());
            }
            if !uuids.insert(segment.uuid.as_str()) {
                return Err(format!("index segment {} listed twice", segment.uuid));
            }
            if let Some(seq) = segment.segment_seq {
                if seq == 0 || !seen.insert((segment.name.as_str(), seq)) {
                    return Err(format!(
                        "index {} has segment_seq {seq} twice or zero",
                        segment.name
                    ));
                }
                let mark = self
                    .logical
                    .iter()
                    .filter(|l| l.name == segment.name)
                    .find_map(|l| l.max_segment_seq);
                if mark.is_some_and(|m| seq > m) {
                    return Err(format!(
                        "index {} has segment_seq {seq} above its max_segment_seq",
                        segment.name
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The cache node of segment `segment_seq` of index `name` among `nodes`, by anchored round
/// robin: the anchor is a stable hash of `table_uuid:name`, and sequence numbers follow it,
/// so a removed segment keeps its seat and no other segment moves. `None` without nodes.
pub fn cache_node(table_uuid: &str, name: &str, segment_seq: u64, nodes: usize) -> Option<usize> {
    let nodes = u64::try_from(nodes).ok().filter(|n| *n > 0)?;
    // CRC-32 is fixed by its specification: every client computes the same anchor.
    let anchor = u64::from(crc32fast::hash(format!("{table_uuid}:{name}").as_bytes())) % nodes;
    let seat = (anchor + segment_seq.checked_sub(1)? % nodes) % nodes;
    usize::try_from(seat).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(name: &str, seq: Option<u64>, fragments: &[u32]) -> IndexSegment {
        IndexSegment {
            uuid: format!("{name}-{seq:?}-{fragments:?}"),
            name: name.into(),
            field_id: 0,
            path: TablePath::parse("_indices/x/index.parquet").expect("path"),
            fragments: fragments.iter().copied().collect(),
            segment_seq: seq,
            dataset_version: 1,
            row_count: 1,
            file_size_bytes: 1,
            vector: None,
        }
    }

    #[test]
    fn numbers_are_per_name_and_never_reused_after_removal() {
        let mut section = IndexSection::default();
        assert_eq!(section.add(segment("a", None, &[0])).unwrap(), 1);
        assert_eq!(section.add(segment("b", None, &[0])).unwrap(), 1);
        assert_eq!(section.add(segment("a", None, &[1])).unwrap(), 2);
        assert_eq!(section.remove("a"), 2);
        assert_eq!(section.add(segment("a", None, &[2])).unwrap(), 3);
        // A segment left covering nothing is dropped, and its number is not handed out again.
        section.retain_fragments(|f| f != 2);
        assert_eq!(section.segments_named("a").count(), 0);
        assert_eq!(section.add(segment("a", None, &[3])).unwrap(), 4);
        assert!(section.validate().is_ok());
    }

    #[test]
    fn backfill_follows_manifest_order_after_existing_marks() {
        let mut section = IndexSection {
            segments: vec![
                segment("a", None, &[0]),
                segment("b", Some(5), &[0]),
                segment("a", None, &[1]),
                segment("b", None, &[1]),
            ],
            logical: vec![LogicalIndex {
                name: "a".into(),
                max_segment_seq: Some(2),
            }],
        };
        section.backfill();
        let seqs: Vec<Option<u64>> = section.segments.iter().map(|s| s.segment_seq).collect();
        assert_eq!(seqs, vec![Some(3), Some(5), Some(4), Some(6)]);
        // Physical numbers without a logical mark reconstruct it.
        assert_eq!(section.high_water("b"), 6);
        assert!(section
            .logical
            .iter()
            .any(|l| l.name == "b" && l.max_segment_seq == Some(6)));
        assert!(section.uses_segment_seq());
    }

    #[test]
    fn a_name_keeps_its_column() {
        let mut section = IndexSection::default();
        section.add(segment("a", None, &[0])).unwrap();
        let mut other = segment("a", None, &[1]);
        other.field_id = 7;
        assert!(section.add(other).is_err());
    }

    #[test]
    fn a_patched_column_uncovers_its_fragment_in_the_segments_indexing_it() {
        let mut section = IndexSection::default();
        let on = |uuid: &str, field_id: FieldId, fragments: &[u32]| IndexSegment {
            uuid: uuid.into(),
            field_id,
            ..segment(&format!("i{field_id}"), None, fragments)
        };
        section.add(on("a", 1, &[1, 2])).unwrap();
        section.add(on("b", 1, &[3])).unwrap();
        section.add(on("c", 2, &[1, 3])).unwrap();
        section.uncover(1, &[1, 7]);
        assert_eq!(section.covered("i1"), [2, 3].into_iter().collect());
        assert_eq!(section.covered("i2"), [1, 3].into_iter().collect());
        // A segment left covering nothing goes.
        section.uncover(3, &[1]);
        assert!(section.segments.iter().all(|s| s.uuid != "b"));
        assert_eq!(section.covered("i1"), [2].into_iter().collect());
    }

    #[test]
    fn compaction_carries_coverage_only_when_every_input_is_covered() {
        let mut section = IndexSection::default();
        section.add(segment("a", None, &[0, 1])).unwrap();
        section.add(segment("a", None, &[2])).unwrap();
        section.on_compaction(&[1, 2], &[5]);
        // Both segments hold ids of rows now in 5: both stay, both cover it.
        let covering: Vec<Option<u64>> = section
            .segments_named("a")
            .filter(|s| s.fragments.contains(5))
            .map(|s| s.segment_seq)
            .collect();
        assert_eq!(covering, vec![Some(1), Some(2)]);
        section.on_compaction(&[0, 5], &[6]);
        assert_eq!(section.covered("a"), [6].into_iter().collect());
        section.on_compaction(&[6, 9], &[10]);
        // Fragment 9 was never indexed: its rows (now in 10) must be scanned.
        assert!(section.covered("a").is_empty());
    }

    #[test]
    fn validation_rejects_numbers_above_the_mark_and_duplicates() {
        let mut section = IndexSection {
            segments: vec![segment("a", Some(3), &[0])],
            logical: vec![LogicalIndex {
                name: "a".into(),
                max_segment_seq: Some(2),
            }],
        };
        assert!(section.validate().is_err());
        section.logical.clear();
        section.segments.push(segment("a", Some(3), &[1]));
        assert!(section.validate().is_err());
    }

    #[test]
    fn cache_seats_follow_the_sequence_from_a_stable_anchor() {
        let table = "7a42d66e-6b2c-4dd7-9f6a-2c9c2b29e147";
        let anchor = cache_node(table, "vector_idx", 1, 4).unwrap();
        for seq in 1..=8u64 {
            let seat = cache_node(table, "vector_idx", seq, 4).unwrap();
            assert_eq!(seat, (anchor + (seq as usize - 1)) % 4);
        }
        assert_eq!(cache_node(table, "vector_idx", 1, 0), None);
        assert_eq!(cache_node(table, "vector_idx", 0, 4), None);
        // The same inputs give the same seat in every process.
        assert_eq!(
            cache_node(table, "vector_idx", 3, 4),
            cache_node(table, "vector_idx", 3, 4)
        );
    }
}
