//! natal's Python module (`natal._natal`): catalogs and tables over Arrow's C stream
//! interface, errors as typed exceptions, and the table provider datafusion-python reads
//! through DataFusion's FFI. The Python package (`natal/__init__.py`) builds the user-facing
//! API (SQL text for filters and updates, reports as dataclasses) on these.
//!
//! Every call that does I/O runs on one tokio runtime with the GIL released, and checks for
//! Ctrl-C while it waits.

mod arrow_io;
mod catalog;
mod errors;
mod provider;
mod runtime;
mod session;
mod table;

use pyo3::prelude::*;

#[pymodule]
fn _natal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<catalog::Catalog>()?;
    m.add_class::<table::Table>()?;
    m.add_class::<arrow_io::ArrowStream>()?;
    m.add_class::<provider::TableFunction>()?;
    m.add("NatalError", py.get_type::<errors::NatalError>())?;
    m.add("ConflictError", py.get_type::<errors::ConflictError>())?;
    m.add("CorruptError", py.get_type::<errors::CorruptError>())?;
    m.add("NotFoundError", py.get_type::<errors::NotFoundError>())?;
    m.add("DATAFUSION_MAJOR", 55)?;
    Ok(())
}
