//! [`Action`]: what a transaction does, in terms that can be applied again to a newer
//! version, and the new fragments it adds.

use std::sync::Arc;

use crate::format::{
    DataFile, Fragment, FragmentRowIds, IndexSegment, Lineage, Manifest, Operation, Schema,
    VersionRuns, UNKNOWN_VERSION,
};
use crate::rowid::{FragmentId, RowAddress, RowId, RowIdSequence};

/// A version in a new fragment's lineage that is the version its commit lands as (not
/// known until it lands: a rebase changes it).
pub(crate) const THIS_COMMIT: u64 = u64::MAX;

/// A row a write carries from elsewhere, keeping its id: its id and the versions that
/// created it and last changed it (`THIS_COMMIT` for the write's own, `UNKNOWN_VERSION`
/// when not recorded).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CarriedRow {
    pub id: RowId,
    pub created: u64,
    pub updated: u64,
}

impl CarriedRow {
    /// A row captured for change data (`change_capture`): only its id is kept; its
    /// lineage is not looked up (no change read asks a capture for it).
    pub(crate) fn captured(id: RowId) -> Self {
        Self {
            id,
            created: UNKNOWN_VERSION,
            updated: UNKNOWN_VERSION,
        }
    }

    /// The row `id` read at `addr` of `read` with its values changed by this write (an
    /// update's): its creation version carried over (the manifest holds it), its last
    /// change this commit's.
    pub(crate) fn updated_at(read: &Manifest, id: RowId, addr: RowAddress) -> Self {
        let lineage = read.fragment(addr.fragment_id()).map(|f| &f.lineage);
        Self {
            id,
            created: (lineage.and_then(|l| l.created_at(addr.offset()))).unwrap_or(UNKNOWN_VERSION),
            updated: THIS_COMMIT,
        }
    }

    /// The row `id` moved unchanged from `addr` (a compaction's), whose fragment's lineage
    /// is `lineage` with its rows' versions at hand (`io`'s `lineage_of`): both carried over.
    pub(crate) fn moved_from(lineage: Option<&Lineage>, id: RowId, addr: RowAddress) -> Self {
        let at = |version: Option<u64>| version.unwrap_or(UNKNOWN_VERSION);
        Self {
            id,
            created: at(lineage.and_then(|l| l.created_at(addr.offset()))),
            updated: at(lineage.and_then(|l| l.updated_at(addr.offset()))),
        }
    }
}

/// A data file written for a new fragment, with the ids of its rows.
#[derive(Debug, Clone)]
pub(crate) struct NewFragment {
    pub file: DataFile,
    pub rows: u32,
    /// `None`: every row is new (native). Otherwise per row: `Some(id)` for a row carried
    /// from elsewhere, `None` for a new row.
    pub carried_ids: Option<Vec<Option<RowId>>>,
    /// With `carried_ids`, per row: the versions that created it and last changed it
    /// (`THIS_COMMIT` for a new row's, or a changed row's last change).
    pub lineage: Option<Vec<(u64, u64)>>,
}

impl NewFragment {
    /// The fragment, given its id and the version its commit lands as.
    pub(super) fn into_fragment(self, id: FragmentId, version: u64) -> Fragment {
        let row_ids = self.carried_ids.and_then(|ids| {
            let all_native = ids.iter().all(Option::is_none);
            (!all_native).then(|| {
                let ids: Vec<u64> = ids
                    .iter()
                    .enumerate()
                    .map(|(offset, carried)| match carried {
                        Some(id) => id.as_u64(),
                        None => RowAddress::new(id, offset as u32).as_u64(),
                    })
                    .collect();
                Arc::new(RowIdSequence::from_ids(&ids))
            })
        });
        let mut lineage = Lineage::native(version);
        if let Some(rows) = &self.lineage {
            // Runs only where a row's version is not the fragment's own.
            let runs = |pick: fn(&(u64, u64)) -> u64| {
                let versions: Vec<u64> = (rows.iter().map(pick))
                    .map(|v| if v == THIS_COMMIT { version } else { v })
                    .collect();
                (versions.iter().any(|&v| v != version))
                    .then(|| Arc::new(VersionRuns::from_values(&versions)))
            };
            lineage.row_created = runs(|r| r.0);
            lineage.row_updated = runs(|r| r.1);
        }
        Fragment {
            id,
            files: vec![self.file],
            deletion: None,
            physical_rows: self.rows,
            row_ids: FragmentRowIds::of(row_ids),
            lineage,
            patches: Vec::new(),
        }
    }
}

/// A row patch written for a fragment: its file (the new values of the patched rows, in
/// offset order) and the offsets it patches.
#[derive(Debug, Clone)]
pub(crate) struct NewPatch {
    pub fragment: FragmentId,
    pub file: DataFile,
    pub offsets: Arc<roaring::RoaringBitmap>,
}

