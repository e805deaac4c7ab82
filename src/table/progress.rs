//! [`Progress`]: how far a long operation (loading rows, compaction) has got, for whoever
//! draws it (the CLI's progress line). Operations report whole batches; a reporter decides how
//! often to draw.

use std::fmt;
use std::sync::Arc;

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
