//! Decoding in two steps where a list of fragments names row-id files. A manifest or a
//! fragment segment decodes to an [`Unresolved`] value that lists the `_rowids/` files its
//! fragments need (with the count of ids each must hold); `io` reads them, and only then are
//! the fragments built. So no [`super::Fragment`] ever exists without its row ids, and the
//! format stays free of I/O.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::{Fragment, FragmentRowIds, RowIdFile, StorageBase, TablePath};
use crate::error::Result;
use crate::rowid::RowIdSequence;

/// The row-id files read for an [`Unresolved`] value, by path.
pub type RowIdsRead = HashMap<TablePath, Arc<RowIdSequence>>;

/// What reading the row-id files of `fragments` gives, taken from the fragments themselves:
/// to decode again a list whose fragments are at hand (tests, tools).
pub fn row_ids_held_by(fragments: &[Fragment]) -> RowIdsRead {
    fragments
        .iter()
        .filter_map(|f| match &f.row_ids {
            FragmentRowIds::Stored { file, sequence } => {
                Some((file.path.clone(), sequence.clone()))
            }
            _ => None,
        })
        .collect()
}

/// A row-id file a decoded fragment list names, with the ids it must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowIdsToRead {
    /// The file.
    pub file: RowIdFile,
    /// How many ids it must hold: its fragment's physical rows.
    pub rows: u32,
}

/// A decoded manifest or fragment segment that is whole once the row-id files it names are
/// read: [`Unresolved::row_id_files`] lists them, [`Unresolved::resolve`] builds the value.
pub struct Unresolved<T> {
    files: Vec<RowIdsToRead>,
    /// The storage bases a manifest names, which some of `files` may be under.
    bases: Vec<StorageBase>,
    build: Build<T>,
}

/// Builds the value from the files read.
type Build<T> = Box<dyn FnOnce(&RowIdsRead) -> Result<T> + Send>;

impl<T> Unresolved<T> {
    pub(super) fn new(
        files: Vec<RowIdsToRead>,
        build: impl FnOnce(&RowIdsRead) -> Result<T> + Send + 'static,
    ) -> Self {
        Self {
            files,
            bases: Vec::new(),
            build: Box::new(build),
        }
    }

    /// This value, its row-id files possibly under `bases`.
    pub(super) fn with_bases(mut self, bases: Vec<StorageBase>) -> Self {
        self.bases = bases;
        self
    }

    /// The storage bases [`Unresolved::row_id_files`] may be under (a manifest's).
    pub fn bases(&self) -> &[StorageBase] {
        &self.bases
    }

    /// The row-id files to read before [`Unresolved::resolve`] (none for lists whose ids are
    /// native or inline).
    pub fn row_id_files(&self) -> &[RowIdsToRead] {
        &self.files
    }

    /// Builds the value from the files [`Unresolved::row_id_files`] named.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] for contents that do not hold together;
    /// [`crate::Error::Internal`] if `read` lacks a file that was named.
    pub fn resolve(self, read: &RowIdsRead) -> Result<T> {
        (self.build)(read)
    }
}

impl<T> fmt::Debug for Unresolved<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unresolved")
            .field("row_id_files", &self.files)
            .finish_non_exhaustive()
    }
}
