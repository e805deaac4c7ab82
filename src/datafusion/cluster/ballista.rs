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
//! session with [`scheduler_session_builder`], whose planner adds natal's physical rule
//! (`BlobSizes`) that Ballista's adaptive planner leaves out; an executor decodes with
//! [`executor_functions`]. Object stores come from the runtime each is given: the same
//! URLs must resolve everywhere. Writes are refused on the cluster (`sent.rs`).

use std::sync::Arc;

use ballista::extension::SessionContextExt;
use ballista_core::extension::SessionConfigExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::{
    BallistaCodec, BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec,
};
use datafusion::catalog::Session;
use datafusion::error::Result;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::datafusion::{NatalLogicalCodec, NatalOptions, NatalPhysicalCodec};

/// natal's codecs around Ballista's own (which encode its shuffle nodes).
pub fn codec() -> BallistaCodec {
    BallistaCodec::new(logical_codec(), physical_codec())
}

/// natal's logical codec around Ballista's.
pub fn logical_codec() -> Arc<NatalLogicalCodec> {
    Arc::new(NatalLogicalCodec::new(Arc::new(
        BallistaLogicalExtensionCodec::default(),
    )))
}

/// natal's physical codec around Ballista's.
pub fn physical_codec() -> Arc<NatalPhysicalCodec> {
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
    with_natal_functions(session_builder(config, runtime).build())
}

/// [`session_state`]'s builder, before natal's functions go on top of Ballista's.
fn session_builder(config: SessionConfig, runtime: Arc<RuntimeEnv>) -> SessionStateBuilder {
    SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_optimizer_rules(ballista_core::optimizer::ballista_default_optimizer_rules())
        .with_scalar_functions(ballista_core::extension::ballista_scalar_functions())
        .with_aggregate_functions(ballista_core::extension::ballista_aggregate_functions())
        .with_window_functions(ballista_core::extension::ballista_window_functions())
}

/// `state` with natal's functions registered (its `octet_length` over the session's).
fn with_natal_functions(mut state: SessionState) -> Result<SessionState> {
    let octet_length = state.scalar_functions().get("octet_length").cloned();
    for function in crate::datafusion::scalar_functions(octet_length) {
        datafusion::execution::FunctionRegistry::register_udf(&mut state, Arc::new(function))?;
    }
    Ok(state)
}

/// The scheduler's session builder: each query's session from its settings, over
/// `runtime`'s stores, planned by natal's scheduler planner (which adds `BlobSizes`).
pub fn scheduler_session_builder(runtime: Arc<RuntimeEnv>) -> ballista_scheduler::SessionBuilder {
    Arc::new(move |config: SessionConfig| {
        let builder = session_builder(config, runtime.clone());
        with_natal_functions(
            builder
                .with_query_planner(Arc::new(SchedulerPlanner))
                .build(),
        )
    })
}

/// A scheduler's physical planner: DataFusion's, then natal's physical rules
/// [`crate::datafusion::BlobSizes`] and `NearestRows` (an indexed search in a top-k's scan's
/// place). Ballista's adaptive planner optimizes a job's plan with its own list of rules,
/// not the session's, but builds the plan with the session's query planner.
#[derive(Debug)]
struct SchedulerPlanner;

#[async_trait::async_trait]
impl QueryPlanner for SchedulerPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = DefaultPhysicalPlanner::default()
            .create_physical_plan(logical_plan, session_state)
            .await?;
        let config = session_state.config_options();
        let plan = crate::datafusion::BlobSizes.optimize(plan, config)?;
        crate::datafusion::scan::nearest::NearestRows.optimize(plan, config)
    }
}

/// The functions an executor decodes task plans with (natal's among them).
pub fn executor_functions(runtime: Arc<RuntimeEnv>) -> Result<BallistaFunctionRegistry> {
    Ok(BallistaFunctionRegistry::from(&session_state(
        session_config(),
        runtime,
    )?))
}

