//! The provider of a table whose latest version is damaged (it, or a file it needs, cannot
//! be read). The catalog still has the table, so `DROP TABLE` finds and drops it, while
//! every read or write of it fails with the damage (naming the file and how to recover);
//! `t@vN` and `natal_restore` do not pass through here.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

/// A damaged table: the newest readable version's columns (none if no version reads), and
/// the damage every use of it reports.
#[derive(Debug)]
pub struct DamagedTable {
    schema: SchemaRef,
    path: String,
    reason: String,
}

impl DamagedTable {
    /// A damaged table with `schema`, failing with `Corrupt { path, reason }`.
    pub fn new(schema: SchemaRef, path: String, reason: String) -> Self {
        Self {
            schema,
            path,
            reason,
        }
    }

    fn damage(&self) -> DataFusionError {
        crate::Error::Corrupt {
            path: self.path.clone(),
            reason: self.reason.clone(),
        }
        .into()
    }
}

#[async_trait]
impl TableProvider for DamagedTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(self.damage())
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        _input: Arc<dyn ExecutionPlan>,
        _insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(self.damage())
    }

    async fn delete_from(
        &self,
        _state: &dyn Session,
        _filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(self.damage())
    }

    async fn update(
        &self,
        _state: &dyn Session,
        _assignments: Vec<(String, Expr)>,
        _filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(self.damage())
    }
}
