//! natal's one error type. Variants are structured so callers can match on what went wrong;
//! the DataFusion boundary converts them with `From<Error> for DataFusionError`.

use std::fmt;

use crate::operation::Operation;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What an operation on a natal table can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another writer published a version that touches what this commit touches.
    #[error(
        "commit conflict: {operation} planned at version {read_version} conflicts with {}: \
         {reason}",
        describe_other(.other, *.other_version)
    )]
    Conflict {
        /// What this commit was doing.
        operation: Operation,
        /// The version it read and planned against.
        read_version: u64,
        /// The operation of the version it conflicts with; `None` when no one version is to
        /// blame (the commit gave up after its retries).
        other: Option<Operation>,
        /// The newest version the commit saw.
        other_version: u64,
        /// What the two touch in common.
        reason: String,
    },
    /// The requested version does not exist (never written, or removed by cleanup).
    #[error("version {version} of the table at '{table}' does not exist")]
    VersionNotFound {
        /// The table's location.
        table: String,
        /// The version asked for.
        version: u64,
    },
    /// A read needs a version the table no longer has: cleanup removed it, or it is older
    /// than the table's first version (a clone's history starts at the version cloned).
    #[error(
        "version {version} of the table at '{table}' is no longer readable (removed by \
         cleanup, or older than the table's first version); the oldest version still \
         readable is {oldest}"
    )]
    VersionRemoved {
        /// The table's location.
        table: String,
        /// The version the read needs.
        version: u64,
        /// The oldest version the table still has.
        oldest: u64,
    },
    /// No table exists at the location.
    #[error("no natal table at '{table}'")]
    TableNotFound {
        /// The location looked at.
        table: String,
    },
    /// A table already exists at the location.
    #[error("a natal table already exists at '{table}'")]
    TableAlreadyExists {
        /// The location.
        table: String,
    },
    /// The manifest names a feature this client does not implement.
    #[error("unsupported {kind} feature flag {flag:#x} in '{path}': this natal client is too old to {action} the table")]
    UnsupportedFeature {
        /// The manifest that names the flag.
        path: String,
        /// Whether reading or writing needs the feature.
        kind: FlagKind,
        /// The unknown flag bits.
        flag: u64,
        /// What the client refused to do ("read", "write").
        action: &'static str,
    },
    /// The manifest's format version is newer (or older) than this client understands.
    #[error(
        "unsupported format version {found} in '{path}' (this client understands {supported})"
    )]
    UnsupportedFormatVersion {
        /// The manifest.
        path: String,
        /// The version it declares.
        found: u32,
        /// The version this client reads and writes.
        supported: u32,
    },
    /// A stored file is unreadable, truncated or inconsistent.
    #[error("corrupt file '{path}': {reason}")]
    Corrupt {
        /// The damaged file, as stored (table-relative or full).
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A path stored in a manifest points outside the table directory.
    #[error("path '{path}' escapes the table directory")]
    PathEscapesTable {
        /// The stored path.
        path: String,
    },
    /// A plan sent by another process (a Ballista client, scheduler or executor) that this
    /// natal cannot read: another natal build's, damaged, or not natal's.
    #[error("cannot read the natal plan another process sent: {0}")]
    PlanPayload(String),
    /// The caller's input cannot be applied (wrong schema, bad arguments, unknown rows).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A schema change natal refuses; nothing was committed.
    #[error("cannot {change}: {reason}")]
    SchemaChange {
        /// The change, as SQL would say it.
        change: String,
        /// Why not.
        reason: String,
    },
    /// An external blob value's bytes cannot be read: its store is not registered, its
    /// object is missing or shorter than its descriptor says.
    #[error("external blob '{uri}': {reason}")]
    ExternalBlob {
        /// The value's URI.
        uri: String,
        /// Why its bytes cannot be read.
        reason: String,
    },
    /// A row id that does not name a live row.
    #[error("row id {0} does not name a live row")]
    RowNotFound(crate::rowid::RowId),
    /// The object store failed.
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),
    /// Arrow failed (casting, concatenation, compute kernels).
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Parquet encoding or decoding failed.
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// A local file could not be read or written (the CLI's files, a local table root).
    #[error("cannot use '{path}': {source}")]
    Io {
        /// The local path.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// natal broke one of its own invariants: a bug to report, never the caller's fault.
    #[error("internal error (please report): {0}")]
    Internal(String),
    /// A user callback (predicate or update expression) failed.
    #[error("{0}")]
    External(Box<dyn std::error::Error + Send + Sync>),
}

fn describe_other(other: &Option<Operation>, version: u64) -> String {
    match other {
        Some(operation) => format!("the {operation} committed as version {version}"),
        None => format!("the versions committed up to version {version}"),
    }
}

/// Which side of the feature-flag contract a flag belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// Needed to read the table correctly: an older reader refuses the table.
    Reader,
    /// Needed to write it correctly: an older writer refuses to commit, but may read.
    Writer,
}

impl fmt::Display for FlagKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlagKind::Reader => "reader",
            FlagKind::Writer => "writer",
        })
    }
}

impl Error {
    pub(crate) fn corrupt(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Error::InvalidInput(reason.into())
    }

    pub(crate) fn internal(reason: impl Into<String>) -> Self {
        Error::Internal(reason.into())
    }

    /// True when retrying the operation on the latest version may succeed.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }
}

impl From<Error> for datafusion::error::DataFusionError {
    fn from(error: Error) -> Self {
        match error {
            Error::Arrow(e) => datafusion::error::DataFusionError::ArrowError(Box::new(e), None),
            Error::Parquet(e) => datafusion::error::DataFusionError::ParquetError(Box::new(e)),
            Error::ObjectStore(e) => datafusion::error::DataFusionError::ObjectStore(Box::new(e)),
            Error::InvalidInput(msg) => datafusion::error::DataFusionError::Plan(msg),
            refused @ Error::SchemaChange { .. } => {
                datafusion::error::DataFusionError::Plan(refused.to_string())
            }
            // DataFusion's own error (its input's, a NOT NULL check's) in its own words.
            Error::External(e) => match e.downcast::<datafusion::error::DataFusionError>() {
                Ok(own) => *own,
                Err(e) => {
                    datafusion::error::DataFusionError::External(Box::new(Error::External(e)))
                }
            },
            other => datafusion::error::DataFusionError::External(Box::new(other)),
        }
    }
}