/// A client session on the Ballista scheduler at `scheduler_url` (`df://host:port`) with
/// natal registered over `root`, as [`crate::datafusion::register_with`] does locally: its queries are
/// planned here, every natal table pinned at the version the statement resolves, and run
/// on the cluster.
pub async fn connect(
    scheduler_url: &str,
    root: &str,
    runtime: Arc<RuntimeEnv>,
    options: crate::datafusion::CatalogOptions,
) -> Result<SessionContext> {
    let local = SessionContext::new_with_state(session_state(session_config(), runtime)?);
    crate::datafusion::register_with(&local, root, options)?;
    remote(scheduler_url, &local).await
}

/// `local`, a session with natal registered and [`session_config`]'s settings, as a client
/// of the Ballista scheduler at `scheduler_url`.
pub async fn remote(scheduler_url: &str, local: &SessionContext) -> Result<SessionContext> {
    let remote = SessionContext::remote_with_state(scheduler_url, local.state()).await?;
    // Ballista registers its functions over the session's (DataFusion's `octet_length`
    // over natal's, which reads a blob column's sizes): natal's go on top again.
    let octet_length = datafusion::execution::FunctionRegistry::udf(&remote, "octet_length");
    for function in crate::datafusion::scalar_functions(octet_length.ok()) {
        remote.register_udf(function);
    }
    Ok(remote)
}

/// Runs a Ballista scheduler with natal's codecs, settings and functions (over `runtime`'s
/// stores) at `config.bind_host:bind_port`, until it fails. A running job that ran tasks on
/// an executor that is lost fails: Ballista 55's recovery of such a job may count rows twice
/// (its static planner re-runs a stage whose earlier outputs its next stage still holds)
/// or never finish (its adaptive planner), so the query is cancelled instead — the client
/// gets an error and runs it again.
pub async fn run_scheduler(
    mut config: ballista_scheduler::config::SchedulerConfig,
    runtime: Arc<RuntimeEnv>,
) -> Result<()> {
    use ballista_scheduler::cluster::BallistaCluster;
    use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service};

    let ballista = |e: ballista_core::error::BallistaError| {
        datafusion::error::DataFusionError::External(Box::new(e))
    };
    config.override_config_producer = Some(Arc::new(session_config));
    config.override_session_builder = Some(scheduler_session_builder(runtime));
    config.override_logical_codec = Some(logical_codec());
    config.override_physical_codec = Some(physical_codec());
    let address: std::net::SocketAddr = format!("{}:{}", config.bind_host, config.bind_port)
        .parse()
        .map_err(|e| datafusion::error::DataFusionError::Configuration(format!("{e}")))?;
    config.validate().map_err(ballista)?;
    let memory = BallistaCluster::new_from_config(&config)
        .await
        .map_err(ballista)?;
    let server = Arc::new(std::sync::OnceLock::new());
    let cluster_state = Arc::new(lost_executor::CancelOnLostExecutor::new(
        memory.cluster_state(),
        server.clone(),
    ));
    let cluster = BallistaCluster::new(cluster_state, memory.job_state());
    let scheduler = create_scheduler(cluster, Arc::new(config))
        .await
        .map_err(ballista)?;
    let _ = server.set(scheduler.clone());
    start_grpc_service(address, scheduler)
        .await
        .map_err(ballista)
}

mod lost_executor {
    //! A scheduler's executor registry that cancels the running jobs that used an executor
    //! when it removes it, before the scheduler hears the executor is lost (`run_scheduler`
    //! says why).

    use std::collections::{HashMap, HashSet};
    use std::sync::{Arc, OnceLock};

    use ballista_core::error::Result;
    use ballista_core::serde::protobuf::{
        task_status, ExecutorHeartbeat, RunningTask, SuccessfulTask,
    };
    use ballista_core::serde::scheduler::{ExecutorData, ExecutorMetadata};
    use ballista_core::JobId;
    use ballista_scheduler::cluster::{BoundTask, ClusterState, ClusterStateEventStream};
    use ballista_scheduler::config::TaskDistributionPolicy;
    use ballista_scheduler::scheduler_server::SchedulerServer;
    use ballista_scheduler::state::execution_stage::{ExecutionStage, TaskInfo};
    use ballista_scheduler::state::task_manager::JobInfoCache;
    use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

