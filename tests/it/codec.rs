//! natal's plans through DataFusion's plan encoding, as another process (a Ballista
//! scheduler or executor) receives them: a logical plan names each natal table by URL and
//! the version its statement pinned; a physical plan carries natal's file scan with each
//! partition's pieces. Decoded in a session with no natal catalog, both read the same rows
//! as the session that planned them, even after a later commit; writes are refused there,
//! and a payload from another natal build is refused by name.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::bytes::{
    logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use natal::datafusion::{NatalLogicalCodec, NatalPhysicalCodec, NatalScanExec};
use natal::internals::format::{WIRE_MAGIC, WIRE_VERSION};

use crate::common::{answer, sorted_rows};

/// Scans (whole, filtered, masked by `_rowid`, of a moved row among them), an aggregate, a
/// limit, and time travel.
const QUERIES: [&str; 6] = [
    "SELECT k, v FROM t",
    "SELECT _rowid, k FROM \"t$rows\" WHERE v < 3",
    "SELECT _rowid, v FROM \"t$rows\" WHERE _rowid IN (5, 9, 8589934600, 17179869190)",
    "SELECT v, count(*), sum(k) FROM t WHERE k > 1200 GROUP BY v",
    "SELECT count(*) FROM (SELECT k FROM t WHERE k > 2500 LIMIT 700)",
    "SELECT k, v FROM \"t@v3\" WHERE v = 2",
];

/// A natal session over `root` planning 4 partitions, with `t`: 6 fragments, some rows
/// moved by an UPDATE and some deleted.
async fn natal_session(root: &std::path::Path) -> SessionContext {
    // Split even a small table's scan: the partitions are what is tested.
    let config = SessionConfig::new()
        .with_target_partitions(4)
        .set_usize("datafusion.optimizer.repartition_file_min_size", 0);
    let ctx = SessionContext::new_with_config(config);
    natal::datafusion::register(&ctx, root.to_str().unwrap()).unwrap();
    let mut statements = crate::common::fragmented_table(6);
    statements.push("UPDATE t SET v = v + 10 WHERE k % 9 = 0".into());
    statements.push("DELETE FROM t WHERE k % 11 = 0".into());
    for sql in statements {
        answer(&ctx, &sql).await.unwrap();
    }
    ctx
}

