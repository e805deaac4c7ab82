//! One boundary for panics of the Parquet crate: natal reads data files, checkpoints and
//! index segments through it, and a damaged file it does not check for can make it panic.
//! Such a panic is that file's corruption ([`Error::Corrupt`] naming it), not the caller's end.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

use crate::error::{Error, Result};

/// Runs `read`, a read of the file at `path` through the Parquet crate, with its panic as
/// the file's corruption.
pub(crate) async fn parquet_read<T>(
    path: &str,
    read: impl Future<Output = Result<T>>,
) -> Result<T> {
    AssertUnwindSafe(read)
        .catch_unwind()
        .await
        .map_err(|panic| panicked(path, panic))?
}

/// [`parquet_read`] for a read that does not wait.
pub(crate) fn parquet_read_now<T>(path: &str, read: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(AssertUnwindSafe(read)).map_err(|panic| panicked(path, panic))?
}

/// A panic of the Parquet crate over the file at `path`.
pub(crate) fn panicked(path: &str, panic: Box<dyn std::any::Any + Send>) -> Error {
    let message = panic_message(panic.as_ref());
    Error::corrupt(path, format!("the Parquet reader failed on it: {message}"))
}

/// What a caught panic said.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}
