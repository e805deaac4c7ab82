//! Pause points for process-level tests (`tests/it/processes.rs`): they let a test land a
//! race or a crash at one chosen moment of a commit instead of wherever the scheduler puts it.
//!
//! With `NATAL_TEST_PAUSE=<point>:<operation>:<dir>` in its environment, a process's first
//! commit of `<operation>` (named as errors name it: `append`, `update`, `compaction`, …)
//! stops at `<point>`: `before-publish` (its files written, its manifest not yet put) or
//! `after-publish` (its version published, not yet returned to the caller). It creates
//! `<dir>/reached` and waits until `<dir>/resume` exists; the test meanwhile kills it
//! (SIGKILL) or lets other processes commit first. Unset or malformed, it is never taken,
//! and a commit pays one look at a value read once per process.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::operation::Operation;

/// Where in a commit a pause can be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Point {
    BeforePublish,
    AfterPublish,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::BeforePublish => "before-publish",
            Point::AfterPublish => "after-publish",
        }
    }
}

/// The pause a process was started with.
struct Pause {
    point: String,
    operation: String,
    dir: PathBuf,
}

fn configured() -> Option<&'static Pause> {
    static PAUSE: OnceLock<Option<Pause>> = OnceLock::new();
    PAUSE
        .get_or_init(|| {
            let spec = std::env::var("NATAL_TEST_PAUSE").ok()?;
            let mut parts = spec.splitn(3, ':');
            Some(Pause {
                point: parts.next()?.to_string(),
                operation: parts.next()?.to_string(),
                dir: PathBuf::from(parts.next()?),
            })
        })
        .as_ref()
}

/// Takes the configured pause if this is its point and operation and it was not taken yet.
pub(super) async fn at(point: Point, operation: Operation) {
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let Some(pause) = configured() else {
        return;
    };
    if pause.point != point.name()
        || pause.operation != operation.to_string()
        || TAKEN.swap(true, Ordering::SeqCst)
    {
        return;
    }
    // Best effort: a pause that cannot announce itself must not fail the commit.
    let _ = std::fs::write(pause.dir.join("reached"), point.name());
    while !pause.dir.join("resume").exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
