//! natal's integration tests: one binary, one module per area.

mod add_column;
mod bad_input;
mod blob;
mod blob_external;
mod blob_inline;
mod blob_reuse;
mod blob_rewrite;
mod change_data;
mod changes;
mod cli;
mod clone;
#[cfg(feature = "ballista")]
mod cluster;
#[cfg(feature = "ballista")]
mod cluster_processes;
mod codec;
mod commit_outcome;
mod common;
mod concurrency;
mod data_files;
mod declared;
mod failed_writes;
mod faults;
mod file_source;
mod filter_views;
mod fixtures;
mod fuzz;
mod fuzz_cases;
mod index;
mod late;
mod latest;
mod merge;
mod merge_into;
mod model;
mod model_actions;
mod model_changes;
mod model_check;
mod model_clone;
mod model_index;
mod model_schema;
mod nested;
mod parity;
mod patch_sql;
mod patch_writes;
mod processes;
mod pushed;
mod recovery;
mod row_patch;
mod rowid;
mod s3;
mod s3_server;
mod schema;
mod scripted_store;
mod sql;
mod storage;
mod tpch;
mod vector_index;
mod vector_pq;
mod vectors;
mod workload;

/// The fuzz cases bound each decoder's largest allocation by its input (`fuzz_cases.rs`).
#[global_allocator]
static ALLOCATOR: fuzz_cases::LargestAllocation = fuzz_cases::LargestAllocation;
