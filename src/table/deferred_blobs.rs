//! Blob columns a filtered scan fetches only for the rows its filter keeps: the read carries
//! their descriptors (a few bytes a row) through the filter, and the rows that pass have their
//! bytes fetched from the sidecars, so a filter selecting 1% of rows fetches about 1% of the
//! payload. A blob column the filter itself reads is fetched with the rest, before it.

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field as ArrowField, Schema as ArrowSchema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::error::Result;
use crate::format::{FieldId, Fragment, Schema, TablePath};
use crate::io::{FileColumns, TableStore};

/// The blob columns of a scan's output read as descriptors, and the output they resolve to.
#[derive(Debug)]
pub(super) struct DeferredBlobs {
    /// Each deferred column: its place in the output, field id, and the type it reads as.
    columns: Vec<(usize, FieldId, DataType)>,
    /// The scan's output, bytes in place of descriptors.
    output: SchemaRef,
}

impl DeferredBlobs {
    /// The blob columns of `output` (the scan's, whose user columns come first) that the
    /// filter's columns `probe` do not name; `None` when there are none.
    pub(super) fn plan(schema: &Schema, output: &SchemaRef, probe: &SchemaRef) -> Option<Self> {
        let columns: Vec<(usize, FieldId, DataType)> = output
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| probe.field_with_name(f.name()).is_err())
            // Read as bytes: a column read as descriptors (or sizes) has none to defer.
            .filter(|(_, f)| matches!(f.data_type(), DataType::Binary | DataType::LargeBinary))
            .filter_map(|(at, f)| {
                let column = schema.field_by_name(f.name())?;
                column.blob?;
                Some((at, column.id, f.data_type().clone()))
            })
            .collect();
        (!columns.is_empty()).then(|| Self {
            columns,
            output: output.clone(),
        })
    }

    /// `schema` (of a read or of the filter's output) with the deferred columns typed as the
    /// descriptors data files hold.
    pub(super) fn as_descriptors(&self, schema: &SchemaRef, table: &Schema) -> SchemaRef {
        let fields: Vec<ArrowField> = schema
            .fields()
            .iter()
            .map(|f| {
                let deferred = table
                    .field_by_name(f.name())
                    .filter(|column| self.columns.iter().any(|(_, id, _)| *id == column.id));
                match deferred {
                    Some(column) => f.as_ref().clone().with_data_type(column.file_type()),
                    None => f.as_ref().clone(),
                }
            })
            .collect();
        Arc::new(ArrowSchema::new(fields).with_metadata(schema.metadata().clone()))
    }

    /// `columns` reading the deferred ones as descriptors.
    pub(super) fn defer(&self, columns: FileColumns) -> FileColumns {
        columns.deferring(self.columns.iter().map(|(_, id, _)| *id).collect())
    }

    /// `rows` (of `fragment`, filtered, deferred columns as descriptors) with the bytes of
    /// their deferred columns fetched.
    pub(super) fn resolve(
        self: Arc<Self>,
        store: &TableStore,
        fragment: &Fragment,
        rows: BoxStream<'static, Result<RecordBatch>>,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        // A blob column's sidecars are those of the file that holds it (any file, if the
        // fragment predates the column: its descriptors are then all null).
        let files: Vec<TablePath> = self
            .columns
            .iter()
            .map(|(_, id, _)| {
                let file = fragment.file_holding(*id).unwrap_or_default();
                fragment.files[file].path.clone()
            })
            .collect();
        let store = store.clone();
        rows.and_then(move |batch| {
            let (this, store, files) = (self.clone(), store.clone(), files.clone());
            async move {
                let mut columns = batch.columns().to_vec();
                for ((at, _, out), file) in this.columns.iter().zip(&files) {
                    columns[*at] = store.resolve_blobs(file, &columns[*at], out).await?;
                }
                let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
                Ok(RecordBatch::try_new_with_options(
                    this.output.clone(),
                    columns,
                    &options,
                )?)
            }
        })
        .boxed()
    }
}
