//! Object-store access: manifests, Parquet data files, deletion files, row-id and lineage
//! files, relocation checkpoints and index segment files. Everything here speaks domain types from
//! `format/` and `rowid/`.

mod bases;
mod blob;
mod cache;
mod checkpoint;
mod column_files;
mod conform;
mod copy;
mod data;
mod data_write;
mod deletion;
mod fetch_grouped;
mod file_stats;
mod index;
mod instrumented;
mod lineage;
mod manifest;
mod pages;
mod panics;
mod reader;
mod recent_latest;
mod row_patches;
mod rowids;
mod segments;
mod staged;
mod store;
mod stored_type;
mod vector_index;

pub use crate::format::{decode_deletions, encode_deletions};
pub use blob::external::external_blob;
pub use blob::reader::{BlobPlace, BlobReader};
pub use blob::reference::BlobReferences;
pub(crate) use blob::reuse::RepackSidecars;
pub(crate) use conform::table_batch;
pub use conform::{view_type, FileColumns};
pub use data::READ_BATCH_ROWS;
pub use data_write::PAGE_ROWS;
pub(crate) use data_write::{check_storable, DataFileWriter};
pub use index::{indexable, IndexLookup};
pub use instrumented::{InstrumentedStore, RequestTally};
pub use manifest::ManifestLayout;
pub use pages::{PagePruning, SelectPages};
pub(crate) use staged::{remove as remove_staged_upload, StagedUpload};
pub use store::{TableStore, MANIFEST_SUFFIX, VERSIONS_DIR};
pub use vector_index::{
    decode_vector_head, decode_vector_partition, encode_vector_segment, Codebooks, VectorHead,
    VectorPartition, VectorRun,
};
