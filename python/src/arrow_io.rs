//! Arrow in and out through the Arrow PyCapsule interface, so any Arrow library's data
//! (pyarrow, polars, pandas, DuckDB) comes in as a stream of batches read as natal writes
//! them, and results go out as a stream the caller reads as natal scans.

use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use arrow::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use datafusion::execution::SendableRecordBatchStream;
use futures::stream::BoxStream;
use futures::StreamExt;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};
use tokio::runtime::Runtime;

/// A stream of record batches a Python caller reads (`__arrow_c_stream__`), once.
#[pyclass(module = "natal._natal", frozen)]
pub struct ArrowStream {
    reader: Mutex<Option<Box<dyn RecordBatchReader + Send>>>,
}

impl ArrowStream {
    pub fn new(reader: Box<dyn RecordBatchReader + Send>) -> Self {
        Self {
            reader: Mutex::new(Some(reader)),
        }
    }

    /// The batches of a DataFusion stream, each read from it (on `runtime`) when the
    /// caller asks for the next.
    pub fn of_stream(runtime: Arc<Runtime>, stream: SendableRecordBatchStream) -> Self {
        Self::new(Box::new(Blocking { runtime, stream }))
    }

    /// No batches: a schema to hand over.
    pub fn empty(schema: SchemaRef) -> Self {
        Self::new(Box::new(RecordBatchIterator::new(Vec::new(), schema)))
    }
}

#[pymethods]
impl ArrowStream {
    /// The stream as an `arrow_array_stream` capsule (the Arrow PyCapsule interface). The
    /// requested schema is not honoured: the batches come as natal reads them.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = (self.reader.lock())
            .map_err(|_| PyValueError::new_err("the stream's lock was poisoned"))?
            .take()
            .ok_or_else(|| PyValueError::new_err("this stream was read already"))?;
        let stream = FFI_ArrowArrayStream::new(reader);
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }
}

/// A DataFusion stream read batch by batch, blocking on the runtime.
struct Blocking {
    runtime: Arc<Runtime>,
    stream: SendableRecordBatchStream,
}

