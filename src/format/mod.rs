//! The on-disk format as pure domain types: manifest, schema, fragments, data files,
//! deletion files, statistics. Protobuf types are generated into the private `proto` module
//! and never leave `format/`; [`Manifest::encode`] and [`Manifest::decode`] are the only doors.
//! A decoded fragment list is [`Unresolved`] until `io` has read the row-id files it names.

mod bases;
mod blob;
mod blob_reuse;
mod change_data;
mod convert;
mod convert_data_file;
mod convert_index;
mod convert_row_ids;
mod convert_schema;
mod deletion;
pub(crate) mod envelope;
mod index;
mod lineage;
mod manifest;
pub(crate) mod nested;
mod path;
mod row_patch;
mod schema;
mod schema_change;
mod schema_edit;
mod stats;
mod stored;
mod stored_type;
mod type_text;
mod unresolved;
mod validate;
mod vector;
mod wire;

#[allow(clippy::all, missing_docs)]
mod proto {
    include!(concat!(env!("OUT_DIR"), "/natal.format.rs"));
}

pub use bases::{CloneOrigin, StorageBase};
pub use blob::{
    descriptor as blob_descriptor, descriptor_fields, descriptor_type, lean_descriptor_type,
    sidecar_owner, sidecar_path, BlobColumn, BlobKind, BLOB_DEDICATED_THRESHOLD_META_KEY,
    BLOB_INLINE_LIMIT_META_KEY, BLOB_META_KEY, BLOB_PACK_FILE_SIZE_META_KEY,
};
pub use blob_reuse::{sidecar_in, BlobReuseIndex, BlobReuseSource};
pub use deletion::{decode_deletions, encode_deletions};
pub use envelope::{seal, unseal};
pub use index::{cache_node, IndexSection, IndexSegment, LogicalIndex};
pub use lineage::{Lineage, LineageFile, VersionRuns, UNKNOWN_VERSION};
pub use manifest::{
    flags, is_patch_share, CheckpointRef, DataFile, DeletionFile, DeletionVector, Fragment,
    FragmentRowIds, FragmentSegment, Manifest, Operation, RowIdFile, SegmentPatch,
    TransactionSummary, FORMAT_VERSION,
};

pub use path::{DerivedName, TablePath, BASES_DIR, OWN_ROOT, TABLE_FILE_DIRS};
pub use row_patch::RowPatch;
pub use schema::{
    field_id_of, Constraint, ConstraintKind, Field, FieldId, NestedField, Schema,
    PARQUET_FIELD_ID_META_KEY, RESERVED_COLUMNS,
};
pub use schema_change::{widen_stat, widens, FieldPath, Position, SchemaChange};
pub use stats::{
    truncate_max_binary, truncate_max_utf8, truncate_min_binary, truncate_min_utf8, ColumnStats,
    StatValue, MAX_STAT_BYTES,
};
pub use stored::{
    apply_segment_patch, decode_fragment_segment, decode_lineage_file, decode_row_id_file,
    encode_fragment_segment, encode_lineage_file, encode_row_id_file, encode_segment_patch,
    FRAGMENTS_PER_SEGMENT, LINEAGE_INLINE_LIMIT, ROW_ID_INLINE_LIMIT,
};
pub use stored_type::{
    stored_as, stored_reshaped, vector_bytes, MONTH_DAY_NANO_BYTES, UNION_TYPE_IDS,
    VECTOR_COMPONENTS, VECTOR_NULL_COMPONENTS,
};
pub use unresolved::{row_ids_held_by, RowIdsRead, RowIdsToRead, Unresolved};
pub use vector::{Metric, VectorIndex, VectorIndexKind};
pub use wire::{
    decode_row_ids, encode_row_ids, is_wire_payload, WireNearest, WirePiece, WireProvider,
    WireScan, WireTable, WIRE_MAGIC, WIRE_VERSION,
};

#[cfg(test)]
mod roundtrip_tests;
