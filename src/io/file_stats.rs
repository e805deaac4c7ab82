//! Per-column statistics of a data file for the manifest, folded over the row groups of the
//! footer the writer returns (no second pass over the data): min, max, null count, with
//! string and binary bounds truncated as `format::stats` says.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, SchemaRef};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::ParquetMetaData;

use crate::error::Result;
use crate::format::{
    truncate_max_binary, truncate_max_utf8, truncate_min_binary, truncate_min_utf8, ColumnStats,
    Schema, StatValue,
};

/// Statistics of every column, folded over the row groups of the footer.
pub(super) fn column_stats(
    schema: &Schema,
    file_schema: &SchemaRef,
    metadata: &ParquetMetaData,
    nan_counts: &[u64],
) -> Result<Vec<ColumnStats>> {
    let parquet_schema = metadata.file_metadata().schema_descr();
    let sizes = root_uncompressed_bytes(metadata);
    let mut out = Vec::with_capacity(schema.fields.len());
    for (index, (field, &nans)) in schema.fields.iter().zip(nan_counts).enumerate() {
        let converter = StatisticsConverter::try_new(&field.name, file_schema, parquet_schema)?;
        let groups = metadata.row_groups();
        let null_count = converter
            .row_group_null_counts(groups.iter())?
            .iter()
            .try_fold(0u64, |acc, n| n.map(|n| acc + n));
        let is_float = matches!(
            field.data_type,
            DataType::Float16 | DataType::Float32 | DataType::Float64
        );
        let mut stats = ColumnStats {
            field_id: field.id,
            null_count,
            nan_count: is_float.then_some(nans),
            uncompressed_bytes: sizes.get(index).copied(),
            ..Default::default()
        };
        // A column stored as another type has bounds of that type's order (bytes), not
        // its own: it keeps none.
        if crate::format::stored_as(&field.data_type).is_some() {
            out.push(stats);
            continue;
        }
        let mins = stat_values(&converter.row_group_mins(groups.iter())?);
        let maxes = stat_values(&converter.row_group_maxes(groups.iter())?);
        if let (Some(mins), Some(maxes)) = (mins, maxes) {
            // A row group with no min (all null) does not constrain the bounds.
            let min = mins
                .into_iter()
                .flatten()
                .reduce(|a, b| if b.less_than(&a) { b } else { a });
            let max = maxes
                .into_iter()
                .flatten()
                .reduce(|a, b| if a.less_than(&b) { b } else { a });
            let (min, min_truncated) = truncate_stat_min(min);
            let (max, max_truncated) = truncate_stat_max(max);
            stats.bounds_only = min_truncated || max_truncated;
            stats.min = min;
            stats.max = max;
        }
        out.push(stats);
    }
    Ok(out)
}

/// Uncompressed bytes per top-level column (the file's columns are the schema's, in
/// order): the sum over its leaves and row groups.
fn root_uncompressed_bytes(metadata: &ParquetMetaData) -> Vec<u64> {
    let descr = metadata.file_metadata().schema_descr();
    let mut sizes = vec![0u64; descr.root_schema().get_fields().len()];
    for group in metadata.row_groups() {
        for (leaf, chunk) in group.columns().iter().enumerate() {
            if let Some(size) = sizes.get_mut(descr.get_column_root_idx(leaf)) {
                *size += u64::try_from(chunk.uncompressed_size()).unwrap_or(0);
            }
        }
    }
    sizes
}

fn truncate_stat_min(value: Option<StatValue>) -> (Option<StatValue>, bool) {
    match value {
        Some(StatValue::Utf8(s)) => {
            let (s, t) = truncate_min_utf8(&s);
            (Some(StatValue::Utf8(s)), t)
        }
        Some(StatValue::Binary(b)) => {
            let (b, t) = truncate_min_binary(&b);
            (Some(StatValue::Binary(b)), t)
        }
        other => (other, false),
    }
}

fn truncate_stat_max(value: Option<StatValue>) -> (Option<StatValue>, bool) {
    match value {
        Some(StatValue::Utf8(s)) => match truncate_max_utf8(&s) {
            Some((s, t)) => (Some(StatValue::Utf8(s)), t),
            None => (None, true),
        },
        Some(StatValue::Binary(b)) => match truncate_max_binary(&b) {
            Some((b, t)) => (Some(StatValue::Binary(b)), t),
            None => (None, true),
        },
        other => (other, false),
    }
}

/// Per-row-group values in natal's stat families; `None` for types without statistics.
fn stat_values(array: &ArrayRef) -> Option<Vec<Option<StatValue>>> {
    let family = match array.data_type() {
        DataType::Boolean => DataType::Boolean,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
        DataType::Date32 | DataType::Date64 | DataType::Time32(_) | DataType::Time64(_) => {
            DataType::Int64
        }
        DataType::Timestamp(_, _) | DataType::Duration(_) => DataType::Int64,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            DataType::UInt64
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => DataType::Float64,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        _ => return None,
    };
    let array = cast(array, &family).ok()?;
    let values = (0..array.len()).map(|i| {
        if array.is_null(i) {
            return None;
        }
        Some(match &family {
            DataType::Boolean => StatValue::Boolean(array.as_boolean().value(i)),
            DataType::Int64 => {
                StatValue::Int(array.as_primitive::<arrow::datatypes::Int64Type>().value(i))
            }
            DataType::UInt64 => StatValue::UInt(
                array
                    .as_primitive::<arrow::datatypes::UInt64Type>()
                    .value(i),
            ),
            DataType::Float64 => StatValue::Float(array.as_primitive::<Float64Type>().value(i)),
            DataType::Utf8 => StatValue::Utf8(array.as_string::<i32>().value(i).to_string()),
            _ => StatValue::Binary(array.as_binary::<i32>().value(i).to_vec()),
        })
    });
    Some(values.collect())
}
