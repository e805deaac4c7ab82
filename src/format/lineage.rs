//! Row lineage: when each row was first written and when its values last changed, from
//! fragment metadata. A fragment records the version that wrote it; a row born there was
//! created and last changed then, and needs nothing more. Only fragments holding rows
//! first written elsewhere (an update's, a compaction's) carry per-row versions, as runs
//! beside their row ids: a compaction moves rows without changing them, so it keeps what
//! they had. Fragments written before natal recorded lineage read as unknown.
//!
//! Last-change runs too many to ride in every manifest (rows merged in id order interleave
//! them) live in a [`LineageFile`] of their own; the manifest keeps their bounds, which is
//! all a scan prunes by, and only what asks for last-change versions reads them (lineage
//! columns, change reads, compaction). Creation versions follow ids (a row's is fixed at its
//! birth), so rows in id order keep them in long runs, and they stay in the manifest, where
//! an update finds them without a read.

use std::sync::Arc;

use super::TablePath;

/// A version not recorded (a row written before natal kept lineage).
pub const UNKNOWN_VERSION: u64 = 0;

/// One version per row of a fragment, run-length encoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionRuns {
    /// Each run's version (`UNKNOWN_VERSION`: not recorded).
    values: Vec<u64>,
    /// The offset just past each run, ascending.
    ends: Vec<u32>,
}

impl VersionRuns {
    /// The runs of `versions`, one per row.
    pub fn from_values(versions: &[u64]) -> Self {
        let mut runs = Self::default();
        for (offset, &version) in versions.iter().enumerate() {
            let end = offset as u32 + 1;
            match (runs.values.last(), runs.ends.last_mut()) {
                (Some(&last), Some(last_end)) if last == version => *last_end = end,
                _ => {
                    runs.values.push(version);
                    runs.ends.push(end);
                }
            }
        }
        runs
    }

    /// Runs of `(version, length)`; `None` if a length is 0 or they hold more than `u32`
    /// rows.
    pub fn from_runs(runs: impl IntoIterator<Item = (u64, u32)>) -> Option<Self> {
        let mut out = Self::default();
        let mut end: u32 = 0;
        for (version, length) in runs {
            if length == 0 {
                return None;
            }
            end = end.checked_add(length)?;
            out.values.push(version);
            out.ends.push(end);
        }
        Some(out)
    }

    /// `(version, length)` of each run, in offset order.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        (self.values.iter().copied())
            .zip(self.ends.iter().zip(starts))
            .map(|(v, (end, start))| (v, end - start))
    }

    /// Rows covered.
    pub fn len(&self) -> u32 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// True when it covers no row.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The version at `offset` (`UNKNOWN_VERSION` for one not recorded); `None` past the end.
    pub fn get(&self, offset: u32) -> Option<u64> {
        let run = self.ends.partition_point(|&end| end <= offset);
        self.values.get(run).copied()
    }

    /// The smallest and largest recorded versions, if any is recorded.
    pub fn bounds(&self) -> Option<(u64, u64)> {
        let known = self
            .values
            .iter()
            .copied()
            .filter(|&v| v != UNKNOWN_VERSION);
        known.fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
    }
}

/// A fragment's lineage.
#[derive(Debug, Clone, Default)]
pub struct Lineage {
    /// The version that wrote the fragment; `None` for one written before natal recorded
    /// it (its rows' versions are unknown).
    pub written_in: Option<u64>,
    /// Per row, the version that first wrote it; `None`: every row was born here.
    pub row_created: Option<Arc<VersionRuns>>,
    /// Per row, the version that last changed its values; `None`: the fragment's own, or
    /// in `updated_file`.
    pub row_updated: Option<Arc<VersionRuns>>,
    /// Where `row_updated` is stored when it does not ride in the manifest. While set, the
    /// last-change versions are not at hand: `io`'s `lineage_of` reads the file and gives
    /// the lineage with them.
    pub updated_file: Option<LineageFile>,
}

/// Equal as stored: runs kept in a file are compared by their file (files are immutable).
impl PartialEq for Lineage {
    fn eq(&self, other: &Self) -> bool {
        self.written_in == other.written_in
            && self.row_created == other.row_created
            && self.updated_file == other.updated_file
            && (self.updated_file.is_some() || self.row_updated == other.row_updated)
    }
}

impl Eq for Lineage {}

