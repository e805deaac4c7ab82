//! `natal-scheduler`: Ballista's scheduler (its library, configured) with natal's codecs,
//! settings and functions, and the object stores of the roots its clients use. It sends
//! tasks to executors (`natal-executor`; or they ask for them, `--scheduling pull`);
//! clients connect with `natal --ballista df://host:port`.
//!
//! ```text
//! natal-scheduler --bind-port 50050 --root s3://bucket/warehouse
//! ```

use std::process::ExitCode;

use ballista_scheduler::config::SchedulerConfig;
use clap::Parser;
use natal::datafusion::cluster;

#[path = "shared/process.rs"]
mod process;
#[path = "shared/stores.rs"]
mod stores;

#[derive(Debug, Parser)]
#[clap(author, version, about = "Ballista's scheduler for natal tables", long_about = None)]
struct Args {
    /// The address to listen on.
    #[clap(long, default_value = "127.0.0.1")]
    bind_host: String,

    /// The host executors and clients reach it at (default: `--bind-host`; set it when
    /// listening on 0.0.0.0).
    #[clap(long)]
    external_host: Option<String>,

    /// The port to listen on (clients: `df://host:port`; executors: `--scheduler-port`).
    #[clap(long, default_value_t = 50050)]
    bind_port: u16,

    /// A root whose object store queries read (an `s3://`, `gs://` URL, as the clients'
    /// `--root`; credentials from the environment). Local paths need none. Repeatable.
    #[clap(long = "root")]
    roots: Vec<String>,

    /// How tasks reach executors (each executor's `--scheduling` must be the same).
    #[clap(long, value_enum, default_value_t = process::Scheduling::Push)]
    scheduling: process::Scheduling,

    /// Seconds without a heartbeat before an executor is taken as lost and its tasks are
    /// run again elsewhere.
    #[clap(long, default_value_t = 180)]
    executor_timeout_seconds: u64,

    /// Seconds between checks for lost executors.
    #[clap(long, default_value_t = 15)]
    expire_dead_executor_interval_seconds: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    process::init_logging();
    process::exit_code(run(Args::parse()).await)
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = stores::runtime_with_roots(&args.roots).await?;
    let config = SchedulerConfig {
        bind_host: args.bind_host.clone(),
        external_host: (args.external_host.clone()).unwrap_or(args.bind_host.clone()),
        bind_port: args.bind_port,
        scheduling_policy: args.scheduling.into(),
        executor_timeout_seconds: args.executor_timeout_seconds,
        expire_dead_executor_interval_seconds: args.expire_dead_executor_interval_seconds,
        ..SchedulerConfig::default()
    };
    println!(
        "natal-scheduler listening on {}:{}",
        args.bind_host, args.bind_port
    );
    cluster::run_scheduler(config, runtime).await?;
    Ok(())
}