    type Server = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

    pub(in crate::datafusion) struct CancelOnLostExecutor {
        inner: Arc<dyn ClusterState>,
        /// Set once the scheduler exists (it is built over this registry).
        server: Arc<OnceLock<Server>>,
    }

    /// Whether a task of `stages` runs on `executor_id`, or ran there and left its shuffle
    /// output there.
    fn ran_on(stages: &HashMap<usize, ExecutionStage>, executor_id: &str) -> bool {
        let on_it = |task: &TaskInfo| match &task.task_status {
            task_status::Status::Running(RunningTask { executor_id: at })
            | task_status::Status::Successful(SuccessfulTask {
                executor_id: at, ..
            }) => at == executor_id,
            _ => false,
        };
        stages.values().any(|stage| match stage {
            ExecutionStage::Running(stage) => stage.task_infos.iter().any(on_it),
            ExecutionStage::Successful(stage) => stage.task_infos.iter().any(on_it),
            _ => false,
        })
    }

    impl CancelOnLostExecutor {
        pub(in crate::datafusion) fn new(
            inner: Arc<dyn ClusterState>,
            server: Arc<OnceLock<Server>>,
        ) -> Self {
            Self { inner, server }
        }
    }

    #[async_trait::async_trait]
    impl ClusterState for CancelOnLostExecutor {
        async fn init(&self) -> Result<()> {
            self.inner.init().await
        }

        async fn bind_schedulable_tasks(
            &self,
            distribution: TaskDistributionPolicy,
            active_jobs: Arc<HashMap<JobId, JobInfoCache>>,
            executors: Option<HashSet<String>>,
        ) -> Result<Vec<BoundTask>> {
            (self.inner)
                .bind_schedulable_tasks(distribution, active_jobs, executors)
                .await
        }

        async fn unbind_tasks(&self, executor_slots: Vec<(String, u32)>) -> Result<()> {
            self.inner.unbind_tasks(executor_slots).await
        }

        async fn register_executor(
            &self,
            metadata: ExecutorMetadata,
            spec: ExecutorData,
        ) -> Result<()> {
            self.inner.register_executor(metadata, spec).await
        }

        async fn save_executor_metadata(&self, metadata: ExecutorMetadata) -> Result<()> {
            self.inner.save_executor_metadata(metadata).await
        }

        async fn get_executor_metadata(&self, executor_id: &str) -> Result<ExecutorMetadata> {
            self.inner.get_executor_metadata(executor_id).await
        }

        async fn registered_executor_metadata(&self) -> Vec<ExecutorMetadata> {
            self.inner.registered_executor_metadata().await
        }

        async fn save_executor_heartbeat(&self, heartbeat: ExecutorHeartbeat) -> Result<()> {
            self.inner.save_executor_heartbeat(heartbeat).await
        }

        async fn remove_executor(&self, executor_id: &str) -> Result<()> {
            self.inner.remove_executor(executor_id).await?;
            let Some(server) = self.server.get() else {
                return Ok(());
            };
            // Queued before the scheduler's own handling of the loss, so each job is
            // cancelled before any of its tasks is run again. Jobs that never ran a task
            // there go on: none of their work or shuffle output is lost.
            let running = server.state.task_manager.get_running_job_cache();
            for (job, info) in running.iter() {
                if !ran_on(info.execution_graph.read().await.stages(), executor_id) {
                    continue;
                }
                log::warn!("cancelling job {job}: executor {executor_id} was lost while it ran");
                server.cancel_job(job.clone()).await?;
            }
            Ok(())
        }

        fn executor_heartbeats(&self) -> HashMap<String, ExecutorHeartbeat> {
            self.inner.executor_heartbeats()
        }

        fn get_executor_heartbeat(&self, executor_id: &str) -> Option<ExecutorHeartbeat> {
            self.inner.get_executor_heartbeat(executor_id)
        }

        async fn cluster_state_events(&self) -> Result<ClusterStateEventStream> {
            self.inner.cluster_state_events().await
        }
    }
}
