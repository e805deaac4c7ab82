//! Fault injection: fail the Nth object-store request of a scripted workload, for every N.
//! After each failure the table opens at the last committed version with every committed row,
//! and the failure surfaced as an error from the step that hit it. The same loop runs over
//! HTTP: the in-process S3 server answers 503 SlowDown from the Nth request on (an outage the
//! client's retries do not outlast).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use natal::internals::io::InstrumentedStore;
use natal::RowId;
use natal::{CleanupPolicy, CompactOptions, Snapshot, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::common::*;

/// A cleanup keeping the newest `versions` versions and nothing else.
pub fn keep_last(versions: usize) -> CleanupPolicy {
    CleanupPolicy {
        keep_versions: versions,
        keep_newer_than: Duration::ZERO,
        min_file_age: Duration::ZERO,
    }
}

async fn workload_step(table: &Table, step: usize) -> natal::Result<()> {
    match step {
        0 => table
            .append(vec![batch(&[(1, 1), (2, 2), (3, 3)])])
            .await
            .map(drop),
        1 => table
            .update_where(key_matches(|k| k == 2), &add_to_val(10))
            .await
            .map(drop),
        2 => table.delete_where(key_matches(|k| k == 1)).await.map(drop),
        3 => table.append(vec![batch(&[(4, 4), (5, 5)])]).await.map(drop),
        4 => table
            .compact(CompactOptions {
                target_rows_per_fragment: Some(10),
                max_deleted_fraction: 0.1,
                ..Default::default()
            })
            .await
            .map(drop),
        5 => table.checkpoint().await.map(drop),
        6 => table
            .upsert("key", vec![batch(&[(4, 40), (6, 6)])])
            .await
            .map(drop),
        7 => table
            .delete_rows(&[RowId::from_u64(addr(1, 0))])
            .await
            .map(drop),
        8 => table.restore(4).await.map(drop),
        9 => table.overwrite(vec![batch(&[(7, 7)])]).await.map(drop),
        10 => table.cleanup(keep_last(3)).await.map(drop),
        _ => unreachable!(),
    }
}
const STEPS: usize = 11;

/// One step of a workload run under faults.
type Step = for<'a> fn(&'a Table, usize) -> BoxFuture<'a, natal::Result<()>>;
/// What a version holds, as text to compare.
type Describe = for<'a> fn(&'a Snapshot) -> BoxFuture<'a, String>;

/// Where the workload's requests fail: an in-memory store behind `InstrumentedStore`, or
/// the in-process S3 server.
enum Faulty {
    Memory,
    Http(crate::s3_server::S3Server),
}

/// One run's stores: the one the workload uses, whose requests fail, and a healthy view of
/// the same objects; the table's path in both.
struct Run {
    faulty: Arc<dyn ObjectStore>,
    healthy: Arc<dyn ObjectStore>,
    table: object_store::path::Path,
    instrumented: Option<Arc<InstrumentedStore>>,
}

impl Faulty {
    /// Fresh stores for the run failing from request `n`.
    fn run(&self, n: u64) -> Run {
        match self {
            Faulty::Memory => {
                let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
                let instrumented = Arc::new(InstrumentedStore::new(inner.clone()));
                Run {
                    faulty: instrumented.clone(),
                    healthy: inner,
                    table: "t".into(),
                    instrumented: Some(instrumented),
                }
            }
            Faulty::Http(server) => Run {
                faulty: Arc::new(server.client("natal").unwrap()),
                healthy: Arc::new(server.observer("natal").unwrap()),
                table: format!("run-{n}/t").into(),
                instrumented: None,
            },
        }
    }

    /// Requests the faulty store has made.
    fn requests(&self, run: &Run) -> u64 {
        match (self, &run.instrumented) {
            (Faulty::Http(server), _) => server.requests(),
            (_, Some(instrumented)) => instrumented.tally().total(),
            _ => 0,
        }
    }

    /// From now, request `n` and every one after it fail.
    fn fail_from(&self, run: &Run, n: u64) {
        match (self, &run.instrumented) {
            (Faulty::Http(server), _) => server.fail_from(n, crate::s3_server::Fault::SlowDown),
            (_, Some(instrumented)) => {
                instrumented.reset();
                instrumented.fail_from(n);
            }
            _ => {}
        }
    }

    fn heal(&self, run: &Run) {
        match (self, &run.instrumented) {
            (Faulty::Http(server), _) => server.clear_fault(),
            (_, Some(instrumented)) => instrumented.heal(),
            _ => {}
        }
    }
}

/// Runs `steps` steps of `step` on a table of `schema` (`options` for its handle), failing
/// every request from the Nth on, for N = 1, 2, ... until the workload runs through. After
/// each failure the table reopens at the last committed version, holding what `describe`
/// saw there, and takes `healed` as an append.
async fn fail_every_request(
    schema: arrow::datatypes::SchemaRef,
    options: TableOptions,
    (step, steps): (Step, usize),
    describe: Describe,
    healed: arrow::array::RecordBatch,
) {
    fail_every_request_of(
        Faulty::Memory,
        schema,
        options,
        (step, steps),
        describe,
        healed,
    )
    .await
}

