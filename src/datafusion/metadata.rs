//! Metadata tables: `t$versions`, `t$fragments`, `t$relocations`, `t$indexes`, `t$schema`
//! and `t$blobs` (also `t@v7$fragments` and so on), built when the name is resolved: from
//! manifests, and for `t$blobs` from the blob columns' descriptors (no payload read).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
    UInt32Array, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::{MemTable, TableProvider};
use datafusion::error::Result;

use crate::format::Manifest;
use crate::table::Snapshot;

fn mem_table(fields: Vec<Field>, columns: Vec<ArrayRef>) -> Result<Arc<dyn TableProvider>> {
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
}

/// One row per retained version of `listed` (`Table::version_list`).
pub(crate) fn versions(
    listed: Vec<(u64, crate::Result<Manifest>)>,
) -> Result<Arc<dyn TableProvider>> {
    let manifests: Vec<Option<&Manifest>> = listed.iter().map(|(_, m)| m.as_ref().ok()).collect();
    let of = |value: fn(&Manifest) -> u64| -> Arc<UInt64Array> {
        Arc::new(UInt64Array::from_iter(
            manifests.iter().map(|m| m.map(value)),
        ))
    };
    let utc: Arc<str> = Arc::from("UTC");
    mem_table(
        vec![
            Field::new("version", DataType::UInt64, false),
            Field::new("parent_version", DataType::UInt64, true),
            Field::new(
                "committed_at",
                DataType::Timestamp(TimeUnit::Microsecond, Some(utc.clone())),
                true,
            ),
            Field::new("operation", DataType::Utf8, true),
            Field::new("read_version", DataType::UInt64, true),
            Field::new("rows_added", DataType::UInt64, true),
            Field::new("rows_removed", DataType::UInt64, true),
            Field::new("live_rows", DataType::UInt64, true),
            Field::new("fragments", DataType::UInt64, true),
            // Why a damaged version does not read; NULL for every other.
            Field::new("damage", DataType::Utf8, true),
            // A clone's first version: what it was cloned from (`shallow clone of t@v7`).
            Field::new("origin", DataType::Utf8, true),
            // Whether the table recorded change data after this version.
            Field::new("change_data_feed", DataType::Boolean, true),
            // The rows this version's commit captured; NULL when it captured none.
            Field::new("change_data_rows", DataType::UInt64, true),
            // The table's patch share (`patch_max_share`) after this version; NULL: unset.
            Field::new("patch_max_share", DataType::Float64, true),
        ],
        vec![
            Arc::new(UInt64Array::from_iter_values(
                listed.iter().map(|(v, _)| *v),
            )),
            Arc::new(UInt64Array::from_iter(
                manifests.iter().map(|m| m.and_then(|m| m.parent_version)),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter(
                    manifests.iter().map(|m| m.map(|m| m.timestamp_micros)),
                )
                .with_timezone(utc),
            ),
            Arc::new(StringArray::from_iter(
                manifests
                    .iter()
                    .map(|m| m.map(|m| m.transaction.operation.to_string())),
            )),
            of(|m| m.transaction.read_version),
            of(|m| m.transaction.rows_added),
            of(|m| m.transaction.rows_removed),
            of(Manifest::live_rows),
            of(|m| m.fragments.len() as u64),
            Arc::new(StringArray::from_iter(
                listed
                    .iter()
                    .map(|(_, read)| read.as_ref().err().map(ToString::to_string)),
            )),
            Arc::new(StringArray::from_iter(manifests.iter().map(|m| {
                let origin = (*m)?.transaction.origin.as_ref()?;
                let kind = if origin.deep { "deep" } else { "shallow" };
                Some(format!(
                    "{kind} clone of {}@v{}",
                    origin.table, origin.version
                ))
            }))),
            Arc::new(BooleanArray::from_iter(
                manifests.iter().map(|m| m.map(|m| m.change_data_feed)),
            )),
            Arc::new(UInt64Array::from_iter(manifests.iter().map(|m| {
                let captured = (*m)?.change_data.as_ref()?;
                Some(captured.iter().map(|f| u64::from(f.physical_rows)).sum())
            }))),
            Arc::new(Float64Array::from_iter(
                manifests.iter().map(|m| m.and_then(|m| m.patch_max_share)),
            )),
        ],
    )
}

/// One row per fragment of a version.
pub(crate) fn fragments(snapshot: &Snapshot) -> Result<Arc<dyn TableProvider>> {
    let fragments = &snapshot.manifest().fragments;
    mem_table(
        vec![
            Field::new("fragment_id", DataType::UInt32, false),
            Field::new("physical_rows", DataType::UInt64, false),
            Field::new("deleted_rows", DataType::UInt64, false),
            Field::new("live_rows", DataType::UInt64, false),
            Field::new("carried", DataType::Boolean, false),
            Field::new("data_files", DataType::UInt64, false),
            Field::new("data_bytes", DataType::UInt64, false),
            Field::new("deletion_file", DataType::Utf8, true),
            Field::new("patches", DataType::UInt64, false),
            Field::new("patched_rows", DataType::UInt64, false),
            Field::new("patch_bytes", DataType::UInt64, false),
        ],
        vec![
            Arc::new(UInt32Array::from_iter_values(
                fragments.iter().map(|f| f.id),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fragments.iter().map(|f| f.physical_rows as u64),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fragments
                    .iter()
                    .map(|f| f.physical_rows as u64 - f.live_rows()),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fragments.iter().map(|f| f.live_rows()),
            )),
            Arc::new(BooleanArray::from_iter(
                fragments.iter().map(|f| Some(!f.row_ids.is_native())),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fragments.iter().map(|f| f.files.len() as u64),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fragments
                    .iter()
                    .map(|f| f.files.iter().map(|d| d.file_size_bytes).sum::<u64>()),
            )),
            Arc::new(StringArray::from_iter(
                fragments
                    .iter()
                    .map(|f| f.deletion.as_ref().map(deletion_paths)),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fragments.iter().map(|f| f.patches.len() as u64),
            )),
            Arc::new(UInt64Array::from_iter_values(fragments.iter().map(|f| {
                let mut patched = roaring::RoaringBitmap::new();
                for patch in &f.patches {
                    patched |= patch.offsets.as_ref();
                }
                patched.len()
            }))),
            Arc::new(UInt64Array::from_iter_values(fragments.iter().map(|f| {
                f.patches
                    .iter()
                    .map(|p| p.file.file_size_bytes)
                    .sum::<u64>()
            }))),
        ],
    )
}

/// The relocation view of a version: one row per entry (a point entry has length 1).
pub(crate) async fn relocations(snapshot: &Snapshot) -> Result<Arc<dyn TableProvider>> {
    let view = snapshot.relocation_view().await?;
    let entries = view.entries();
    mem_table(
        vec![
            Field::new("rowid_start", DataType::UInt64, false),
            Field::new("rowaddr_start", DataType::UInt64, false),
            Field::new("len", DataType::UInt32, false),
            Field::new("kind", DataType::Utf8, false),
        ],
        vec![
            Arc::new(UInt64Array::from_iter_values(
                entries.iter().map(|e| e.id_start.as_u64()),
            )),
            Arc::new(UInt64Array::from_iter_values(
                entries.iter().map(|e| e.addr_start.as_u64()),
            )),
            Arc::new(UInt32Array::from_iter_values(entries.iter().map(|e| e.len))),
            Arc::new(StringArray::from_iter_values(entries.iter().map(|e| {
                if e.len == 1 {
                    "point"
                } else {
                    "range"
                }
            }))),
        ],
    )
}

/// One row per index segment: its logical index, column, place in the name's sequence (and
/// the name's high-water mark), what it covers, and its kind (`scalar`, or a vector index's
/// kind with its metric, dimension, partitions and `ivf_pq`'s sub-vectors).
pub(crate) fn indexes(snapshot: &Snapshot) -> Result<Arc<dyn TableProvider>> {
    let mut section = snapshot.manifest().indexes.clone();
    // Shown as the next segment commit would number them.
    section.backfill();
    let segments = &section.segments;
    let schema = snapshot.schema();
    let mark = |name: &str| {
        section
            .logical
            .iter()
            .find(|l| l.name == name)
            .and_then(|l| l.max_segment_seq)
    };
    mem_table(
        vec![
            Field::new("index_name", DataType::Utf8, false),
            Field::new("column_name", DataType::Utf8, true),
            Field::new("segment_seq", DataType::UInt64, true),
            Field::new("max_segment_seq", DataType::UInt64, true),
            Field::new("segment_uuid", DataType::Utf8, false),
            Field::new("fragments", DataType::UInt64, false),
            Field::new("fragment_ids", DataType::Utf8, false),
            Field::new("rows", DataType::UInt64, false),
            Field::new("file_size_bytes", DataType::UInt64, false),
            Field::new("dataset_version", DataType::UInt64, false),
            Field::new("path", DataType::Utf8, false),
            Field::new("kind", DataType::Utf8, false),
            Field::new("metric", DataType::Utf8, true),
            Field::new("dimension", DataType::UInt32, true),
            Field::new("partitions", DataType::UInt32, true),
            Field::new("sub_vectors", DataType::UInt32, true),
        ],
        vec![
            Arc::new(StringArray::from_iter_values(
                segments.iter().map(|s| s.name.as_str()),
            )),
            Arc::new(StringArray::from_iter(segments.iter().map(|s| {
                schema.field_by_id(s.field_id).map(|f| f.name.as_str())
            }))),
            Arc::new(UInt64Array::from_iter(
                segments.iter().map(|s| s.segment_seq),
            )),
            Arc::new(UInt64Array::from_iter(
                segments.iter().map(|s| mark(&s.name)),
            )),
            Arc::new(StringArray::from_iter_values(
                segments.iter().map(|s| s.uuid.as_str()),
            )),
            Arc::new(UInt64Array::from_iter_values(
                segments.iter().map(|s| s.fragments.len()),
            )),
            Arc::new(StringArray::from_iter_values(segments.iter().map(|s| {
                let ids: Vec<String> = s.fragments.iter().map(|f| f.to_string()).collect();
                ids.join(",")
            }))),
            Arc::new(UInt64Array::from_iter_values(
                segments.iter().map(|s| s.row_count),
            )),
            Arc::new(UInt64Array::from_iter_values(
                segments.iter().map(|s| s.file_size_bytes),
            )),
            Arc::new(UInt64Array::from_iter_values(
                segments.iter().map(|s| s.dataset_version),
            )),
            Arc::new(StringArray::from_iter_values(
                segments.iter().map(|s| s.path.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                segments
                    .iter()
                    .map(|s| s.vector.map_or("scalar", |v| v.kind.name())),
            )),
            Arc::new(StringArray::from_iter(
                segments.iter().map(|s| s.vector.map(|v| v.metric.name())),
            )),
            Arc::new(UInt32Array::from_iter(
                segments.iter().map(|s| s.vector.map(|v| v.dimension)),
            )),
            Arc::new(UInt32Array::from_iter(
                segments.iter().map(|s| s.vector.map(|v| v.partitions)),
            )),
            Arc::new(UInt32Array::from_iter(segments.iter().map(|s| {
                s.vector
                    .filter(|v| v.sub_vectors > 0)
                    .map(|v| v.sub_vectors)
            }))),
        ],
    )
}

/// A fragment's deletion files, oldest first, comma-separated.
fn deletion_paths(vector: &crate::format::DeletionVector) -> String {
    let paths: Vec<&str> = vector.files().map(|f| f.path.as_str()).collect();
    paths.join(",")
}

/// One row per column of a version, each followed by the fields inside it (depth first):
/// its position (among its siblings), field id, name (a nested field's path, as the
/// `natal_*_column` functions take it), type, nullability, default (NULL: none) and the
/// field id of the column or field it lies in (NULL for a column).
pub(crate) fn schema(snapshot: &Snapshot) -> Result<Arc<dyn TableProvider>> {
    struct Row {
        position: u32,
        id: u32,
        name: String,
        data_type: String,
        nullable: bool,
        default: Option<String>,
        parent: Option<u32>,
        blob: Option<String>,
    }
    let mut rows = Vec::new();
    for (position, field) in snapshot.schema().fields.iter().enumerate() {
        rows.push(Row {
            position: position as u32,
            id: field.id,
            name: field.name.clone(),
            data_type: field.data_type.to_string(),
            nullable: field.nullable,
            default: field
                .default_value
                .clone()
                .or_else(|| field.default_expression.clone()),
            parent: None,
            blob: field.blob.map(|b| {
                format!(
                    "inline_limit={}, dedicated_threshold={}, pack_file_size={}",
                    b.inline_limit, b.dedicated_threshold, b.pack_file_size
                )
            }),
        });
        rows.extend(field.nested_fields().into_iter().map(|nested| Row {
            position: nested.position,
            id: nested.id,
            name: nested.path.to_string(),
            data_type: nested.data_type.to_string(),
            nullable: nested.nullable,
            default: None,
            parent: Some(nested.parent_id),
            blob: None,
        }));
    }
    mem_table(
        vec![
            Field::new("position", DataType::UInt32, false),
            Field::new("field_id", DataType::UInt32, false),
            Field::new("name", DataType::Utf8, false),
            Field::new("data_type", DataType::Utf8, false),
            Field::new("nullable", DataType::Boolean, false),
            Field::new("default", DataType::Utf8, true),
            Field::new("parent_id", DataType::UInt32, true),
            // A blob column's thresholds; NULL for every other column.
            Field::new("blob", DataType::Utf8, true),
        ],
        vec![
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|r| r.position),
            )),
            Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.id))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.name))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| &r.data_type),
            )),
            Arc::new(BooleanArray::from(
                rows.iter().map(|r| r.nullable).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter()
                    .map(|r| r.default.as_deref())
                    .collect::<Vec<_>>(),
            )),
            Arc::new(UInt32Array::from(
                rows.iter().map(|r| r.parent).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.blob.as_deref()).collect::<Vec<_>>(),
            )),
        ],
    )
}

