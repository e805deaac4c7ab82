//! natal's errors as Python exceptions: a conflict, damage and a missing table, version or
//! row have their own types (under `NatalError`); bad input is a `ValueError`, as Python
//! libraries raise for it; the message is natal's.

use datafusion::error::DataFusionError;
use pyo3::exceptions::{PyException, PyFileExistsError, PyValueError};
use pyo3::{create_exception, PyErr};

create_exception!(_natal, NatalError, PyException, "An error natal reported.");
create_exception!(
    _natal,
    ConflictError,
    NatalError,
    "A commit conflicted with one that landed first: nothing was written; plan it again."
);
create_exception!(
    _natal,
    CorruptError,
    NatalError,
    "A file of the table is damaged, or of a format this natal cannot read."
);
create_exception!(
    _natal,
    NotFoundError,
    NatalError,
    "No such table, version or row."
);

/// `error` as the Python exception a caller can act on.
pub fn natal_error(error: natal::Error) -> PyErr {
    of_kind(&error, error.to_string())
}

/// The exception for an error of `error`'s kind, with `message`.
fn of_kind(error: &natal::Error, message: String) -> PyErr {
    match error {
        natal::Error::Conflict { .. } => ConflictError::new_err(message),
        natal::Error::Corrupt { .. }
        | natal::Error::UnsupportedFeature { .. }
        | natal::Error::UnsupportedFormatVersion { .. } => CorruptError::new_err(message),
        natal::Error::TableNotFound { .. }
        | natal::Error::VersionNotFound { .. }
        | natal::Error::VersionRemoved { .. }
        | natal::Error::RowNotFound(_) => NotFoundError::new_err(message),
        natal::Error::TableAlreadyExists { .. } => PyFileExistsError::new_err(message),
        natal::Error::InvalidInput(_)
        | natal::Error::SchemaChange { .. }
        | natal::Error::PathEscapesTable { .. } => PyValueError::new_err(message),
        _ => NatalError::new_err(message),
    }
}

/// A DataFusion error: natal's own error inside it as [`natal_error`] says (with the whole
/// error's text); a statement that does not parse or plan is a `ValueError`; anything else
/// a `NatalError`.
pub fn datafusion_error(error: DataFusionError) -> PyErr {
    let message = error.to_string();
    match error.find_root() {
        DataFusionError::External(inner) => match inner.downcast_ref::<natal::Error>() {
            Some(natal) => of_kind(natal, message),
            None => NatalError::new_err(message),
        },
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_)
        | DataFusionError::Configuration(_) => PyValueError::new_err(message),
        _ => NatalError::new_err(message),
    }
}
