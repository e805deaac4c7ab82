//! `natal`: datafusion-cli with natal's catalog, `STORED AS NATAL`, and the `natal_*`
//! functions registered. Same REPL, `-c` and `-f` as datafusion-cli; `--root` chooses the
//! directory whose sub-directories are the tables: a local path, or an object-store URL
//! (`s3://bucket/prefix`, `gs://bucket/prefix` with credentials from the environment as
//! datafusion-cli reads them, `memory:///` for a throwaway catalog).
//!
//! ```text
//! natal --root ./warehouse -c "SELECT * FROM \"t\$versions\""
//! ```

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_cli::catalog::DynamicObjectStoreCatalog;
use datafusion_cli::functions::{
    ListFilesCacheFunc, MetadataCacheFunc, ParquetMetadataFunc, StatisticsCacheFunc,
};
use datafusion_cli::object_storage::instrumented::InstrumentedObjectStoreRegistry;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::{MaxRows, PrintOptions};
use natal::datafusion::NatalProgress;

mod progress;
mod run;
#[path = "../shared/stores.rs"]
mod stores;

use progress::TerminalProgress;

/// mimalloc, as datafusion-cli uses: a scan's batches of wide values are allocations of tens
/// of MiB, which glibc maps and unmaps for each batch, so every page of every batch faulted
/// in anew (BENCHMARKS.md, stop 59).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[clap(author, version, about = "SQL over natal tables (a datafusion-cli)", long_about = None)]
struct Args {
    /// The catalog root: a local directory (created if missing), or a `file://`, `s3://`,
    /// `gs://` or `memory://` URL. Each table is a sub-directory.
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

    /// Let a statement read a table's latest version as this session listed it up to this
    /// long ago (e.g. `5s`, `500ms`), sending no request to find it; another writer's
    /// commit may then go unseen that long. Default `0s`: every statement lists.
    #[clap(long, value_parser = humantime::parse_duration, default_value = "0s")]
    staleness_limit: std::time::Duration,

    /// Run queries on the Ballista cluster whose scheduler is at this URL
    /// (`df://host:50050`), made of `natal-scheduler` and `natal-executor` processes that
    /// reach the same root. Statements are planned here; the cluster refuses writes (run
    /// them without `--ballista`).
    #[cfg(feature = "ballista")]
    #[clap(long, value_name = "URL")]
    ballista: Option<String>,
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

async fn run(args: Args) -> Result<()> {
    // DataFusion's settings from `DATAFUSION_*` variables, as datafusion-cli reads them
    // (`DATAFUSION_EXECUTION_BATCH_SIZE=16384`); a bad value is an error before any statement.
    let mut config = SessionConfig::from_env()?;
    #[cfg(feature = "ballista")]
    if args.ballista.is_some() {
        config = natal::datafusion::cluster::session_config();
    }
    config = config.with_information_schema(true);
    if !args.quiet && std::io::stderr().is_terminal() {
        config = config.with_extension(Arc::new(NatalProgress(Arc::new(
            TerminalProgress::default(),
        ))));
    }
    if let Some(partitions) = args.target_partitions.filter(|p| *p > 0) {
        config = config.with_target_partitions(partitions);
    }
    let registry = Arc::new(InstrumentedObjectStoreRegistry::new());
    let runtime = RuntimeEnvBuilder::new()
        .with_object_store_registry(registry.clone())
        .build_arc()?;
    // As datafusion-cli: files by path (`SELECT * FROM 'x.parquet'`, `'s3://b/x.csv'`, their
    // object stores registered as they are named) and its table functions.
    let ctx = SessionContext::new_with_config_rt(config, runtime).enable_url_table();
    ctx.register_catalog_list(Arc::new(DynamicObjectStoreCatalog::new(
        ctx.state().catalog_list().clone(),
        ctx.state_weak_ref(),
    )));
    let caches = ctx.task_ctx().runtime_env().cache_manager.clone();
    ctx.register_udtf("parquet_metadata", Arc::new(ParquetMetadataFunc {}));
    ctx.register_udtf(
        "metadata_cache",
        Arc::new(MetadataCacheFunc::new(caches.clone())),
    );
    ctx.register_udtf(
        "statistics_cache",
        Arc::new(StatisticsCacheFunc::new(caches.clone())),
    );
    ctx.register_udtf(
        "list_files_cache",
        Arc::new(ListFilesCacheFunc::new(caches)),
    );
    register_root_store(&ctx, &args.root).await?;
    let catalog = natal::datafusion::CatalogOptions {
        staleness_limit: args.staleness_limit,
    };
    natal::datafusion::register_with(&ctx, &args.root, catalog)?;
    // The local session stays alive: the file catalog refers back to it.
    #[cfg(feature = "ballista")]
    let (ctx, _local) = match &args.ballista {
        Some(url) => (natal::datafusion::cluster::remote(url, &ctx).await?, ctx),
        None => (ctx.clone(), ctx),
    };
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
        for command in args.command {
            run::sql(&ctx, command, &print_options).await?;
        }
        Ok(())
    } else if !args.file.is_empty() {
        for file in &args.file {
            run::file(&ctx, file, &print_options).await?;
        }
        Ok(())
    } else {
        run::repl(&ctx, &mut print_options)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))
    }
}

/// Registers the object store a `--root` URL names (local paths and `file://` need none).
async fn register_root_store(ctx: &SessionContext, root: &str) -> Result<()> {
    if let Some((url, store)) = stores::root_store(root).await? {
        ctx.register_object_store(&url, store);
    }
    Ok(())
}
