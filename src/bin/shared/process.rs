//! What `natal-scheduler` and `natal-executor` share as processes: how tasks reach
//! executors, Ballista's log lines on stderr, and an exit code that says whether they
//! stopped on an error.

use std::process::ExitCode;

use ballista_core::config::TaskSchedulingPolicy;

/// How tasks reach executors; the scheduler and every executor must agree.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Scheduling {
    /// The scheduler sends each task to an executor as soon as one has a free slot, and
    /// an executor reports each task's end at once: the scheduler must reach every
    /// executor's gRPC port.
    Push,
    /// Executors ask the scheduler for work, and report what ended, every 50 ms when idle
    /// (Ballista 55's poll): nothing needs to reach an executor, but every task waits for
    /// its executor's next poll, tens of milliseconds a stage.
    Pull,
}

impl From<Scheduling> for TaskSchedulingPolicy {
    fn from(scheduling: Scheduling) -> Self {
        match scheduling {
            Scheduling::Push => TaskSchedulingPolicy::PushStaged,
            Scheduling::Pull => TaskSchedulingPolicy::PullStaged,
        }
    }
}

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
