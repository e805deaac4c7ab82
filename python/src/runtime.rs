//! The tokio runtime natal's calls run on, one per process: made at the first call, and
//! made again in a child after `fork` (a forked child has none of its parent's threads,
//! so the parent's runtime would never run anything there).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors::NatalError;

/// The runtime, and the process it was made in.
static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// How often a wait looks for Ctrl-C.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// This process's runtime.
pub fn runtime() -> PyResult<Arc<Runtime>> {
    let mut held = RUNTIME
        .lock()
        .map_err(|_| NatalError::new_err("natal's runtime lock was poisoned"))?;
    let pid = std::process::id();
    if let Some((made_in, runtime)) = held.as_ref() {
        if *made_in == pid {
            return Ok(runtime.clone());
        }
        // Made before a fork: its threads are the parent's. It is left, never dropped
        // (dropping would wait for threads this process does not have).
        if let Some((_, parents)) = held.take() {
            std::mem::forget(parents);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("natal")
        .build()
        .map_err(|e| NatalError::new_err(format!("cannot start natal's runtime: {e}")))?;
    let runtime = Arc::new(runtime);
    *held = Some((pid, runtime.clone()));
    Ok(runtime)
}

/// Runs `future` to its end on the runtime with the GIL released. Ctrl-C (a pending
/// signal Python's handler raises for) drops it and raises `KeyboardInterrupt`; what it
/// had not committed is not.
pub fn wait<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = PyResult<T>> + Send,
    T: Send,
{
    let runtime = runtime()?;
    py.detach(|| {
        runtime.block_on(async {
            tokio::select! {
                result = future => result,
                error = signalled() => Err(error),
            }
        })
    })
}

/// Waits until Python has a signal to raise (only the main thread ever has), and raises
/// what its handler raises (`KeyboardInterrupt` for Ctrl-C).
async fn signalled() -> PyErr {
    loop {
        tokio::time::sleep(SIGNAL_CHECK).await;
        if let Err(error) = Python::attach(|py| py.check_signals()) {
            return error;
        }
    }
}
