//! natal's SQL functions: the `natal_*` table functions (maintenance, indexes, schema,
//! clones, change reads, blob reads), their argument parsing, index segment placement, and
//! the scalar `natal_external_blob`.

pub(super) mod arguments;
pub(super) mod blob_read;
pub(super) mod change_feed;
pub(super) mod external_blob;
pub(super) mod placement;
pub(super) mod table_functions;
pub(super) mod vector_distance;
