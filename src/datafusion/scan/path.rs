//! The way from an operator down to the natal scan under it, through operators that pass
//! the scan's rows on as they are (a round-robin repartition, partitions coalesced,
//! cooperative scheduling): what the physical rules that change a scan (`blob_sizes.rs`,
//! `nearest.rs`) walk and rebuild.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

/// Whether `plan` hands on its one child's rows as they are.
pub(in crate::datafusion) fn passes_rows_on(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<RepartitionExec>()
        .is_some_and(|r| matches!(r.partitioning(), Partitioning::RoundRobinBatch(_)))
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || plan.downcast_ref::<CooperativeExec>().is_some()
}

/// What stands in for a node: `None` for a node to keep (and look under).
pub(in crate::datafusion) type Replacement<'a> =
    &'a dyn Fn(&Arc<dyn ExecutionPlan>) -> Option<Result<Arc<dyn ExecutionPlan>>>;

/// `plan` with the node `replace` answers for (the scan) replaced by its answer, every
/// operator on the way rebuilt: the scan's schema or partitions may have changed, so they
/// recompute theirs.
pub(in crate::datafusion) fn with_scan_replaced(
    plan: &Arc<dyn ExecutionPlan>,
    replace: Replacement<'_>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(replaced) = replace(plan) {
        return replaced;
    }
    let children = (plan.children().into_iter())
        .map(|child| with_scan_replaced(child, replace))
        .collect::<Result<Vec<_>>>()?;
    let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
    Arc::clone(plan).replace_children(children, options)
}
