//! [`RecentLatest`]: the newest manifest a table handle found by listing, and when it
//! listed, so reads that accept a bounded staleness (`TableOptions::staleness_limit`,
//! Delta's `stalenessLimit`) skip the LIST. This handle's own commits forget it, so a
//! handle always reads its own writes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::format::Manifest;

#[derive(Debug, Default)]
pub(crate) struct RecentLatest {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Bumped by every publish this handle attempts: a listing that began before one
    /// may miss its version, so what it found is not kept.
    generation: u64,
    seen: Option<(Instant, Arc<Manifest>)>,
}

/// A listing begun at `at`, under `generation`: what [`RecentLatest::keep`] needs to
/// tell whether a publish ran since.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListingStart {
    at: Instant,
    generation: u64,
}

impl RecentLatest {
    /// The latest manifest listed no longer than `limit` ago (never, for a zero limit).
    pub(crate) fn within(&self, limit: Duration) -> Option<Arc<Manifest>> {
        if limit.is_zero() {
            return None;
        }
        let state = self.state.lock().ok()?;
        let (at, manifest) = state.seen.as_ref()?;
        (at.elapsed() <= limit).then(|| manifest.clone())
    }

    /// Call before listing the versions whose newest [`Self::keep`] records.
    pub(crate) fn listing_starts(&self) -> ListingStart {
        let generation = self.state.lock().map(|s| s.generation).unwrap_or(u64::MAX);
        ListingStart {
            at: Instant::now(),
            generation,
        }
    }

    /// Records `manifest` as the latest as of `start`, unless this handle published (or
    /// tried to) since then, or kept a newer listing.
    pub(crate) fn keep(&self, start: ListingStart, manifest: &Arc<Manifest>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.generation != start.generation {
            return;
        }
        if matches!(&state.seen, Some((at, _)) if *at > start.at) {
            return;
        }
        state.seen = Some((start.at, manifest.clone()));
    }

    /// Forgets the kept manifest: this handle is about to publish, or just did.
    pub(crate) fn forget(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.generation = state.generation.wrapping_add(1);
            state.seen = None;
        }
    }
}
