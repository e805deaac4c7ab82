//! [`Operation`]: the kinds of operation that publish a version. Recorded in every manifest
//! (its transaction summary) and named by every commit conflict, so it stands below both the
//! format and the error type.

/// What kind of operation produced a version.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// The table was created (version 1, no rows).
    Create,
    /// Rows were added as new fragments.
    Append,
    /// Every row was replaced.
    Overwrite,
    /// Rows were deleted.
    Delete,
    /// Rows were rewritten in place of their old copies, keeping their ids.
    Update,
    /// Fragments were merged; rows moved, keeping their ids.
    Compact,
    /// The relocation view was stored as a checkpoint.
    Checkpoint,
    /// An older version was published again as the latest.
    Restore,
    /// Index segments were added.
    CreateIndex,
    /// An index was dropped.
    DropIndex,
    /// The schema changed (a column added, dropped, renamed, widened or made nullable);
    /// no data file was written.
    AlterSchema,
    /// The first version of a clone: another table's version, its files referenced in
    /// place (shallow) or copied (deep).
    Clone,
    /// Some columns of some rows were given new values in row patches; the rows stayed
    /// where they were.
    Patch,
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operation::Create => "create",
            Operation::Append => "append",
            Operation::Overwrite => "overwrite",
            Operation::Delete => "delete",
            Operation::Update => "update",
            Operation::Compact => "compaction",
            Operation::Checkpoint => "checkpoint",
            Operation::Restore => "restore",
            Operation::CreateIndex => "create index",
            Operation::DropIndex => "drop index",
            Operation::AlterSchema => "schema change",
            Operation::Clone => "clone",
            Operation::Patch => "patch",
        })
    }
}