async fn fail_every_request_of(
    faulty: Faulty,
    schema: arrow::datatypes::SchemaRef,
    options: TableOptions,
    (step, steps): (Step, usize),
    describe: Describe,
    healed: arrow::array::RecordBatch,
) {
    let mut n = 1u64;
    loop {
        let run = faulty.run(n);
        let table = Table::create(
            run.faulty.clone(),
            run.table.clone(),
            &schema,
            options.clone(),
        )
        .await
        .unwrap();
        let healthy = Table::open(run.healthy.clone(), run.table.clone());
        let mut committed = describe(&healthy.latest().await.unwrap()).await;
        let mut committed_version = 1;
        faulty.fail_from(&run, n);
        let start = faulty.requests(&run);
        let mut failed = false;
        for at in 0..steps {
            let before = faulty.requests(&run) - start;
            let result = step(&table, at).await;
            // Did this step issue the failing request?
            let hit = before < n && faulty.requests(&run) - start >= n;
            match result {
                Ok(()) => {
                    assert!(!hit, "step {at} swallowed the failure of request {n}");
                    let latest = healthy.latest().await.unwrap();
                    committed_version = latest.version();
                    committed = describe(&latest).await;
                }
                Err(e) => {
                    assert!(hit, "step {at} failed without an injected failure: {e}");
                    failed = true;
                    break;
                }
            }
        }
        faulty.heal(&run);
        let reopened = Table::open(run.healthy.clone(), run.table.clone());
        let latest = reopened.latest().await.unwrap();
        assert_eq!(
            latest.version(),
            committed_version,
            "failure at request {n}"
        );
        assert_eq!(describe(&latest).await, committed, "failure at request {n}");
        // The healed table takes writes again.
        reopened.append(vec![healed.clone()]).await.unwrap();
        if !failed {
            assert!(n > 20, "the workload issues requests");
            break;
        }
        n += 1;
    }
}

#[tokio::test]
async fn every_failed_request_leaves_the_last_committed_version_whole() {
    let (options, step, describe, healed) = table_workload();
    fail_every_request(schema(), options, (step, STEPS), describe, healed).await;
}

/// The same loop over HTTP: the S3 server is out (503 SlowDown) from request N on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_failed_over_http_leaves_the_last_committed_version_whole() {
    let server = crate::s3_server::S3Server::start(&["natal"], 50)
        .await
        .unwrap();
    let (options, step, describe, healed) = table_workload();
    let faulty = Faulty::Http(server);
    fail_every_request_of(faulty, schema(), options, (step, STEPS), describe, healed).await;
}

/// The workload of [`workload_step`]: its table options, steps, and how a version reads.
fn table_workload() -> (TableOptions, Step, Describe, arrow::array::RecordBatch) {
    let options = TableOptions {
        max_rows_per_fragment: 2,
        // Every carried sequence and the fragment list get files, so failures hit
        // those writes too.
        layout: natal::ManifestLayout {
            row_ids_inline_limit: 0,
            lineage_inline_limit: 0,
            fragments_per_segment: 2,
        },
        // A failed merge is not its write's error (tests/it/merge.rs checks that); here
        // every failure must surface from the step that hit it.
        merge: None,
        ..Default::default()
    };
    let step: Step = |table, at| Box::pin(workload_step(table, at));
    let describe: Describe =
        |snapshot| Box::pin(async move { format!("{:?}", read_rows(snapshot).await.unwrap()) });
    let healed = batch(&[(100, 100)]);
    (options, step, describe, healed)
}

/// Blob values under faults: appends that write packed and dedicated sidecars, an update
/// and a compaction that rewrite them, a delete and a cleanup that removes the files of
/// old versions. Every value of the last committed version reads back whole after every
/// failure.
async fn blob_step(table: &Table, step: usize) -> natal::Result<()> {
    use crate::blob::blob_batch;
    match step {
        0 => table.append(vec![blob_batch(0..16)]).await.map(drop),
        1 => {
            let keep_values = |batch: &arrow::array::RecordBatch| Ok(batch.project(&[0, 1])?);
            table
                .update_where(key_matches(|k| k % 4 == 3), &keep_values)
                .await
                .map(drop)
        }
        2 => table
            .delete_where(key_matches(|k| k % 5 == 1))
            .await
            .map(drop),
        3 => table.append(vec![blob_batch(16..24)]).await.map(drop),
        4 => table.compact(CompactOptions::default()).await.map(drop),
        5 => table.cleanup(keep_last(2)).await.map(drop),
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn every_failed_request_of_a_blob_workload_leaves_values_whole() {
    let options = TableOptions {
        max_rows_per_fragment: 8,
        merge: None,
        ..Default::default()
    };
    let step: Step = |table, at| Box::pin(blob_step(table, at));
    let describe: Describe = |snapshot| {
        Box::pin(async move { format!("{:?}", crate::blob::read_blobs(snapshot).await.unwrap()) })
    };
    let schema = crate::blob::blob_schema(crate::blob::SMALL);
    let healed = crate::blob::blob_batch(100..104);
    fail_every_request(schema, options, (step, 6), describe, healed).await;
}
