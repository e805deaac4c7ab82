//! Reading a natal table in a DataFusion plan: the scan exec and its plan, how fragments
//! are shared out among partitions, pruning by statistics, which filters are pushed into the
//! scan (planned, and pushed by operators above as the query runs), `_rowid` lists as masks,
//! the scan as DataFusion's file scan, statistics, and blob sizes read from descriptors.

pub(super) mod blob_sizes;
pub(super) mod coalesce;
pub(super) mod exec;
pub(super) mod file_source;
pub(super) mod filter;
pub(super) mod lineage;
pub(super) mod nearest;
pub(super) mod partitions;
pub(super) mod path;
pub(super) mod plan;
pub(super) mod pruning;
pub(super) mod pushdown;
pub(super) mod pushed_filter;
pub(super) mod rowid_list;
pub(super) mod statistics;
