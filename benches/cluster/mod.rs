//! An in-process Ballista cluster for natal (the cluster tests' and the `cluster` bench's):
//! one scheduler and some executors, each on a 2-thread runtime of its own in a thread of
//! its own (none shares the caller's), built by Ballista's own standalone constructors with
//! natal's codecs, settings and functions.

use std::sync::Arc;

use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::SessionContext;
use natal::datafusion::{cluster, CatalogOptions};

/// A scheduler and executors, each on a runtime of its own in a thread of its own; all
/// stopped when dropped.
pub struct Cluster {
    port: u16,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Runs `work` on a new 2-thread runtime in a new thread, until `work` ends.
fn on_own_runtime<F>(work: F) -> std::thread::JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(work);
        runtime.shutdown_background();
    })
}

impl Cluster {
    /// A scheduler and `executors` executors, each running `vcores` tasks at once.
    pub fn start(executors: usize, vcores: usize) -> Self {
        Self::start_with(executors, vcores, || Arc::new(RuntimeEnv::default()))
    }

    /// [`Self::start`], each process with its stores from `runtime` (called once for each).
    pub fn start_with(
        executors: usize,
        vcores: usize,
        runtime: impl Fn() -> Arc<RuntimeEnv> + Clone + Send + 'static,
    ) -> Self {
        let mut stops = Vec::new();
        let mut threads = Vec::new();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        stops.push(stop);
        let scheduler_runtime = runtime();
        threads.push(on_own_runtime(async move {
            let runtime = scheduler_runtime;
            let address = ballista_scheduler::standalone::new_standalone_scheduler_with_builder(
                cluster::scheduler_session_builder(runtime),
                Arc::new(cluster::session_config),
                cluster::codec(),
            )
            .await
            .expect("the scheduler starts");
            port_tx.send(address.port()).expect("the test waits");
            let _ = stopped.await;
        }));
        let port = port_rx.recv().expect("the scheduler's port");
        for _ in 0..executors {
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            stops.push(stop);
            let executor_runtime = runtime();
            threads.push(on_own_runtime(async move {
                // Connected from this runtime: the channel's worker runs where it connects.
                let scheduler = SchedulerGrpcClient::connect(format!("http://localhost:{port}"))
                    .await
                    .expect("the executor reaches the scheduler");
                let runtime = executor_runtime;
                let stores = runtime.clone();
                ballista_executor::new_standalone_executor_from_builder(
                    scheduler,
                    vcores,
                    Arc::new(cluster::session_config),
                    Arc::new(move |_| Ok(stores.clone())),
                    cluster::codec(),
                    cluster::executor_functions(runtime).expect("natal's functions"),
                )
                .await
                .expect("the executor starts");
                let _ = stopped.await;
            }));
        }
        Self {
            port,
            stops,
            threads,
        }
    }

    /// A client session on this cluster with natal over `root`.
    pub async fn client(&self, root: &str) -> SessionContext {
        self.client_with(root, Arc::new(RuntimeEnv::default()))
            .await
    }

    /// [`Self::client`] with its stores from `runtime`.
    pub async fn client_with(&self, root: &str, runtime: Arc<RuntimeEnv>) -> SessionContext {
        cluster::connect(
            &format!("df://localhost:{}", self.port),
            root,
            runtime,
            CatalogOptions::default(),
        )
        .await
        .expect("a client session")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