/// A fragment's per-row last-change versions stored in their own immutable file, with the
/// bounds a scan prunes by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineageFile {
    /// The file.
    pub path: TablePath,
    /// Its size.
    pub size_bytes: u64,
    /// The smallest and largest recorded versions among the rows, if any is recorded.
    pub bounds: Option<(u64, u64)>,
}

impl Lineage {
    /// The lineage of a fragment written in `version` whose rows were all born there.
    pub fn native(version: u64) -> Self {
        Self {
            written_in: Some(version),
            ..Self::default()
        }
    }

    /// True when the fragment's rows have versions recorded.
    pub fn is_recorded(&self) -> bool {
        self.written_in.is_some()
    }

    /// True when every per-row version is at hand: none is in a file not yet read (`io`'s
    /// `lineage_of` reads it).
    pub fn rows_at_hand(&self) -> bool {
        self.updated_file.is_none()
    }

    /// The version that first wrote the row at `offset`, if recorded.
    pub fn created_at(&self, offset: u32) -> Option<u64> {
        Self::at(self.written_in?, self.row_created.as_deref(), offset)
    }

    /// The version that last changed the values of the row at `offset`, if recorded. Only
    /// for a lineage whose rows are at hand ([`Self::rows_at_hand`]); others answer `None`.
    pub fn updated_at(&self, offset: u32) -> Option<u64> {
        debug_assert!(
            self.rows_at_hand(),
            "last-change versions read before their file"
        );
        if !self.rows_at_hand() {
            return None;
        }
        Self::at(self.written_in?, self.row_updated.as_deref(), offset)
    }

    fn at(written_in: u64, runs: Option<&VersionRuns>, offset: u32) -> Option<u64> {
        match runs {
            None => Some(written_in),
            Some(runs) => runs.get(offset).filter(|&v| v != UNKNOWN_VERSION),
        }
    }

    /// The smallest and largest recorded creation versions of its rows.
    pub fn created_bounds(&self) -> Option<(u64, u64)> {
        Self::bounds(self.written_in?, self.row_created.as_deref())
    }

    /// The smallest and largest recorded last-change versions of its rows.
    pub fn updated_bounds(&self) -> Option<(u64, u64)> {
        match &self.updated_file {
            Some(file) => file.bounds,
            None => Self::bounds(self.written_in?, self.row_updated.as_deref()),
        }
    }

    /// Bytes its last-change runs take encoded (what riding inline adds to the manifest).
    pub fn encoded_updated_len(&self) -> usize {
        (self.row_updated.as_deref())
            .map_or(0, |runs| prost::Message::encoded_len(&runs_to_proto(runs)))
    }

    /// This lineage with its last-change runs moved to `path` (`size_bytes` long): what the
    /// manifest keeps once they are written there.
    pub fn updated_stored_in(&self, path: TablePath, size_bytes: u64) -> Self {
        Self {
            row_updated: None,
            updated_file: Some(LineageFile {
                path,
                size_bytes,
                bounds: self.updated_bounds(),
            }),
            ..self.clone()
        }
    }

    /// This lineage with the last-change runs read from its file, whose bounds must be the
    /// ones the manifest keeps.
    pub(super) fn with_updated(
        &self,
        row_updated: Option<Arc<VersionRuns>>,
    ) -> Result<Self, String> {
        let read = Self {
            row_updated,
            updated_file: None,
            ..self.clone()
        };
        match &self.updated_file {
            Some(file) if read.updated_bounds() != file.bounds => {
                Err("its versions lie outside the bounds the manifest keeps".into())
            }
            _ => Ok(read),
        }
    }

    fn bounds(written_in: u64, runs: Option<&VersionRuns>) -> Option<(u64, u64)> {
        match runs {
            None => Some((written_in, written_in)),
            Some(runs) => runs.bounds(),
        }
    }
}

/// A fragment's lineage as stored: (`written_in_version`, `row_created_versions`,
/// `row_updated_versions`).
pub(super) type StoredLineage = (
    Option<u64>,
    Option<super::proto::VersionRuns>,
    Option<super::proto::VersionRuns>,
);

