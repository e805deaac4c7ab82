//! A table handle: its latest version or one version checked out, the writes that take
//! Arrow streams, takes by row id, and the table as a DataFusion table provider for
//! datafusion-python (`__datafusion_table_provider__`).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::AsArray;
use arrow::datatypes::UInt64Type;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

use crate::arrow_io::{batches, conformed, reader_of, ArrowStream};
use crate::errors::{natal_error, NatalError, NotFoundError};
use crate::runtime::wait;
use crate::session::Session;

/// A natal table (`Catalog.open_table`): the latest version at each call, or the version
/// `checkout` pinned.
#[pyclass(module = "natal._natal", frozen)]
pub struct Table {
    session: Arc<Session>,
    name: String,
    table: natal::Table,
    /// The version checked out; `None`: the latest.
    pinned: Option<u64>,
}

impl Table {
    pub fn new(
        session: Arc<Session>,
        name: String,
        table: natal::Table,
        pinned: Option<u64>,
    ) -> Self {
        Self {
            session,
            name,
            table,
            pinned,
        }
    }

    /// The natal table it reads (no version pinned on the handle itself).
    pub fn natal(&self) -> &natal::Table {
        &self.table
    }

    /// The version read: the pinned one, or the latest now.
    fn snapshot(&self, py: Python<'_>) -> PyResult<natal::Snapshot> {
        let (table, pinned) = (self.table.clone(), self.pinned);
        wait(py, async move {
            let snapshot = match pinned {
                Some(version) => table.at_version(version).await,
                None => table.latest().await,
            };
            snapshot.map_err(natal_error)
        })
    }

    /// Writes `data` as `how` says, planned on the version its schema was read from (one
    /// read of the latest version, not a second by the write).
    fn write<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        how: Write,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.writable()?;
        let snapshot = self.snapshot(py)?;
        let reader = conformed(reader_of(data)?, &snapshot.schema().to_arrow())?;
        let table = self.table.planned_at(snapshot);
        let done = wait(py, async move {
            let written = match how {
                Write::Append => table.append_stream(batches(reader)).await,
                Write::Overwrite => table.overwrite_stream(batches(reader)).await,
            };
            written.map_err(natal_error)
        })?;
        committed(py, done)
    }

    fn writable(&self) -> PyResult<()> {
        match self.pinned {
            Some(version) => Err(PyValueError::new_err(format!(
                "version {version} of table '{}' is checked out, and versions are read-only: \
                 write to the latest (Table.checkout_latest())",
                self.name
            ))),
            None => Ok(()),
        }
    }
}

/// How [`Table::write`] writes its rows.
enum Write {
    Append,
    Overwrite,
}

/// What a commit reported, as a dict the Python side makes a dataclass of.
fn committed<'py>(py: Python<'py>, committed: natal::Committed) -> PyResult<Bound<'py, PyDict>> {
    let report = PyDict::new(py);
    report.set_item("version", committed.version)?;
    report.set_item("published", committed.published)?;
    report.set_item("rows_added", committed.figures.rows_added)?;
    report.set_item("rows_removed", committed.figures.rows_removed)?;
    Ok(report)
}

#[pymethods]
impl Table {
    /// The table's name under its catalog's root.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The version checked out, or `None` for the latest.
    #[getter]
    fn pinned_version(&self) -> Option<u64> {
        self.pinned
    }

    /// The version read now: the one checked out, or the latest.
    #[getter]
    fn version(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.snapshot(py)?.version())
    }

    /// The version's schema, as an empty Arrow stream.
    fn schema_stream(&self, py: Python<'_>) -> PyResult<ArrowStream> {
        Ok(ArrowStream::empty(self.snapshot(py)?.schema().to_arrow()))
    }

    /// Live rows of the version, from its manifest (no data read).
    fn count_all_rows(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.snapshot(py)?.count_rows())
    }

    /// This table at `version` (read-only); `NotFoundError` when the table has no such
    /// version any more.
    fn checkout(&self, py: Python<'_>, version: u64) -> PyResult<Table> {
        let table = self.table.clone();
        wait(py, async move {
            table.at_version(version).await.map_err(natal_error)
        })?;
        Ok(Table::new(
            self.session.clone(),
            self.name.clone(),
            self.table.clone(),
            Some(version),
        ))
    }

    /// This table's handle on its latest version.
    fn checkout_latest(&self) -> Table {
        Table::new(
            self.session.clone(),
            self.name.clone(),
            self.table.clone(),
            None,
        )
    }

    /// Appends `data` (Arrow data, streamed); the report of the commit.
    fn append<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.write(py, data, Write::Append)
    }

    /// Replaces every row by `data` (ids are never reused).
    fn overwrite<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.write(py, data, Write::Overwrite)
    }

    /// The rows with these ids, in that order, wherever they moved; `NotFoundError` names
    /// an id that is no live row of the version.
    #[pyo3(signature = (row_ids, columns=None, with_row_id=false))]
    fn take(
        &self,
        py: Python<'_>,
        row_ids: Vec<u64>,
        columns: Option<Vec<String>>,
        with_row_id: bool,
    ) -> PyResult<ArrowStream> {
        let snapshot = self.snapshot(py)?;
        let version = snapshot.version();
        let ids: Vec<natal::RowId> = (row_ids.iter().copied())
            .map(natal::RowId::from_u64)
            .collect();
        let mut batch = wait(py, async move {
            let request = natal::ScanRequest {
                columns,
                with_row_id: true,
                ..Default::default()
            };
            snapshot.take(&ids, request).await.map_err(natal_error)
        })?;
        // natal's take skips ids that name no live row; here that is an error, so that the
        // rows returned always line up with the ids asked for.
        let found = batch
            .column_by_name(natal::ROW_ID)
            .and_then(|c| c.as_primitive_opt::<UInt64Type>())
            .ok_or_else(|| NatalError::new_err("a take returned no _rowid column"))?;
        let found: HashSet<u64> = found.values().iter().copied().collect();
        if let Some(missing) = row_ids.iter().find(|id| !found.contains(id)) {
            return Err(NotFoundError::new_err(format!(
                "row id {missing} does not name a live row of version {version}"
            )));
        }
        if !with_row_id {
            if let Ok(position) = batch.schema().index_of(natal::ROW_ID) {
                batch.remove_column(position);
            }
        }
        let schema = batch.schema();
        let reader = arrow::array::RecordBatchIterator::new(vec![Ok(batch)], schema);
        Ok(ArrowStream::new(Box::new(reader)))
    }

    /// The table as a DataFusion table provider for datafusion-python's `SessionContext`
    /// (`ctx.register_table(name, table)`): scans with filters, projections and LIMIT
    /// pushed into natal, and `INSERT INTO` (on the latest version).
    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let snapshot = self.snapshot(py)?;
        crate::provider::capsule(py, self.table.clone(), self.pinned, snapshot, &session)
    }

    fn __repr__(&self) -> String {
        match self.pinned {
            Some(version) => format!("natal.Table('{}', version={version})", self.name),
            None => format!("natal.Table('{}')", self.name),
        }
    }
}