/// One row per value of each blob column (`t$blobs`), from descriptors alone: its row id,
/// column, kind, size, and where its bytes are — the object (data file, sidecar path in the
/// table's store, or external URI) and the byte range of it.
pub(crate) async fn blobs(snapshot: &Snapshot) -> Result<Arc<dyn TableProvider>> {
    let mut rows: Vec<(u64, String, crate::io::BlobPlace)> = Vec::new();
    for field in snapshot.schema().fields.iter().filter(|f| f.blob.is_some()) {
        for (id, place) in snapshot.blob_places(&field.name).await? {
            rows.push((id.as_u64(), field.name.clone(), place));
        }
    }
    mem_table(
        vec![
            Field::new("_rowid", DataType::UInt64, false),
            Field::new("column", DataType::Utf8, false),
            Field::new("kind", DataType::Utf8, true),
            Field::new("size", DataType::UInt64, true),
            Field::new("object", DataType::Utf8, true),
            Field::new("range_start", DataType::UInt64, true),
            Field::new("range_end", DataType::UInt64, true),
        ],
        vec![
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.1))),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.2.kind.map(|k| k.name())),
            )),
            Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.2.size))),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.2.object.as_deref()),
            )),
            Arc::new(UInt64Array::from_iter(
                rows.iter().map(|r| r.2.range.as_ref().map(|r| r.start)),
            )),
            Arc::new(UInt64Array::from_iter(
                rows.iter().map(|r| r.2.range.as_ref().map(|r| r.end)),
            )),
        ],
    )
}

/// One row per blob sidecar the version's data files hold values in (`t$blob_sidecars`):
/// its path, size, and how much of it live rows use — what a repack would reclaim.
pub(crate) async fn blob_sidecars(snapshot: &Snapshot) -> Result<Arc<dyn TableProvider>> {
    let rows = snapshot.blob_sidecars().await?;
    mem_table(
        vec![
            Field::new("object", DataType::Utf8, false),
            Field::new("size", DataType::UInt64, false),
            Field::new("live_values", DataType::UInt64, false),
            Field::new("live_bytes", DataType::UInt64, false),
            Field::new("dead_bytes", DataType::UInt64, false),
        ],
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.path))),
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.size))),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| r.live_values),
            )),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| r.live_bytes),
            )),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| r.dead_bytes()),
            )),
        ],
    )
}
