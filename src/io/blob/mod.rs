//! Blob values on the store: sidecars (placing values when a data file is written,
//! resolving and fetching them when read), external values, byte ranges, a value as a file,
//! references that rewrites keep, and the Blob Reuse Index a rewrite writes.

pub(super) mod external;
pub(super) mod ranges;
pub(super) mod reader;
pub(super) mod reference;
pub(super) mod reuse;
pub(super) mod sidecars;
