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

/// The stream of a leaf that does its work when first polled — never while planning — and
/// reports it as one row of UInt64 figures in the columns of `schema`, then `projection`.
pub(crate) fn figures_stream(
    schema: SchemaRef,
    projection: Option<Vec<usize>>,
    work: impl std::future::Future<Output = crate::Result<Vec<Option<u64>>>> + Send + 'static,
) -> datafusion::error::Result<datafusion::execution::SendableRecordBatchStream> {
    use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
    let output = match &projection {
        Some(p) => Arc::new(schema.project(p)?),
        None => schema.clone(),
    };
    let batch = async move {
        let columns: Vec<ArrayRef> = work
            .await?
            .into_iter()
            .map(|v| Arc::new(UInt64Array::from(vec![v])) as ArrayRef)
            .collect();
        let batch = RecordBatch::try_new(schema, columns)?;
        Ok(match projection {
            Some(p) => batch.project(&p)?,
            None => batch,
        })
    };
    Ok(Box::pin(
        datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
            output,
            futures::stream::once(batch),
        ),
    ))
}
