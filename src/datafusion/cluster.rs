//! natal on a Ballista cluster (cargo feature `ballista`): what a client, a scheduler and
//! each executor install so natal's plans cross between them — Ballista's own processes
//! and library, configured, not forked.
//!
//! ```text
//!  client (natal catalog, SQL)  ── logical plan: natal tables as URL + pinned version ──▶
//!  scheduler (SentTable plans natal's scan as a file scan; Ballista cuts it per task)  ──
//!  task plan: each task's pieces ──▶ executors (SentScan plans again over that version)
//! ```
//!
//! Every process uses [`codec`] (natal's codecs around Ballista's) and [`session_config`]
//! (Ballista's settings, natal's options, the codecs). A scheduler builds each query's
//! session with [`scheduler_session_builder`]; an executor decodes with
//! [`executor_functions`]. Object stores come from the runtime each is given: the same
//! URLs must resolve everywhere. Writes are refused on the cluster (`sent.rs`).

use std::sync::Arc;

use ballista::extension::SessionContextExt;
use ballista_core::extension::SessionConfigExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::{
    BallistaCodec, BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec,
};
use datafusion::error::Result;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::SessionState;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::{NatalLogicalCodec, NatalOptions, NatalPhysicalCodec};

/// natal's codecs around Ballista's own (which encode its shuffle nodes).
pub fn codec() -> BallistaCodec {
    BallistaCodec::new(logical_codec(), physical_codec())
}

fn logical_codec() -> Arc<NatalLogicalCodec> {
    Arc::new(NatalLogicalCodec::new(Arc::new(
        BallistaLogicalExtensionCodec::default(),
    )))
}

fn physical_codec() -> Arc<NatalPhysicalCodec> {
    Arc::new(NatalPhysicalCodec::new(Arc::new(
        BallistaPhysicalExtensionCodec::default(),
    )))
}

/// Ballista's session settings with natal's options and codecs: the config producer of
/// the scheduler and of every executor, and the client's.
pub fn session_config() -> SessionConfig {
    SessionConfig::new_with_ballista()
        .with_option_extension(NatalOptions::default())
        .with_ballista_logical_extension_codec(logical_codec())
        .with_ballista_physical_extension_codec(physical_codec())
}

/// A session that plans or runs natal's plans: DataFusion's defaults, Ballista's
/// optimizer rules and functions, and natal's functions, over `runtime`'s stores.
pub fn session_state(config: SessionConfig, runtime: Arc<RuntimeEnv>) -> Result<SessionState> {
    let mut state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_optimizer_rules(ballista_core::optimizer::ballista_default_optimizer_rules())
        .with_scalar_functions(ballista_core::extension::ballista_scalar_functions())
        .with_aggregate_functions(ballista_core::extension::ballista_aggregate_functions())
        .with_window_functions(ballista_core::extension::ballista_window_functions())
        .build();
    let octet_length = state.scalar_functions().get("octet_length").cloned();
    for function in super::scalar_functions(octet_length) {
        datafusion::execution::FunctionRegistry::register_udf(&mut state, Arc::new(function))?;
    }
    Ok(state)
}

/// The scheduler's session builder: each query's session from its settings, over
/// `runtime`'s stores.
pub fn scheduler_session_builder(runtime: Arc<RuntimeEnv>) -> ballista_scheduler::SessionBuilder {
    Arc::new(move |config: SessionConfig| session_state(config, runtime.clone()))
}

/// The functions an executor decodes task plans with (natal's among them).
pub fn executor_functions(runtime: Arc<RuntimeEnv>) -> Result<BallistaFunctionRegistry> {
    Ok(BallistaFunctionRegistry::from(&session_state(
        session_config(),
        runtime,
    )?))
}

/// A client session on the Ballista scheduler at `scheduler_url` (`df://host:port`) with
/// natal registered over `root`, as [`super::register_with`] does locally: its queries are
/// planned here, every natal table pinned at the version the statement resolves, and run
/// on the cluster.
pub async fn connect(
    scheduler_url: &str,
    root: &str,
    runtime: Arc<RuntimeEnv>,
    options: super::CatalogOptions,
) -> Result<SessionContext> {
    let local = SessionContext::new_with_state(session_state(session_config(), runtime)?);
    super::register_with(&local, root, options)?;
    SessionContext::remote_with_state(scheduler_url, local.state()).await
}
