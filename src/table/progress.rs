//! [`Progress`]: how far a long operation (loading, updating, deleting, creating a table,
//! compaction, an index build, cleanup) has got, for whoever draws it (the CLI's progress
//! bar). Operations report whole batches; a reporter decides how often to draw.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::scan_request::{ScanMetrics, ScanRequest};
use super::snapshot::Snapshot;

/// Told the rows an operation has done so far and, when known, how many it will do.
pub trait Progress: Send + Sync {
    /// `operation` has done `rows_done` rows of `rows_total` (when known).
    fn update(&self, operation: &'static str, rows_done: u64, rows_total: Option<u64>);
    /// The operation ended (successfully or not).
    fn finish(&self, operation: &'static str);
}

/// An optional reporter that is `Debug` and `Clone` so option structs can hold it.
#[derive(Clone, Default)]
pub struct ProgressHandle(pub Option<Arc<dyn Progress>>);

impl ProgressHandle {
    /// Reports `rows_done` of `rows_total` (when known) for `operation`.
    pub fn update(&self, operation: &'static str, rows_done: u64, rows_total: Option<u64>) {
        if let Some(p) = &self.0 {
            p.update(operation, rows_done, rows_total);
        }
    }

    /// Reports that `operation` is done.
    pub fn finish(&self, operation: &'static str) {
        if let Some(p) = &self.0 {
            p.finish(operation);
        }
    }
}

impl fmt::Debug for ProgressHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "ProgressHandle(reporting)"
        } else {
            "ProgressHandle(none)"
        })
    }
}

/// How far a scan that finds rows to change has got: the rows it has examined (read,
/// masked, filtered or pruned) of all the rows of the version's fragments. Reports the end
/// when dropped.
pub(crate) struct ScanProgress<'a> {
    handle: &'a ProgressHandle,
    operation: &'static str,
    metrics: Arc<ScanMetrics>,
    total: u64,
    matched: u64,
}

impl<'a> ScanProgress<'a> {
    pub(crate) fn new(
        handle: &'a ProgressHandle,
        operation: &'static str,
        read: &Snapshot,
    ) -> Self {
        let total = match handle.0 {
            Some(_) => read
                .manifest()
                .fragments
                .iter()
                .map(|f| u64::from(f.physical_rows))
                .sum(),
            None => 0,
        };
        handle.update(operation, 0, Some(total));
        Self {
            handle,
            operation,
            metrics: Arc::default(),
            total,
            matched: 0,
        }
    }

    /// `request`, counting what it examines when someone is told (a scan with no reporter
    /// counts nothing).
    pub(crate) fn counting(&self, request: ScanRequest) -> ScanRequest {
        if self.handle.0.is_none() {
            return request;
        }
        ScanRequest {
            metrics: Some(self.metrics.clone()),
            ..request
        }
    }

    /// The scan yielded `rows` more matching rows.
    pub(crate) fn matched(&mut self, rows: usize) {
        if self.handle.0.is_none() {
            return;
        }
        self.matched += rows as u64;
        let m = &self.metrics;
        let passed = m.rows_masked.load(Ordering::Relaxed)
            + m.rows_filtered.load(Ordering::Relaxed)
            + m.rows_page_pruned.load(Ordering::Relaxed);
        let done = (self.matched + passed).min(self.total);
        self.handle.update(self.operation, done, Some(self.total));
    }
}

impl Drop for ScanProgress<'_> {
    fn drop(&mut self) {
        self.handle.finish(self.operation);
    }
}
