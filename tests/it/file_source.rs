//! natal's scan as DataFusion's own file scan (`NatalScanExec::as_data_source`): the same
//! rows, partition for partition, and a plan cut down to some of its file groups (as
//! Ballista's scheduler cuts each task's plan to the task's partitions) reads exactly the
//! partitions it kept, none twice.

use std::sync::Arc;

use datafusion::datasource::physical_plan::{FileScanConfig, FileScanConfigBuilder};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion::prelude::{SessionConfig, SessionContext};
use natal::datafusion::NatalScanExec;

/// The natal scan in `plan`.
fn find_scan(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    if plan.is::<NatalScanExec>() {
        return Some(plan.clone());
    }
    plan.children().into_iter().find_map(find_scan)
}

/// Partition `partition` of `plan`, as text and the batches it came in.
async fn partition_rows(
    ctx: &SessionContext,
    plan: &dyn ExecutionPlan,
    partition: usize,
) -> (String, usize) {
    let stream = plan.execute(partition, ctx.task_ctx()).unwrap();
    let batches = datafusion::physical_plan::common::collect(stream)
        .await
        .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap();
    (text.to_string(), batches.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_as_a_file_scan_reads_its_partitions_and_only_those_kept() {
    let dir = tempfile::tempdir().unwrap();
    // Split even a small table's scan: the partitions are what is tested.
    let config = SessionConfig::new()
        .with_target_partitions(4)
        .set_usize("datafusion.optimizer.repartition_file_min_size", 0);
    let ctx = SessionContext::new_with_config(config);
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    let mut statements = crate::common::fragmented_table(6);
    statements.push("UPDATE t SET v = v + 10 WHERE k % 9 = 0".into());
    statements.push("DELETE FROM t WHERE k % 11 = 0".into());
    for sql in statements {
        crate::common::answer(&ctx, &sql).await.unwrap();
    }
    for query in [
        "SELECT k, v FROM t",
        "SELECT _rowid, k FROM \"t$rows\" WHERE v < 3",
        "SELECT k FROM t WHERE k > 2500 LIMIT 700",
    ] {
        let frame = natal::datafusion::sql(&ctx, query).await.unwrap();
        let plan = frame.create_physical_plan().await.unwrap();
        let scan = find_scan(&plan).unwrap_or_else(|| panic!("{query}: no natal scan"));
        let natal = scan.downcast_ref::<NatalScanExec>().unwrap();
        let file_scan = natal.as_data_source();
        let partitions = scan.output_partitioning().partition_count();
        assert!(partitions >= 3, "{query}: {partitions} partitions");
        assert_eq!(
            (file_scan.clone() as Arc<dyn ExecutionPlan>)
                .output_partitioning()
                .partition_count(),
            partitions
        );
        let mut by_partition = Vec::new();
        for p in 0..partitions {
            let expected = partition_rows(&ctx, scan.as_ref(), p).await;
            let found = partition_rows(&ctx, file_scan.as_ref(), p).await;
            // The same batches too: a filtered scan gathers its small ones either way.
            assert!(found == expected, "{query}: partition {p} differs");
            by_partition.push(expected.0);
        }

        // Cut to two of its groups, as a task's plan is: it reads those two partitions.
        let source: &dyn std::any::Any = file_scan.data_source().as_ref();
        let config = source.downcast_ref::<FileScanConfig>().unwrap();
        let kept = [1, partitions - 1];
        let groups = kept
            .iter()
            .map(|&g| config.file_groups[g].clone())
            .collect();
        let cut = FileScanConfigBuilder::from(config.clone())
            .with_file_groups(groups)
            .build();
        let cut: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(cut);
        assert_eq!(cut.output_partitioning().partition_count(), 2);
        for (task_partition, &global) in kept.iter().enumerate() {
            let (found, _) = partition_rows(&ctx, cut.as_ref(), task_partition).await;
            assert!(
                found == by_partition[global],
                "{query}: group {global} differs"
            );
        }
    }
}