/// The lineage a fragment of `physical_rows` rows stores, or why it is damaged.
pub(super) fn lineage_from_proto(
    (written_in, created, updated): StoredLineage,
    physical_rows: u32,
) -> Result<Lineage, String> {
    let runs = |raw: Option<super::proto::VersionRuns>, what: &str| {
        let Some(raw) = raw else {
            return Ok(None);
        };
        if written_in.is_none() {
            return Err(format!(
                "row {what} versions without the version that wrote it"
            ));
        }
        if raw.values.len() != raw.lengths.len() {
            return Err(format!(
                "row {what} versions of {} values and {} lengths",
                raw.values.len(),
                raw.lengths.len()
            ));
        }
        let runs = VersionRuns::from_runs(raw.values.into_iter().zip(raw.lengths))
            .filter(|r| r.len() == physical_rows)
            .ok_or_else(|| format!("row {what} versions do not cover its {physical_rows} rows"))?;
        Ok(Some(Arc::new(runs)))
    };
    Ok(Lineage {
        written_in,
        row_created: runs(created, "creation")?,
        row_updated: runs(updated, "update")?,
        updated_file: None,
    })
}

/// `lineage` (decoded with no last-change runs) with them in `file`, whose reference is
/// `raw`; or why that is damaged.
pub(super) fn with_updated_file(
    lineage: Lineage,
    file: LineageFile,
    raw: &super::proto::LineageFile,
) -> Result<Lineage, String> {
    if lineage.written_in.is_none() {
        return Err("a lineage file without the version that wrote it".into());
    }
    if lineage.row_updated.is_some() {
        return Err("last-change versions both inline and in a lineage file".into());
    }
    let bounds = match (raw.updated_low, raw.updated_high) {
        (UNKNOWN_VERSION, UNKNOWN_VERSION) => None,
        (low, high) if low != UNKNOWN_VERSION && low <= high => Some((low, high)),
        (low, high) => return Err(format!("lineage file bounds {low}..={high}")),
    };
    Ok(Lineage {
        updated_file: Some(LineageFile { bounds, ..file }),
        ..lineage
    })
}

/// How a [`LineageFile`] is referenced.
pub(super) fn lineage_file_to_proto(file: &LineageFile) -> super::proto::LineageFile {
    let (updated_low, updated_high) = file.bounds.unwrap_or_default();
    super::proto::LineageFile {
        path: file.path.split_base().1.to_string(),
        base: file.path.split_base().0,
        size_bytes: file.size_bytes,
        updated_low,
        updated_high,
    }
}

/// How `lineage` is stored.
pub(super) fn lineage_to_proto(lineage: &Lineage) -> StoredLineage {
    (
        lineage.written_in,
        lineage.row_created.as_deref().map(runs_to_proto),
        lineage.row_updated.as_deref().map(runs_to_proto),
    )
}

/// How one column of versions is stored.
pub(super) fn runs_to_proto(runs: &VersionRuns) -> super::proto::VersionRuns {
    let (values, lengths) = runs.runs().unzip();
    super::proto::VersionRuns { values, lengths }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_answer_each_offset_and_round_trip() {
        let values = [3, 3, 0, 7, 7, 7, 3];
        let runs = VersionRuns::from_values(&values);
        assert_eq!(runs.len(), 7);
        for (offset, &v) in values.iter().enumerate() {
            assert_eq!(runs.get(offset as u32), Some(v));
        }
        assert_eq!(runs.get(7), None);
        let listed: Vec<(u64, u32)> = runs.runs().collect();
        assert_eq!(listed, vec![(3, 2), (0, 1), (7, 3), (3, 1)]);
        assert_eq!(VersionRuns::from_runs(listed), Some(runs.clone()));
        assert_eq!(runs.bounds(), Some((3, 7)));
        assert_eq!(VersionRuns::from_runs([(1, 0)]), None);
    }

    #[test]
    fn lineage_reads_the_fragment_version_unless_runs_say_otherwise() {
        let native = Lineage::native(5);
        assert_eq!(
            (native.created_at(9), native.updated_at(9)),
            (Some(5), Some(5))
        );
        let carried = Lineage {
            written_in: Some(8),
            row_created: Some(Arc::new(VersionRuns::from_values(&[2, 0, 8]))),
            ..Lineage::default()
        };
        assert_eq!(carried.created_at(0), Some(2));
        assert_eq!(carried.created_at(1), None, "unknown");
        assert_eq!(carried.updated_at(1), Some(8));
        assert_eq!(carried.created_bounds(), Some((2, 8)));
        assert_eq!(Lineage::default().created_at(0), None);
    }
}
