//! [`FileCache`]: decoded immutable files (Parquet footers, deletion vectors) by path.
//! Every file natal writes is never rewritten, and within one table it has a unique name, so
//! an entry can only go stale if the table is dropped and created again in the same place,
//! where derived names (manifests by version, deletions by fragment and version) repeat:
//! `TableStore` then clears its caches. A cache is bounded by entry count and simply starts
//! over when full.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub(crate) struct FileCache<V> {
    entries: Mutex<HashMap<String, V>>,
    capacity: usize,
}

impl<V: Clone> FileCache<V> {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
        })
    }

    pub(crate) fn get(&self, path: &str) -> Option<V> {
        self.entries.lock().ok()?.get(path).cloned()
    }

    pub(crate) fn clear(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }

    pub(crate) fn insert(&self, path: &str, value: V) {
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= self.capacity {
                entries.clear();
            }
            entries.insert(path.to_string(), value);
        }
    }
}
