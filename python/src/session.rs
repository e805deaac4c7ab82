//! What a catalog's tables share: the DataFusion session natal is registered in, and the
//! root its tables are under.

use datafusion::prelude::SessionContext;
use pyo3::exceptions::PyValueError;
use pyo3::PyResult;

/// What a catalog's tables share: its session and root.
pub struct Session {
    pub ctx: SessionContext,
    pub root: String,
}

impl Session {
    /// The location of table `name` under the root.
    pub fn location(&self, name: &str) -> PyResult<String> {
        let bad = name.is_empty()
            || name == "."
            || name == ".."
            || name.contains(['/', '\\'])
            || name.chars().any(char::is_control);
        if bad {
            return Err(PyValueError::new_err(format!(
                "'{name}' is not a table name: a name is one path segment under the root"
            )));
        }
        Ok(format!("{}/{name}", self.root.trim_end_matches('/')))
    }
}
