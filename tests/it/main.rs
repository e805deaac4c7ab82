//! natal's integration tests: one binary, one module per area.

mod bad_input;
mod cli;
mod common;
mod concurrency;
mod data_files;
mod failed_writes;
mod faults;
mod fixtures;
mod index;
mod merge;
mod model;
mod rowid;
mod sql;
mod storage;
mod tpch;