/// `plan` with each natal scan in its file-scan form, the one natal's plans leave in.
fn as_file_scans(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    plan.transform_up(|node| {
        Ok(match node.downcast_ref::<NatalScanExec>() {
            Some(scan) => Transformed::yes(scan.as_data_source() as Arc<dyn ExecutionPlan>),
            None => Transformed::no(node),
        })
    })
    .unwrap()
    .data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_logical_plan_reads_the_version_its_statement_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = natal_session(dir.path()).await;
    let codec = NatalLogicalCodec::default();
    let mut sent = Vec::new();
    for query in QUERIES {
        let frame = natal::datafusion::sql(&ctx, query).await.unwrap();
        let plan = ctx.state().optimize(frame.logical_plan()).unwrap();
        let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
        let expected = sorted_rows(&frame.collect().await.unwrap());
        assert!(!expected.is_empty(), "{query}");
        sent.push((query, bytes, expected));
    }
    // A commit after planning: every sent plan still reads the version it pinned.
    answer(&ctx, "INSERT INTO t VALUES (1, 1), (2, 2)")
        .await
        .unwrap();
    answer(&ctx, "DELETE FROM t WHERE k < 100").await.unwrap();
    let elsewhere = SessionContext::new();
    for (query, bytes, expected) in sent {
        let plan =
            logical_plan_from_bytes_with_extension_codec(&bytes, &elsewhere.task_ctx(), &codec)
                .unwrap();
        let frame = elsewhere.execute_logical_plan(plan).await.unwrap();
        let physical = frame.clone().create_physical_plan().await.unwrap();
        let shown = datafusion::physical_plan::displayable(physical.as_ref())
            .indent(false)
            .to_string();
        assert!(shown.contains("file_type=natal"), "{query}: {shown}");
        let got = sorted_rows(&frame.collect().await.unwrap());
        assert_eq!(got, expected, "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_physical_plan_reads_each_partition_as_planned() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = natal_session(dir.path()).await;
    let codec = NatalPhysicalCodec::default();
    let elsewhere = SessionContext::new();
    for query in QUERIES {
        let frame = natal::datafusion::sql(&ctx, query).await.unwrap();
        let plan = as_file_scans(frame.clone().create_physical_plan().await.unwrap());
        let bytes = physical_plan_to_bytes_with_extension_codec(plan.clone(), &codec).unwrap();
        let decoded =
            physical_plan_from_bytes_with_extension_codec(&bytes, &elsewhere.task_ctx(), &codec)
                .unwrap();
        let expected = sorted_rows(&frame.collect().await.unwrap());
        let got = datafusion::physical_plan::collect(decoded, elsewhere.task_ctx())
            .await
            .unwrap();
        assert_eq!(sorted_rows(&got), expected, "{query}");
    }
    // The scan alone: partition for partition, the same rows as where it was planned.
    let frame = natal::datafusion::sql(&ctx, "SELECT _rowid, k, v FROM \"t$rows\"")
        .await
        .unwrap();
    let scan = as_file_scans(frame.create_physical_plan().await.unwrap());
    let partitions = scan.output_partitioning().partition_count();
    assert!(partitions >= 3, "{partitions} partitions");
    let bytes = physical_plan_to_bytes_with_extension_codec(scan.clone(), &codec).unwrap();
    let decoded =
        physical_plan_from_bytes_with_extension_codec(&bytes, &elsewhere.task_ctx(), &codec)
            .unwrap();
    assert_eq!(decoded.output_partitioning().partition_count(), partitions);
    for partition in 0..partitions {
        let read = |plan: &Arc<dyn ExecutionPlan>, ctx: &SessionContext| {
            let stream = plan.execute(partition, ctx.task_ctx()).unwrap();
            datafusion::physical_plan::common::collect(stream)
        };
        let here = read(&scan, &ctx).await.unwrap();
        let there = read(&decoded, &elsewhere).await.unwrap();
        assert!(!here.is_empty(), "partition {partition}");
        assert_eq!(
            sorted_rows(&there),
            sorted_rows(&here),
            "partition {partition}"
        );
    }
}

/// The first table scan's provider in `plan`.
fn scanned_provider(plan: &LogicalPlan) -> Arc<dyn datafusion::catalog::TableProvider> {
    let mut found = None;
    plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            found.get_or_insert_with(|| source_as_provider(&scan.source).unwrap());
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    })
    .unwrap();
    found.expect("a table scan")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_table_refuses_writes_and_another_builds_payload() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = natal_session(dir.path()).await;
    let codec = NatalLogicalCodec::default();
    let frame = natal::datafusion::sql(&ctx, "SELECT k FROM t")
        .await
        .unwrap();
    let bytes = logical_plan_to_bytes_with_extension_codec(frame.logical_plan(), &codec).unwrap();
    let elsewhere = SessionContext::new();
    let plan = logical_plan_from_bytes_with_extension_codec(&bytes, &elsewhere.task_ctx(), &codec)
        .unwrap();
    let sent = scanned_provider(&plan);
    let state = elsewhere.state();
    let input = Arc::new(EmptyExec::new(sent.schema()));
    let refusals = [
        sent.insert_into(&state, input, InsertOp::Append)
            .await
            .err(),
        sent.delete_from(&state, vec![]).await.err(),
        sent.update(&state, vec![], vec![]).await.err(),
    ];
    for refusal in refusals {
        let message = refusal.expect("a write is refused").to_string();
        assert!(
            message.contains("cannot run on a Ballista cluster"),
            "{message}"
        );
    }
    let before = answer(&ctx, "SELECT count(*) FROM t").await.unwrap();
    assert!(before.contains("5454"), "{before}");

    // Another natal build's payload: the wire version byte after natal's magic differs.
    let at = (bytes.windows(WIRE_MAGIC.len()))
        .position(|w| w == WIRE_MAGIC)
        .expect("natal's payload inside the plan");
    let mut other = bytes.to_vec();
    other[at + WIRE_MAGIC.len()] = WIRE_VERSION + 1;
    let error = logical_plan_from_bytes_with_extension_codec(&other, &elsewhere.task_ctx(), &codec)
        .unwrap_err()
        .to_string();
    assert!(error.contains("another natal"), "{error}");
    // Damaged: a byte of the payload flipped.
    let mut damaged = bytes.to_vec();
    damaged[at + WIRE_MAGIC.len() + 1] ^= 0xff;
    let error =
        logical_plan_from_bytes_with_extension_codec(&damaged, &elsewhere.task_ctx(), &codec)
            .unwrap_err()
            .to_string();
    assert!(error.contains("natal plan"), "{error}");
}
