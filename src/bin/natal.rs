//! `natal`: datafusion-cli with natal's catalog, `STORED AS NATAL`, and the `natal_*`
//! functions registered. Same REPL, `-c` and `-f` as datafusion-cli; `--root` chooses the
//! directory whose sub-directories are the tables.
//!
//! ```text
//! natal --root ./warehouse -c "SELECT * FROM \"t\$versions\""
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_cli::exec;
use datafusion_cli::object_storage::instrumented::InstrumentedObjectStoreRegistry;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::{MaxRows, PrintOptions};

#[derive(Debug, Parser)]
#[clap(author, version, about = "SQL over natal tables (a datafusion-cli)", long_about = None)]
struct Args {
    /// The catalog root: a local directory (created if missing) or a `file://` URL.
    /// Each table is a sub-directory.
    #[clap(long, default_value = "./natal-data")]
    root: String,

    /// Run these SQL commands and exit.
    #[clap(short = 'c', long, num_args = 0.., conflicts_with = "file")]
    command: Vec<String>,

    /// Run the SQL in these files and exit.
    #[clap(short = 'f', long, num_args = 0..)]
    file: Vec<String>,

    #[clap(long, value_enum, default_value_t = PrintFormat::Automatic)]
    format: PrintFormat,

    /// Print only results, no timing or banner.
    #[clap(short, long)]
    quiet: bool,

    /// Rows to print per result ("inf" for all).
    #[clap(long, default_value = "40")]
    maxrows: MaxRows,

    /// Partitions per scan (default: the number of cores).
    #[clap(long)]
    target_partitions: Option<usize>,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> datafusion::error::Result<()> {
    let mut config = SessionConfig::new().with_information_schema(true);
    if let Some(partitions) = args.target_partitions.filter(|p| *p > 0) {
        config = config.with_target_partitions(partitions);
    }
    let registry = Arc::new(InstrumentedObjectStoreRegistry::new());
    let runtime = RuntimeEnvBuilder::new()
        .with_object_store_registry(registry.clone())
        .build_arc()?;
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    natal::datafusion::register(&ctx, &args.root)?;
    if !args.quiet {
        println!(
            "natal {} (DataFusion {}) — tables under {}",
            env!("CARGO_PKG_VERSION"),
            datafusion::DATAFUSION_VERSION,
            args.root
        );
    }
    let mut print_options = PrintOptions {
        format: args.format,
        quiet: args.quiet,
        maxrows: args.maxrows,
        color: false,
        instrumented_registry: registry,
    };
    if !args.command.is_empty() {
        exec::exec_from_commands(&ctx, args.command, &print_options).await
    } else if !args.file.is_empty() {
        exec::exec_from_files(&ctx, args.file, &print_options).await
    } else {
        exec::exec_from_repl(&ctx, &mut print_options)
            .await
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))
    }
}
