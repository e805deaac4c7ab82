//! The on-disk format as pure domain types: manifest, schema, fragments, data files,
//! deletion files, statistics. Protobuf types are generated into the private `proto` module
//! and never leave `format/`; [`Manifest::encode`] and [`Manifest::decode`] are the only doors.

mod convert;
pub(crate) mod envelope;
mod manifest;
mod path;
mod schema;
mod stats;

#[allow(clippy::all, missing_docs)]
mod proto {
    include!(concat!(env!("OUT_DIR"), "/natal.format.rs"));
}

pub use convert::{decode_row_id_file, encode_row_id_file, ROW_ID_INLINE_LIMIT};
pub use manifest::{
    flags, CheckpointRef, DataFile, DeletionFile, DeletionVector, Fragment, Manifest, Operation,
    RowIdFile, TransactionSummary, FORMAT_VERSION,
};
pub use path::TablePath;
pub use schema::{Field, Schema, PARQUET_FIELD_ID_KEY, RESERVED_COLUMNS};
pub use stats::{
    truncate_max_binary, truncate_max_utf8, truncate_min_binary, truncate_min_utf8, ColumnStats,
    StatValue, MAX_STAT_BYTES,
};