/// What a transaction does, in terms that can be re-applied to a newer version.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    Append {
        fragments: Vec<NewFragment>,
    },
    Overwrite {
        fragments: Vec<NewFragment>,
    },
    /// Delete rows, each named by id and its address when the transaction read it.
    Delete {
        rows: Vec<(RowId, RowAddress)>,
    },
    /// Delete the old copies of rows and add fragments holding their new values.
    Update {
        rows: Vec<(RowId, RowAddress)>,
        fragments: Vec<NewFragment>,
    },
    /// Replace `inputs` (as read) by `fragments`: per group, its input fragment ids and how
    /// many of `fragments` (in order) hold its rows.
    Compact {
        inputs: Vec<Fragment>,
        fragments: Vec<NewFragment>,
        groups: Vec<(Vec<FragmentId>, usize)>,
    },
    Checkpoint {
        checkpoint: crate::format::CheckpointRef,
    },
    Restore {
        from: Box<Manifest>,
    },
    /// Add index segments built from the rows of their fragments as read, in place of the
    /// segments `replaces` names by uuid (an index optimized: they must still be there).
    CreateIndex {
        segments: Vec<IndexSegment>,
        replaces: Vec<String>,
    },
    /// Remove every segment of an index (its sequence high-water mark stays).
    DropIndex {
        name: String,
    },
    /// Put schema `to` in place of `from` (as read), attaching `column_files` (the values
    /// of columns added with values, one file per fragment) beside each fragment's files.
    AlterSchema {
        from: Box<Schema>,
        to: Box<Schema>,
        column_files: Vec<(FragmentId, DataFile)>,
    },
    /// Give some columns of some rows new values in place: one row patch per fragment
    /// holding some of them (reader flag `ROW_PATCHES`); add `fragments` of new rows (a
    /// MERGE's inserts beside its patched updates), as an append does; and delete `deleted`
    /// (a MERGE's deletes), as a delete does.
    Patch {
        patches: Vec<NewPatch>,
        fragments: Vec<NewFragment>,
        deleted: Vec<(RowId, RowAddress)>,
    },
    /// Start or stop recording change data (a table property; recorded as a schema
    /// change: it changes no row).
    SetChangeDataFeed {
        enabled: bool,
    },
    /// Set or clear the table's patch share (a table property, recorded as a schema
    /// change: it changes no row).
    SetPatchMaxShare {
        share: Option<f64>,
    },
}

impl Action {
    /// The fragments this action adds, if it adds any.
    pub(super) fn new_fragments_mut(&mut self) -> Option<&mut Vec<NewFragment>> {
        match self {
            Action::Append { fragments }
            | Action::Overwrite { fragments }
            | Action::Update { fragments, .. }
            | Action::Compact { fragments, .. }
            | Action::Patch { fragments, .. } => Some(fragments),
            _ => None,
        }
    }

    /// The data files it wrote (its new fragments' and added columns').
    pub(crate) fn written_files(&self) -> Vec<DataFile> {
        match self {
            Action::Append { fragments }
            | Action::Overwrite { fragments }
            | Action::Update { fragments, .. }
            | Action::Compact { fragments, .. } => {
                fragments.iter().map(|f| f.file.clone()).collect()
            }
            Action::AlterSchema { column_files, .. } => {
                column_files.iter().map(|(_, file)| file.clone()).collect()
            }
            Action::Patch {
                patches, fragments, ..
            } => (patches.iter().map(|p| p.file.clone()))
                .chain(fragments.iter().map(|f| f.file.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The files of the row patches this action adds (none for other actions).
    pub(super) fn patch_files(&self) -> impl Iterator<Item = &DataFile> {
        let patches = match self {
            Action::Patch { patches, .. } => patches.as_slice(),
            _ => &[],
        };
        patches.iter().map(|p| &p.file)
    }

    /// True when committing this would publish a version equal to the one read: no rows
    /// to add, none to delete. (An overwrite with no rows empties the table; it changes.)
    pub(crate) fn changes_nothing(&self) -> bool {
        match self {
            Action::Append { fragments } => fragments.is_empty(),
            Action::Delete { rows } => rows.is_empty(),
            Action::Patch {
                patches,
                fragments,
                deleted,
            } => patches.is_empty() && fragments.is_empty() && deleted.is_empty(),
            Action::Update { rows, fragments } => rows.is_empty() && fragments.is_empty(),
            Action::Compact { inputs, .. } => inputs.is_empty(),
            Action::CreateIndex { segments, replaces } => {
                segments.is_empty() && replaces.is_empty()
            }
            Action::Overwrite { .. }
            | Action::Checkpoint { .. }
            | Action::Restore { .. }
            | Action::DropIndex { .. }
            | Action::AlterSchema { .. }
            | Action::SetChangeDataFeed { .. }
            | Action::SetPatchMaxShare { .. } => false,
        }
    }

    pub(super) fn operation(&self) -> Operation {
        match self {
            Action::Append { .. } => Operation::Append,
            Action::Overwrite { .. } => Operation::Overwrite,
            Action::Delete { .. } => Operation::Delete,
            Action::Update { .. } => Operation::Update,
            Action::Compact { .. } => Operation::Compact,
            Action::Checkpoint { .. } => Operation::Checkpoint,
            Action::Restore { .. } => Operation::Restore,
            Action::CreateIndex { .. } => Operation::CreateIndex,
            Action::DropIndex { .. } => Operation::DropIndex,
            Action::Patch { .. } => Operation::Patch,
            Action::AlterSchema { .. }
            | Action::SetChangeDataFeed { .. }
            | Action::SetPatchMaxShare { .. } => Operation::AlterSchema,
        }
    }
}