impl Iterator for Blocking {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.runtime.block_on(self.stream.next())?;
        Some(next.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for Blocking {
    fn schema(&self) -> SchemaRef {
        self.stream.schema()
    }
}

/// The batches of `data`: an object with `__arrow_c_stream__` (a table, a reader, a
/// DataFrame of polars or pandas) or `__arrow_c_array__` (a record batch). Read as they
/// are consumed, not gathered.
pub fn reader_of(data: &Bound<'_, PyAny>) -> PyResult<Box<dyn RecordBatchReader + Send>> {
    if data.hasattr("__arrow_c_stream__")? {
        let capsule = data.call_method0("__arrow_c_stream__")?;
        let capsule = capsule.cast::<PyCapsule>()?;
        let pointer = capsule.pointer_checked(Some(c"arrow_array_stream"))?;
        // SAFETY: the capsule holds an `ArrowArrayStream` (its name says so, checked
        // above); `from_raw` moves it out and marks the capsule's copy released, so the
        // capsule's destructor does not release it again.
        let reader = unsafe {
            ArrowArrayStreamReader::from_raw(pointer.as_ptr().cast::<FFI_ArrowArrayStream>())
        }
        .map_err(|e| PyValueError::new_err(format!("cannot read the Arrow stream: {e}")))?;
        return Ok(Box::new(reader));
    }
    if data.hasattr("__arrow_c_array__")? {
        let pair = data.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>()?;
        let schema = pair.get_item(0)?;
        let schema = schema.cast::<PyCapsule>()?;
        let array = pair.get_item(1)?;
        let array = array.cast::<PyCapsule>()?;
        let schema = schema.pointer_checked(Some(c"arrow_schema"))?;
        let array = array.pointer_checked(Some(c"arrow_array"))?;
        // SAFETY: the capsules hold an `ArrowSchema` and an `ArrowArray` (their names say
        // so); the array is moved out (its capsule's copy marked released), the schema
        // only read.
        let data = unsafe {
            let array = FFI_ArrowArray::from_raw(array.as_ptr().cast::<FFI_ArrowArray>());
            let schema = &*schema.as_ptr().cast::<FFI_ArrowSchema>();
            arrow::ffi::from_ffi(array, schema)
        }
        .map_err(|e| PyValueError::new_err(format!("cannot read the Arrow array: {e}")))?;
        data.validate_full()
            .map_err(|e| PyValueError::new_err(format!("invalid Arrow array: {e}")))?;
        let columns = arrow::array::make_array(data);
        let Some(columns) = columns.as_struct_opt() else {
            return Err(PyTypeError::new_err(format!(
                "expected a record batch (a struct array), got an array of {}",
                columns.data_type()
            )));
        };
        if columns.null_count() > 0 {
            return Err(PyValueError::new_err(
                "a record batch cannot have null rows",
            ));
        }
        let (fields, columns, _) = columns.clone().into_parts();
        let schema = Arc::new(arrow::datatypes::Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| PyValueError::new_err(format!("invalid record batch: {e}")))?;
        return Ok(Box::new(RecordBatchIterator::new(vec![Ok(batch)], schema)));
    }
    Err(PyTypeError::new_err(format!(
        "expected Arrow data (an object with __arrow_c_stream__ or __arrow_c_array__, such as a \
         pyarrow Table or RecordBatchReader, or a polars or pandas DataFrame), got {}",
        data.get_type().name()?
    )))
}

/// `reader`'s batches as the stream natal's writes take, read on one of the runtime's
/// blocking threads (two batches ahead): reading may block (a Python generator behind a
/// pyarrow reader waits for the GIL; another natal table's stream blocks on natal's
/// runtime, which a runtime thread may not do). Called within the runtime.
pub fn batches(
    reader: Box<dyn RecordBatchReader + Send>,
) -> BoxStream<'static, natal::Result<RecordBatch>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(2);
    tokio::task::spawn_blocking(move || {
        for batch in reader {
            // The write stopped reading (it failed, or was interrupted): so does this.
            if sender
                .blocking_send(batch.map_err(natal::Error::from))
                .is_err()
            {
                break;
            }
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        let batch = receiver.recv().await?;
        Some((batch, receiver))
    })
    .boxed()
}

/// `reader` with its string and binary columns cast to the string or binary type the
/// table's column of that name has (pandas and polars write `large_string`, natal's SQL
/// tables hold `Utf8View`, ...): the same values in another layout, which natal's writes
/// would otherwise refuse as a type mismatch. Other differences stay for natal to report.
pub fn conformed(
    reader: Box<dyn RecordBatchReader + Send>,
    table: &arrow::datatypes::Schema,
) -> PyResult<Box<dyn RecordBatchReader + Send>> {
    let given = reader.schema();
    let mut casts = Vec::with_capacity(given.fields().len());
    let mut fields = Vec::with_capacity(given.fields().len());
    for field in given.fields() {
        let target = table
            .field_with_name(field.name())
            .ok()
            .map(|f| f.data_type());
        let cast = target.filter(|t| *t != field.data_type() && same_family(t, field.data_type()));
        fields.push(match cast {
            Some(t) => Arc::new(field.as_ref().clone().with_data_type(t.clone())),
            None => field.clone(),
        });
        casts.push(cast.cloned());
    }
    if casts.iter().all(Option::is_none) {
        return Ok(reader);
    }
    let schema = Arc::new(arrow::datatypes::Schema::new_with_metadata(
        fields,
        given.metadata().clone(),
    ));
    Ok(Box::new(Conformed {
        reader,
        schema,
        casts,
    }))
}

/// Whether `a` and `b` hold the same values in different layouts (strings, or binaries).
fn same_family(a: &DataType, b: &DataType) -> bool {
    use DataType::*;
    let strings = |t: &DataType| matches!(t, Utf8 | LargeUtf8 | Utf8View);
    let binaries = |t: &DataType| matches!(t, Binary | LargeBinary | BinaryView);
    (strings(a) && strings(b)) || (binaries(a) && binaries(b))
}

/// A reader whose batches are cast column by column ([`conformed`]).
struct Conformed {
    reader: Box<dyn RecordBatchReader + Send>,
    schema: SchemaRef,
    casts: Vec<Option<DataType>>,
}

impl Iterator for Conformed {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = match self.reader.next()? {
            Ok(batch) => batch,
            Err(e) => return Some(Err(e)),
        };
        let columns = (batch.columns().iter().zip(&self.casts))
            .map(|(column, cast)| match cast {
                Some(to) => arrow::compute::cast(column, to),
                None => Ok(column.clone()),
            })
            .collect::<Result<Vec<_>, _>>();
        Some(columns.and_then(|columns| RecordBatch::try_new(self.schema.clone(), columns)))
    }
}

impl RecordBatchReader for Conformed {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
