//! SQL that changes tables: INSERT, DELETE and UPDATE (`dml`), MERGE INTO, ALTER TABLE,
//! the statements natal intercepts before DataFusion plans them (`statement`), the guard
//! that refuses writes DataFusion would plan wrongly, what CREATE TABLE declares beyond
//! columns, and the `BLOB` column type.

pub(super) mod alter;
pub(super) mod blob_ddl;
pub(super) mod declared;
pub(super) mod dml;
pub(super) mod guard;
pub(super) mod merge;
pub(super) mod statement;
pub(super) mod vector_ddl;
