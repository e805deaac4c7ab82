//! natal: a versioned table format for Apache DataFusion where a row's id is its birth
//! address.
//!
//! Layers, lowest first (dependencies point one way):
//! - [`format`] — pure on-disk types (manifest, fragments, statistics) and their encoding;
//! - [`rowid`] — ids, addresses, id sequences, the relocation view, masks (pure);
//! - [`io`] — object-store access: manifests, Parquet data files, deletion and checkpoint files;
//! - [`table`] — [`table::Table`], snapshots, operations, commits and conflict resolution.

pub mod datafusion;
pub mod error;
pub mod format;
pub mod io;
pub mod rowid;
pub mod table;

pub use error::{Error, Result};
