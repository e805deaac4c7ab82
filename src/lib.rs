//! natal: a versioned table format for Apache DataFusion where a row's id is its birth
//! address.
//!
//! Layers, lowest first (each uses only those above it in this list; ARCHITECTURE.md draws
//! the map):
//! - [`rowid`] — ids, addresses, id sequences, the relocation view, masks (pure);
//! - [`format`] — on-disk types (manifest, fragments, statistics) and their encoding (pure);
//! - [`io`] — object-store access: manifests, Parquet data files, deletion and checkpoint files;
//! - [`table`] — [`table::Table`], snapshots, operations, commits and conflict resolution;
//! - [`datafusion`] — table providers, the scan and DML plans, SQL functions, the catalog.

pub mod datafusion;
pub mod error;
pub mod format;
pub mod io;
mod operation;
pub mod rowid;
pub mod table;

pub use error::{Error, Result};
pub use operation::Operation;

// What a user of natal reaches for, at the top. `format` and `io` are the format's and the
// store's internals: benches, fuzzers and tests use them, their shape may change.
pub use io::{IndexLookup, ManifestLayout};
pub use rowid::{RowAddress, RowId, RowIdSet};
pub use table::{
    CleanupPolicy, CleanupReport, Committed, CompactOptions, CompactionReport, IndexOptions,
    IndexProbe, IndexReport, Progress, RowMatch, RowPredicate, ScanMetrics, ScanRequest, Snapshot,
    Table, TableOptions, TieredMerge,
};
