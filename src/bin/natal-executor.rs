//! `natal-executor`: Ballista's executor (its library, configured) with natal's codecs,
//! settings and functions, and the object stores of the roots its clients use. It asks
//! `natal-scheduler` for tasks and reads natal's tables from the store itself.
//!
//! ```text
//! natal-executor --scheduler-port 50050 --root s3://bucket/warehouse
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use clap::Parser;
use natal::datafusion::cluster;

#[path = "shared/process.rs"]
mod process;
#[path = "shared/stores.rs"]
mod stores;

#[derive(Debug, Parser)]
#[clap(author, version, about = "Ballista's executor for natal tables", long_about = None)]
struct Args {
    /// The address its services listen on.
    #[clap(long, default_value = "127.0.0.1")]
    bind_host: String,

    /// The host the scheduler and other executors reach it at (default: `--bind-host`; set
    /// it when listening on 0.0.0.0).
    #[clap(long)]
    external_host: Option<String>,

    /// The port of its Arrow Flight service (other executors fetch shuffle data there); as
    /// Ballista's own executor names it (`--port` too).
    #[clap(long = "bind-port", alias = "port", default_value_t = 50051)]
    port: u16,

    /// The port of its gRPC service; as Ballista's own executor names it (`--grpc-port`
    /// too).
    #[clap(long = "bind-grpc-port", alias = "grpc-port", default_value_t = 50052)]
    grpc_port: u16,

    /// The scheduler's host.
    #[clap(long, default_value = "127.0.0.1")]
    scheduler_host: String,

    /// The scheduler's port.
    #[clap(long, default_value_t = 50050)]
    scheduler_port: u16,

    /// Seconds to keep trying to reach the scheduler when starting (0: one try).
    #[clap(long, default_value_t = 30)]
    scheduler_connect_timeout_seconds: u16,

    /// Tasks it runs at once (default: the number of cores).
    #[clap(long)]
    vcores: Option<usize>,

    /// Where it keeps shuffle files (default: a new temporary directory).
    #[clap(long)]
    work_dir: Option<String>,

    /// A root whose object store tasks read (an `s3://`, `gs://` URL, as the clients'
    /// `--root`; credentials from the environment). Local paths need none. Repeatable.
    #[clap(long = "root")]
    roots: Vec<String>,

    /// How tasks reach it: as the scheduler's `--scheduling`.
    #[clap(long, value_enum, default_value_t = process::Scheduling::Push)]
    scheduling: process::Scheduling,

    /// Seconds between its heartbeats to the scheduler when tasks are pushed (below the
    /// scheduler's `--executor-timeout-seconds`; a pulling executor's polls are its
    /// heartbeats).
    #[clap(long, default_value_t = 60)]
    heartbeat_interval_seconds: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    process::init_logging();
    process::exit_code(run(Args::parse()).await)
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = stores::runtime_with_roots(&args.roots).await?;
    let functions = cluster::executor_functions(runtime.clone())?;
    let defaults = ExecutorProcessConfig::default();
    let config = ExecutorProcessConfig {
        bind_host: args.bind_host.clone(),
        external_host: Some(args.external_host.unwrap_or(args.bind_host)),
        port: args.port,
        grpc_port: args.grpc_port,
        scheduler_host: args.scheduler_host,
        scheduler_port: args.scheduler_port,
        scheduler_connect_timeout_seconds: args.scheduler_connect_timeout_seconds,
        vcores: args.vcores.unwrap_or(defaults.vcores),
        work_dir: args.work_dir,
        task_scheduling_policy: args.scheduling.into(),
        executor_heartbeat_interval_seconds: args.heartbeat_interval_seconds,
        override_config_producer: Some(Arc::new(cluster::session_config)),
        override_runtime_producer: Some(Arc::new(move |_| Ok(runtime.clone()))),
        override_function_registry: Some(Arc::new(functions)),
        override_logical_codec: Some(cluster::logical_codec()),
        override_physical_codec: Some(cluster::physical_codec()),
        ..defaults
    };
    println!(
        "natal-executor asking {}:{} for tasks",
        config.scheduler_host, config.scheduler_port
    );
    start_executor_process(Arc::new(config)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_take_ballistas_names_and_natals_older_ones() {
        let ballista = [
            "natal-executor",
            "--bind-port",
            "6001",
            "--bind-grpc-port",
            "6002",
        ];
        let args = Args::try_parse_from(ballista).unwrap();
        assert_eq!((args.port, args.grpc_port), (6001, 6002));
        let older = ["natal-executor", "--port", "7001", "--grpc-port", "7002"];
        let args = Args::try_parse_from(older).unwrap();
        assert_eq!((args.port, args.grpc_port), (7001, 7002));
        assert!(Args::try_parse_from(["natal-executor", "--bind-port", "x"]).is_err());
    }
}
