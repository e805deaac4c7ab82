//! [`FileCache`]: decoded immutable files (Parquet footers, deletion vectors) by path.
//! Every file natal writes is never rewritten, and within one table it has a unique name, so
//! an entry can only go stale if the table is dropped and created again in the same place,
//! where derived names (manifests by version, deletions by fragment and version) repeat:
//! `TableStore` then clears its caches. A cache is bounded by entry count and simply starts
//! over when full.
//!
//! Loads are shared: partitions of one scan open the same fragment at once, and a file one of
//! them is already reading is waited for, not fetched again (a cold scan's requests and bytes
//! are those of its files, whatever its parallelism).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

/// One entry: empty while its first load runs (or after that load failed).
type Entry<V> = Arc<OnceCell<V>>;

#[derive(Debug)]
pub(crate) struct FileCache<V> {
    entries: Mutex<HashMap<String, Entry<V>>>,
    capacity: usize,
}

impl<V: Clone> FileCache<V> {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
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
    }

    pub(crate) fn insert(&self, path: &str, value: V) {
        let entry = Arc::new(OnceCell::new_with(Some(value)));
        self.admit(&mut self.entries(), path, entry);
    }

    fn admit(&self, entries: &mut HashMap<String, Entry<V>>, path: &str, entry: Entry<V>) {
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(path.to_string(), entry);
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
        if loaded_here || usable(&value) {
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
    use std::sync::atomic::{AtomicUsize, Ordering};

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
