//! [`FileCache`]: decoded immutable files (Parquet footers, deletion vectors) by path.
//! Every file natal writes is never rewritten, and within one table it has a unique name, so
//! an entry can only go stale if the table is dropped and created again in the same place,
//! where derived names (manifests by version, deletions by fragment and version) repeat:
//! `TableStore` then clears its caches. A cache is bounded by entry count, or by the bytes
//! of the values it holds ([`FileCache::by_bytes`]), and simply starts over when full.
//!
//! Loads are shared: partitions of one scan open the same fragment at once, and a file one of
//! them is already reading is waited for, not fetched again (a cold scan's requests and bytes
//! are those of its files, whatever its parallelism).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

/// One entry: empty while its first load runs (or after that load failed).
type Entry<V> = Arc<OnceCell<V>>;

#[derive(Debug)]
pub(crate) struct FileCache<V> {
    entries: Mutex<HashMap<String, Entry<V>>>,
    /// Entries, or bytes when `weigh` is set.
    capacity: usize,
    /// A value's bytes, for a cache bounded by bytes; and the bytes of the values loaded
    /// since it last started over (changed under the `entries` lock).
    weigh: Option<fn(&V) -> usize>,
    held: AtomicUsize,
}

impl<V: Clone> FileCache<V> {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
            weigh: None,
            held: AtomicUsize::new(0),
        })
    }

    /// A cache of at most `capacity` bytes of values, as `weigh` counts them: a value larger
    /// than that is not kept.
    pub(crate) fn by_bytes(capacity: usize, weigh: fn(&V) -> usize) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
            weigh: Some(weigh),
            held: AtomicUsize::new(0),
        })
    }

    /// The map: a panic elsewhere while it was held left it whole (every change is one call).
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry<V>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value at `path`, if one is loaded.
    pub(crate) fn get(&self, path: &str) -> Option<V> {
        self.entries().get(path)?.get().cloned()
    }

    pub(crate) fn clear(&self) {
        self.entries().clear();
        self.held.store(0, Ordering::Relaxed);
    }

    pub(crate) fn insert(&self, path: &str, value: V) {
        let entry = Arc::new(OnceCell::new_with(Some(value.clone())));
        self.admit(&mut self.entries(), path, entry);
        self.weigh_in(path, &value);
    }

    fn admit(&self, entries: &mut HashMap<String, Entry<V>>, path: &str, entry: Entry<V>) {
        if self.weigh.is_none() && entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(path.to_string(), entry);
    }

    /// Counts `value`, just loaded at `path`, against a byte bound: the cache starts over
    /// (keeping it) when it would pass the bound, and drops it when it alone would.
    fn weigh_in(&self, path: &str, value: &V) {
        let Some(weigh) = self.weigh else {
            return;
        };
        let bytes = weigh(value);
        let mut entries = self.entries();
        if bytes > self.capacity {
            entries.remove(path);
            return;
        }
        if self.held.load(Ordering::Relaxed) + bytes > self.capacity {
            let kept = entries.remove(path);
            entries.clear();
            entries.extend(kept.map(|entry| (path.to_string(), entry)));
            self.held.store(0, Ordering::Relaxed);
        }
        self.held.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The value at `path`, loaded by `load` unless cached or being loaded by another caller
    /// (whose result is then shared). A failed load caches nothing: the next caller tries again.
    pub(crate) async fn get_or_load<E, F>(&self, path: &str, load: F) -> Result<V, E>
    where
        F: Future<Output = Result<V, E>>,
    {
        self.get_usable_or_load(path, |_| true, load).await
    }

    /// [`Self::get_or_load`] where a cached value serves only if `usable` accepts it (a
    /// footer read without the page index it now needs): otherwise `load` replaces it, so
    /// later callers, whatever they need, find the fuller value.
    pub(crate) async fn get_usable_or_load<E, F>(
        &self,
        path: &str,
        usable: impl Fn(&V) -> bool,
        load: F,
    ) -> Result<V, E>
    where
        F: Future<Output = Result<V, E>>,
    {
        let entry = {
            let mut entries = self.entries();
            match entries.get(path) {
                Some(entry) if entry.get().is_none_or(&usable) => entry.clone(),
                _ => {
                    let entry = Entry::default();
                    self.admit(&mut entries, path, entry.clone());
                    entry
                }
            }
        };
        let mut load = std::pin::pin!(load);
        let mut loaded_here = false;
        let value = entry
            .get_or_try_init(|| {
                loaded_here = true;
                load.as_mut()
            })
            .await?
            .clone();
        if loaded_here {
            self.weigh_in(path, &value);
            return Ok(value);
        }
        if usable(&value) {
            return Ok(value);
        }
        // Another caller's load, begun before ours, gave what it needed, not what we do.
        let value = load.await?;
        self.insert(path, value.clone());
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_by_bytes_starts_over_keeping_the_newest_and_keeps_none_too_large() {
        let cache = FileCache::<Vec<u8>>::by_bytes(10, Vec::len);
        cache.insert("a", vec![0; 6]);
        cache.insert("b", vec![0; 3]);
        assert_eq!(
            (
                cache.get("a").map(|v| v.len()),
                cache.get("b").map(|v| v.len())
            ),
            (Some(6), Some(3))
        );
        cache.insert("c", vec![0; 5]);
        assert_eq!((cache.get("a"), cache.get("b")), (None, None));
        assert_eq!(cache.get("c").map(|v| v.len()), Some(5));
        cache.insert("d", vec![0; 11]);
        assert_eq!(cache.get("d"), None);
        assert_eq!(cache.get("c").map(|v| v.len()), Some(5));
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_load_and_a_failure_is_not_kept() {
        let cache = FileCache::<u32>::new(8);
        let loads = AtomicUsize::new(0);
        let load = |value: u32| {
            let loads = &loads;
            async move {
                loads.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                Ok::<_, String>(value)
            }
        };
        let (a, b) = tokio::join!(
            cache.get_or_load("f", load(1)),
            cache.get_or_load("f", load(2))
        );
        assert_eq!((a.unwrap(), b.unwrap()), (1, 1));
        assert_eq!(loads.load(Ordering::SeqCst), 1);

        let failed = cache.get_or_load("g", async { Err::<u32, _>("gone".to_string()) });
        assert_eq!(failed.await.unwrap_err(), "gone");
        assert_eq!(cache.get("g"), None);
        assert_eq!(cache.get_or_load("g", load(3)).await.unwrap(), 3);
        assert_eq!(loads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_value_that_does_not_serve_is_replaced_by_a_fuller_one() {
        let cache = FileCache::<u32>::new(8);
        cache.insert("f", 1);
        let fuller = |v: &u32| *v >= 2;
        let got = cache.get_usable_or_load("f", fuller, async { Ok::<_, ()>(2) });
        assert_eq!(got.await, Ok(2));
        // Callers that need less now find the fuller value, with no load.
        let got = cache.get_or_load("f", async { Err::<u32, _>(()) });
        assert_eq!(got.await, Ok(2));
    }
}
