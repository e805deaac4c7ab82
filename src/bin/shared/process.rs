//! What `natal-scheduler` and `natal-executor` share as processes: Ballista's log lines on
//! stderr, and an exit code that says whether they stopped on an error.

use std::process::ExitCode;

/// Ballista's own log lines, at `RUST_LOG`'s level. By default info and above, except
/// DataFusion's warning that a task's plan, cut to its partitions, no longer matches the
/// scan's declared partition count: true of every task, and harmless (it counts again).
pub fn init_logging() {
    let default = "info,datafusion_datasource::file_scan_config=error";
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default)).init();
}

/// The process's exit code for how its service ended, the error printed.
pub fn exit_code(ended: Result<(), Box<dyn std::error::Error>>) -> ExitCode {
    match ended {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}
