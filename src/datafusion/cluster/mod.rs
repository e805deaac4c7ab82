//! natal's plans between processes: the codecs that carry a natal table and scan (wrapping
//! another's, such as Ballista's), what a receiving scheduler or executor plans from them,
//! and, with the cargo feature `ballista`, a Ballista cluster's client, scheduler and
//! executor set-up.

#[cfg(feature = "ballista")]
mod ballista;
pub(super) mod codec;
pub(super) mod sent;
#[cfg(feature = "ballista")]
pub use ballista::*;
