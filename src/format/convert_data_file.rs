//! Data files in the manifest's protobuf, with their column statistics: a fragment's files
//! (`convert`) and a row patch's file (`row_patch`, whose conversion `convert` calls: kept
//! here so that it need not reach back into `convert`).

use super::proto;
use super::{ColumnStats, DataFile, StatValue, TablePath};
use crate::error::Result;

/// A data file from its protobuf.
pub(super) fn data_file_from_proto(f: proto::DataFile) -> Result<DataFile> {
    Ok(DataFile {
        path: TablePath::in_base(f.base, TablePath::parse(&f.path)?),
        field_ids: f.field_ids,
        row_count: f.row_count,
        file_size_bytes: f.file_size_bytes,
        column_stats: f.column_stats.into_iter().map(stats_from_proto).collect(),
        blob_reuse_index: f
            .blob_reuse_index
            .map(|index| super::blob_reuse::from_proto(index, &f.path))
            .transpose()?,
    })
}

/// A data file's protobuf.
pub(super) fn data_file_to_proto(d: &DataFile) -> proto::DataFile {
    proto::DataFile {
        path: d.path.split_base().1.to_string(),
        base: d.path.split_base().0,
        field_ids: d.field_ids.clone(),
        row_count: d.row_count,
        file_size_bytes: d.file_size_bytes,
        column_stats: d
            .column_stats
            .iter()
            .map(|s| proto::ColumnStats {
                field_id: s.field_id,
                min: s.min.as_ref().map(stat_to_proto),
                max: s.max.as_ref().map(stat_to_proto),
                null_count: s.null_count,
                nan_count: s.nan_count,
                bounds_only: s.bounds_only,
                uncompressed_bytes: s.uncompressed_bytes,
            })
            .collect(),
        blob_reuse_index: d.blob_reuse_index.as_ref().map(super::blob_reuse::to_proto),
    }
}

fn stats_from_proto(raw: proto::ColumnStats) -> ColumnStats {
    let value = |v: proto::StatValue| {
        v.value.map(|v| match v {
            proto::stat_value::Value::Boolean(b) => StatValue::Boolean(b),
            proto::stat_value::Value::Int(i) => StatValue::Int(i),
            proto::stat_value::Value::Uint(u) => StatValue::UInt(u),
            proto::stat_value::Value::Float(f) => StatValue::Float(f),
            proto::stat_value::Value::Utf8(s) => StatValue::Utf8(s),
            proto::stat_value::Value::Binary(b) => StatValue::Binary(b),
        })
    };
    ColumnStats {
        field_id: raw.field_id,
        min: raw.min.and_then(value),
        max: raw.max.and_then(value),
        null_count: raw.null_count,
        nan_count: raw.nan_count,
        bounds_only: raw.bounds_only,
        uncompressed_bytes: raw.uncompressed_bytes,
    }
}

fn stat_to_proto(value: &StatValue) -> proto::StatValue {
    use proto::stat_value::Value;
    proto::StatValue {
        value: Some(match value {
            StatValue::Boolean(b) => Value::Boolean(*b),
            StatValue::Int(i) => Value::Int(*i),
            StatValue::UInt(u) => Value::Uint(*u),
            StatValue::Float(f) => Value::Float(*f),
            StatValue::Utf8(s) => Value::Utf8(s.clone()),
            StatValue::Binary(b) => Value::Binary(b.clone()),
        }),
    }
}
