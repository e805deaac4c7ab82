//! The table as datafusion-python reads it: natal's provider behind DataFusion's FFI
//! (`FFI_TableProvider`, crate datafusion-ffi of the same major as datafusion-python); and
//! the `natal_*` table functions behind `FFI_TableFunction`.
//!
//! datafusion-python plans on its own tokio runtime, which this module's tokio (a copy of
//! its own, in this library) cannot see: the FFI enters natal's runtime while streams are
//! polled, but not while `scan` plans or a table function runs, so [`OnNatalRuntime`] and
//! [`FunctionOnNatalRuntime`] run those there themselves.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::common::Constraints;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use datafusion_ffi::udtf::FFI_TableFunction;
use natal::datafusion::{NatalTableProvider, ProviderView};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tokio::runtime::Runtime;

use crate::runtime::runtime;

/// `table` at `pinned` (or its latest, resolved now: `snapshot`) as a
/// `datafusion_table_provider` capsule for `session` (a datafusion-python
/// `SessionContext`, whose logical extension codec the FFI needs).
pub fn capsule<'py>(
    py: Python<'py>,
    table: natal::Table,
    pinned: Option<u64>,
    snapshot: natal::Snapshot,
    session: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let codec = logical_codec(session)?;
    let view = ProviderView {
        version: pinned,
        system_columns: false,
    };
    let runtime = runtime()?;
    let handle = runtime.handle().clone();
    let natal = NatalTableProvider::from_snapshot(table, view, snapshot);
    let provider = Arc::new(OnNatalRuntime {
        natal: Arc::new(natal),
        runtime,
    });
    let ffi = FFI_TableProvider::new_with_ffi_codec(provider, true, Some(handle), codec);
    PyCapsule::new_with_value(py, ffi, c"datafusion_table_provider")
}

/// The session's logical extension codec (`__datafusion_logical_extension_codec__`).
fn logical_codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    const METHOD: &str = "__datafusion_logical_extension_codec__";
    if !session.hasattr(METHOD)? {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a datafusion SessionContext (an object with {METHOD}), got {}",
            session.get_type().name()?
        )));
    }
    let capsule = session.call_method0(METHOD)?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let codec = capsule.pointer_checked(Some(c"datafusion_logical_extension_codec"))?;
    // SAFETY: the capsule holds an `FFI_LogicalExtensionCodec` (its name says so); it is
    // cloned (a reference count), not moved out, and the capsule keeps its own.
    let codec = unsafe { codec.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}

/// A provider of natal's with its planning run on natal's runtime (see the module's notes).
#[derive(Debug)]
struct OnNatalRuntime {
    natal: Arc<dyn TableProvider>,
    runtime: Arc<Runtime>,
}

impl OnNatalRuntime {
    /// Runs `future` on natal's runtime: directly when this thread is already in it (a
    /// natal session's own), else blocking this thread until it is done there.
    async fn planned<F, T>(&self, future: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>> + Send,
        T: Send,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            return future.await;
        }
        let _entered = self.runtime.enter();
        // `block_on` of a future borrowing the caller's arguments: it ends before they do.
        futures::executor::block_on(future)
    }
}

#[async_trait]
impl TableProvider for OnNatalRuntime {
    fn schema(&self) -> SchemaRef {
        self.natal.schema()
    }

    fn constraints(&self) -> Option<&Constraints> {
        self.natal.constraints()
    }

    fn table_type(&self) -> TableType {
        self.natal.table_type()
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.natal.get_column_default(column)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.natal.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        (self.planned(self.natal.scan(state, projection, filters, limit))).await
    }

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        (self.planned(self.natal.insert_into(state, input, insert_op))).await
    }
}

/// A `natal_*` table function for datafusion-python (`ctx.register_udtf(udtf(f, f.name))`),
/// bound to its catalog's tables.
#[pyclass(module = "natal._natal", frozen)]
pub struct TableFunction {
    name: String,
    function: Arc<dyn TableFunctionImpl>,
}

impl TableFunction {
    pub fn new(name: String, function: Arc<dyn TableFunctionImpl>) -> Self {
        Self { name, function }
    }
}

#[pymethods]
impl TableFunction {
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The function as a `datafusion_table_function` capsule for `session`.
    fn __datafusion_table_function__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = logical_codec(&session)?;
        let runtime = runtime()?;
        let handle = runtime.handle().clone();
        let function = Arc::new(FunctionOnNatalRuntime {
            function: self.function.clone(),
            runtime,
        });
        let ffi = FFI_TableFunction::new_with_ffi_codec(function, Some(handle), codec);
        PyCapsule::new_with_value(py, ffi, c"datafusion_table_function")
    }
}

/// A `natal_*` function run on natal's runtime, its result planned there too.
#[derive(Debug)]
struct FunctionOnNatalRuntime {
    function: Arc<dyn TableFunctionImpl>,
    runtime: Arc<Runtime>,
}

impl TableFunctionImpl for FunctionOnNatalRuntime {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let outside = tokio::runtime::Handle::try_current().is_err();
        let _entered = outside.then(|| self.runtime.enter());
        let result = self.function.call_with_args(args)?;
        Ok(Arc::new(OnNatalRuntime {
            natal: result,
            runtime: self.runtime.clone(),
        }))
    }
}
