//! Reading blob columns beyond a plain scan: ranges of values by row id, values' sizes from
//! descriptors, and values fetched only for the rows a filtered or limited scan keeps.

pub(super) mod deferred;
pub(super) mod reads;
pub(super) mod sizes;
