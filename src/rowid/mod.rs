//! Row identity: ids, addresses, id sequences, the relocation view and masks.
//!
//! Pure: no I/O, no DataFusion. One id model everywhere — a row's id is its birth address.

mod address;
mod id_set;
pub(crate) use id_set::gallop;
mod mask;
mod packed;
mod row_id_set;
mod segment;
mod sequence;
mod view;

pub use address::{FragmentId, RowAddress, RowId};
pub use id_set::{IdCursor, IdSet};
pub use mask::{candidate_offsets, FragmentLayout};
pub use row_id_set::RowIdSet;
pub use segment::{EncodedU64Array, SegmentCursor, U64Segment};
pub use sequence::{RowIdSequence, SequenceCursor};
pub use view::{CarriedFragment, RangeEntry, RelocationView};
