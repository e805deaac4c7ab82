//! Row changes and change reads: a set of row changes committed as one version (MERGE's),
//! change data captured by deletes and updates, and change reads between two versions (from
//! the two ends by lineage, values read by id, captured old values).

pub(super) mod capture;
pub(super) mod captured;
pub(super) mod ends;
pub(super) mod reads;
pub(super) mod row_changes;
pub(super) mod values;
