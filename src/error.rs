//! natal's one error type. Variants are structured so callers can match on what went wrong;
//! the DataFusion boundary converts them with `From<Error> for DataFusionError`.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What an operation on a natal table can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another writer published a version that touches what this commit touches.
    #[error("commit conflict: {operation} planned at version {read_version} conflicts with the {other} committed as version {other_version}: {reason}")]
    Conflict {
        operation: String,
        read_version: u64,
        other: String,
        other_version: u64,
        reason: String,
    },
    /// The requested version does not exist (never written, or removed by cleanup).
    #[error("version {version} of the table at '{table}' does not exist")]
    VersionNotFound { table: String, version: u64 },
    /// No table exists at the location.
    #[error("no natal table at '{table}'")]
    TableNotFound { table: String },
    /// A table already exists at the location.
    #[error("a natal table already exists at '{table}'")]
    TableAlreadyExists { table: String },
    /// The manifest names a feature this client does not implement.
    #[error("unsupported {kind} feature flag {flag:#x} in '{path}': this natal client is too old to {action} the table")]
    UnsupportedFeature {
        path: String,
        kind: FlagKind,
        flag: u64,
        action: &'static str,
    },
    /// The manifest's format version is newer (or older) than this client understands.
    #[error(
        "unsupported format version {found} in '{path}' (this client understands {supported})"
    )]
    UnsupportedFormatVersion {
        path: String,
        found: u32,
        supported: u32,
    },
    /// A stored file is unreadable, truncated or inconsistent.
    #[error("corrupt file '{path}': {reason}")]
    Corrupt { path: String, reason: String },
    /// A path stored in a manifest points outside the table directory.
    #[error("path '{path}' escapes the table directory")]
    PathEscapesTable { path: String },
    /// The caller's input cannot be applied (wrong schema, bad arguments, unknown rows).
    #[error("invalid input: {0}")]
    InvalidInput(String),
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
    /// A user callback (predicate or update expression) failed.
    #[error("{0}")]
    External(Box<dyn std::error::Error + Send + Sync>),
}

/// Which side of the feature-flag contract a flag belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    Reader,
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
            other => datafusion::error::DataFusionError::External(Box::new(other)),
        }
    }
}
