//! What natal's leaf execution plans (scan, DML, maintenance functions) share: bounded
//! output, no children, no expressions of their own.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{Partitioning, PlanProperties};

/// Plan properties of a bounded leaf with `partitions` unordered partitions.
pub(crate) fn leaf_properties(
    schema: SchemaRef,
    partitions: usize,
    emission: EmissionType,
) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(schema),
        Partitioning::UnknownPartitioning(partitions.max(1)),
        emission,
        Boundedness::Bounded,
    ))
}

/// The `ExecutionPlan` methods of a leaf: no children to visit or replace, no expressions.
macro_rules! leaf_exec_methods {
    () => {
        fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
            vec![]
        }

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(
                &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
            ) -> datafusion::error::Result<
                datafusion::common::tree_node::TreeNodeRecursion,
            >,
        ) -> datafusion::error::Result<datafusion::common::tree_node::TreeNodeRecursion> {
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }

        fn with_new_children(
            self: Arc<Self>,
            _children: Vec<Arc<dyn ExecutionPlan>>,
        ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
            Ok(self)
        }
    };
}

pub(crate) use leaf_exec_methods;
