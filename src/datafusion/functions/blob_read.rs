//! `natal_blob_read('t', 'column', rowid [, offset, length])`: bytes of one blob value (all
//! of it, or `length` bytes from `offset`), fetched when the query runs with one ranged
//! request — never the whole object of a packed or external value to read part of it.

use std::sync::Arc;

use arrow::array::{LargeBinaryArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::rowid::RowId;
use crate::table::Table;

/// The bytes asked of one value.
#[derive(Debug)]
pub(in crate::datafusion) struct BlobReadProvider {
    pub(in crate::datafusion) table: Table,
    pub(in crate::datafusion) column: String,
    pub(in crate::datafusion) row_id: u64,
    /// `(offset, length)`; `None`: the whole value.
    pub(in crate::datafusion) range: Option<(u64, u64)>,
}

fn read_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("_rowid", DataType::UInt64, false),
        Field::new("offset", DataType::UInt64, false),
        Field::new("data", DataType::LargeBinary, false),
        Field::new("size", DataType::UInt64, false),
    ]))
}

impl BlobReadProvider {
    async fn row(&self, state: &dyn Session) -> Result<RecordBatch> {
        // External values are read through the session's stores.
        let stores = crate::datafusion::SessionStores::of(state.runtime_env());
        let snapshot = self.table.with_external_stores(stores).latest().await?;
        let mut reader = snapshot
            .blob(&self.column, RowId::from_u64(self.row_id))
            .await?;
        let size = reader.size();
        let (offset, length) = self.range.unwrap_or((0, size));
        let end = offset.checked_add(length).filter(|end| *end <= size);
        if end.is_none() {
            return Err(DataFusionError::Plan(format!(
                "natal_blob_read: bytes {offset}..{offset}+{length} are past the end of the \
                 value of row {} ({size} bytes)",
                self.row_id
            )));
        }
        let length = usize::try_from(length)
            .map_err(|_| DataFusionError::Plan("natal_blob_read: length too large".into()))?;
        reader.seek(std::io::SeekFrom::Start(offset)).await?;
        let mut data = vec![0u8; length];
        reader.read_exact(&mut data).await?;
        Ok(RecordBatch::try_new(
            read_schema(),
            vec![
                Arc::new(UInt64Array::from(vec![self.row_id])),
                Arc::new(UInt64Array::from(vec![offset])),
                Arc::new(LargeBinaryArray::from_iter_values([data])),
                Arc::new(UInt64Array::from(vec![size])),
            ],
        )?)
    }
}

#[async_trait]
impl TableProvider for BlobReadProvider {
    fn schema(&self) -> SchemaRef {
        read_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let row = self.row(state).await?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![row]],
            read_schema(),
            projection.cloned(),
        )?)
    }
}
