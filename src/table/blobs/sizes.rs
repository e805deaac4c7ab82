//! Blob columns read as their values' sizes ([`ScanRequest::blob_sizes`]): `octet_length`
//! of a blob column answered from descriptors, a few bytes a row, no payload fetched. An
//! external value that is a whole object has no size in its descriptor; its store is asked.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type, UInt8Type};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::format::{blob_descriptor, BlobKind};
use crate::io::TableStore;
use crate::table::scan_request::ScanRequest;

/// The positions in `schema` (a scan's output, blob columns as descriptors) of the columns
/// `request` reads as sizes, and the schema with them as Int64.
pub(in crate::table) fn sized(
    request: &ScanRequest,
    schema: &SchemaRef,
) -> Result<(Vec<usize>, SchemaRef)> {
    let mut positions = Vec::new();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for name in &request.blob_sizes {
        let at = schema
            .index_of(name)
            .map_err(|_| Error::invalid(format!("{name} is not a column the scan reads")))?;
        if !matches!(fields[at].data_type(), DataType::Struct(_)) {
            return Err(Error::invalid(format!("{name} is not a blob column")));
        }
        fields[at] = Field::new(name, DataType::Int64, fields[at].is_nullable());
        positions.push(at);
    }
    let out = Schema::new(fields).with_metadata(schema.metadata().clone());
    Ok((positions, Arc::new(out)))
}

/// `rows` with the descriptor columns at `positions` as their values' sizes, as `schema`.
pub(in crate::table) fn sizes(
    rows: BoxStream<'static, Result<RecordBatch>>,
    positions: Vec<usize>,
    schema: SchemaRef,
    store: TableStore,
) -> BoxStream<'static, Result<RecordBatch>> {
    rows.and_then(move |batch| {
        let (positions, schema, store) = (positions.clone(), schema.clone(), store.clone());
        async move {
            let mut columns = batch.columns().to_vec();
            for &at in &positions {
                columns[at] = sizes_of(&columns[at], &store).await?;
            }
            let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            Ok(RecordBatch::try_new_with_options(
                schema, columns, &options,
            )?)
        }
    })
    .boxed()
}

async fn sizes_of(descriptors: &ArrayRef, store: &TableStore) -> Result<ArrayRef> {
    let corrupt = || Error::invalid("a blob column read as sizes did not come as descriptors");
    let described = descriptors.as_struct_opt().ok_or_else(corrupt)?;
    let kinds = described
        .column(blob_descriptor::KIND)
        .as_primitive_opt::<UInt8Type>()
        .ok_or_else(corrupt)?;
    let sizes = described
        .column(blob_descriptor::SIZE)
        .as_primitive_opt::<UInt64Type>()
        .ok_or_else(corrupt)?;
    let uris = described
        .column(blob_descriptor::BLOB_URI)
        .as_string_opt::<i32>()
        .ok_or_else(corrupt)?;
    let mut out = Vec::with_capacity(described.len());
    for row in 0..described.len() {
        if described.is_null(row) {
            out.push(None);
            continue;
        }
        let size = match (kinds.value(row), sizes.value(row)) {
            (kind, 0) if kind == BlobKind::External.code() => {
                store.external_size(uris.value(row)).await?
            }
            (_, size) => size,
        };
        out.push(Some(i64::try_from(size).map_err(|_| {
            Error::invalid(format!(
                "a blob value of {size} bytes is too large to count"
            ))
        })?));
    }
    Ok(Arc::new(Int64Array::from(out)))
}
