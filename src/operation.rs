//! [`Operation`]: the kinds of operation that publish a version. Recorded in every manifest
//! (its transaction summary) and named by every commit conflict, so it stands below both the
//! format and the error type.

/// What kind of operation produced a version.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Create,
    Append,
    Overwrite,
    Delete,
    Update,
    Compact,
    Checkpoint,
    Restore,
    CreateIndex,
    DropIndex,
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
        })
    }
}
