//! `natal_segment_placement('t', 'index', nodes)`: where each segment of a logical index is
//! cached among `nodes` cache nodes (seed 002's anchored round robin, `format::cache_node`),
//! for callers that route index probes themselves. Read from the latest version when the
//! query runs.

use std::sync::Arc;

use arrow::array::{StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::format::cache_node;
use crate::table::Table;

/// The segments of one index and their cache nodes.
#[derive(Debug)]
pub(in crate::datafusion) struct PlacementProvider {
    pub(in crate::datafusion) table: Table,
    pub(in crate::datafusion) index: String,
    pub(in crate::datafusion) nodes: u64,
}

fn placement_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("segment_uuid", DataType::Utf8, false),
        Field::new("segment_seq", DataType::UInt64, false),
        Field::new("node", DataType::UInt64, false),
    ]))
}

impl PlacementProvider {
    /// One row per segment of the index in the latest version, by sequence number.
    async fn rows(&self) -> Result<RecordBatch> {
        let snapshot = self.table.latest().await?;
        let manifest = snapshot.manifest();
        let mut section = manifest.indexes.clone();
        // Numbered as the next segment commit would number them (as `t$indexes` shows).
        section.backfill();
        let mut segments: Vec<(&str, u64)> = section
            .segments
            .iter()
            .filter(|s| s.name == self.index)
            .filter_map(|s| Some((s.uuid.as_str(), s.segment_seq?)))
            .collect();
        if segments.is_empty() {
            return Err(DataFusionError::Plan(format!(
                "natal_segment_placement: the table has no index named '{}'",
                self.index
            )));
        }
        segments.sort_by_key(|(_, seq)| *seq);
        let nodes = usize::try_from(self.nodes).unwrap_or(usize::MAX);
        let placed = segments
            .iter()
            .map(|(_, seq)| {
                cache_node(&manifest.table_uuid, &self.index, *seq, nodes)
                    .map(|n| n as u64)
                    .ok_or_else(|| DataFusionError::Internal("a segment without a seat".into()))
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok(RecordBatch::try_new(
            placement_schema(),
            vec![
                Arc::new(StringArray::from_iter_values(segments.iter().map(|s| s.0))),
                Arc::new(UInt64Array::from_iter_values(segments.iter().map(|s| s.1))),
                Arc::new(UInt64Array::from(placed)),
            ],
        )?)
    }
}

#[async_trait]
impl TableProvider for PlacementProvider {
    fn schema(&self) -> SchemaRef {
        placement_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rows = self.rows().await?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![rows]],
            placement_schema(),
            projection.cloned(),
        )?)
    }
}
