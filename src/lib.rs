//! natal: a versioned table format for Apache DataFusion where a row's id is its birth
//! address.
//!
//! What a user reaches for is at the top of the crate: [`Table`] and its [`Snapshot`]s, the
//! options and reports of each operation, the id types ([`RowId`], [`RowAddress`],
//! [`RowIdSet`]) and the [`Error`] to match on; [`datafusion`] puts natal tables in a
//! DataFusion `SessionContext` ([`datafusion::register`]). [`internals`] is for natal's own
//! benches, tests and fuzzers, and has no stability promise.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::sync::Arc;
//! use arrow::array::{AsArray, Int64Array, RecordBatch};
//! use arrow::datatypes::{DataType, Field, Schema, UInt64Type};
//! use futures::TryStreamExt;
//! use natal::{RowId, ScanRequest, Table, TableOptions};
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
//! let store = Arc::new(object_store::memory::InMemory::new());
//! let table = Table::create(store, "t".into(), &schema, TableOptions::default()).await?;
//! let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))])?;
//! let committed = table.append(vec![batch]).await?;
//!
//! // Every row has an id from its birth; it survives updates, deletes of others, compaction.
//! let snapshot = table.at_version(committed.version).await?;
//! let scanned: Vec<RecordBatch> =
//!     snapshot.scan(ScanRequest::new().with_row_id()).await?.try_collect().await?;
//! let ids = scanned[0].column_by_name(natal::ROW_ID).unwrap().as_primitive::<UInt64Type>();
//! let third = RowId::from_u64(ids.value(2));
//! let row = snapshot.take(&[third], ScanRequest::new()).await?;
//! assert_eq!(row.column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0), 3);
//! # Ok::<(), natal::Error>(()) }).unwrap();
//! ```
//!
//! Layers, lowest first (each uses only those above it in this list; ARCHITECTURE.md draws
//! the map):
//! - `rowid` — ids, addresses, id sequences, the relocation view, masks (pure);
//! - `format` — on-disk types (manifest, fragments, statistics) and their encoding (pure);
//! - `io` — object-store access: manifests, Parquet data files, deletion and checkpoint files;
//! - `table` — [`Table`], snapshots, operations, commits and conflict resolution;
//! - [`datafusion`] — table providers, the scan and DML plans, SQL functions, the catalog.

#![warn(missing_docs)]

pub mod datafusion;
mod error;
mod format;
mod io;
mod operation;
mod rowid;
mod table;

pub use error::{Error, FlagKind, Result};
pub use format::{
    BlobColumn, BlobKind, FieldPath, Metric, Position, SchemaChange, VectorIndexKind, BLOB_META_KEY,
};
pub use io::{external_blob, BlobPlace, BlobReader, BlobReferences, IndexLookup, ManifestLayout};
pub use operation::Operation;
pub use rowid::{FragmentId, RowAddress, RowId, RowIdSet};
pub use table::{
    BatchUpdate, ChangeRequest, ChangeStream, ChangeType, ChangedRows, CleanupPolicy,
    CleanupReport, CloneTarget, Cloned, ColumnDefault, ColumnValues, Committed, CompactOptions,
    Compaction, Declarations, IndexBuild, IndexOptions, IndexProbe, NearestOptions, NewColumn,
    Progress, RowChangeSet, RowChanges, RowMatch, RowPredicate, ScanMetrics, ScanRequest,
    SidecarUsage, Snapshot, Table, TableConstraint, TableOptions, TieredMerge, VectorIndexOptions,
    CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, DEFAULT_PATCH_MAX_SHARE, DISTANCE, ROW_ADDR,
    ROW_CREATED_VERSION, ROW_ID, ROW_UPDATED_VERSION,
};

/// natal's insides, for its own benches, tests and fuzzers: the on-disk types and their
/// encodings, the store with its request counters, the id structures. **Unstable**: these
/// change whenever the format or the reader does, without notice; nothing here is needed to
/// use natal.
pub mod internals {
    /// On-disk types (manifest, fragments, statistics, feature flags) and their encodings.
    pub mod format {
        pub use crate::format::*;
    }
    /// Object-store access: the table's store, data files, manifests, an instrumented store.
    pub mod io {
        pub use crate::io::*;
    }
    /// Id structures: sequences, segments, the relocation view, masks.
    pub mod rowid {
        pub use crate::rowid::*;
    }
    /// Vector distances and types (the kernels SQL's distance functions compute).
    pub mod vector {
        pub use crate::table::vector::*;
    }
    pub use crate::table::{predicate_layout, ProgressHandle};
}
