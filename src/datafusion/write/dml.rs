//! SQL writes: [`NatalSink`] behind `INSERT INTO` / `INSERT OVERWRITE`, and [`DmlExec`] behind
//! `DELETE` and `UPDATE`. Both do their work when executed, never while planning, so
//! `EXPLAIN` changes nothing; each returns one row with the count of rows written or removed.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::sink::DataSink;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;

use crate::datafusion::leaf::{figures_stream, leaf_exec_methods, leaf_properties};
use crate::datafusion::progress_of;
use crate::table::vector::vector_dimension;
use crate::table::{RowMatch, Table};

fn to_natal(e: DataFusionError) -> crate::Error {
    crate::Error::External(Box::new(e))
}

/// `INSERT INTO` (append) and `INSERT OVERWRITE`.
#[derive(Debug)]
pub struct NatalSink {
    table: Table,
    schema: SchemaRef,
    overwrite: bool,
}

impl NatalSink {
    /// A sink appending to `table` (replacing its rows when `overwrite`), taking rows of `schema`.
    pub fn new(table: Table, schema: SchemaRef, overwrite: bool) -> Self {
        Self {
            table,
            schema,
            overwrite,
        }
    }
}

impl DisplayAs for NatalSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "NatalSink: {}",
            if self.overwrite {
                "overwrite"
            } else {
                "append"
            }
        )
    }
}

#[async_trait]
impl DataSink for NatalSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> Result<u64> {
        let schema = self.schema.clone();
        let progress = progress_of(context);
        let mut loaded = 0u64;
        // DataFusion has already checked and cast the input to the table's types; only the
        // field names and nullability need to be the table's own.
        let batches = data.map({
            let progress = progress.clone();
            move |batch| {
                let batch = batch
                    .map_err(|e| to_natal(naming_the_vector_column(e, &schema, Some(loaded))))?;
                loaded += batch.num_rows() as u64;
                progress.update("loading", loaded, None);
                crate::io::table_batch(&schema, batch.columns().to_vec())
            }
        });
        let committed = if self.overwrite {
            self.table.overwrite_stream(batches.boxed()).await
        } else {
            self.table.append_stream(batches.boxed()).await
        };
        progress.finish("loading");
        Ok(committed?.figures.rows_added)
    }
}

/// `error`, when it is Arrow's refusal to cast a list of another length to a vector of `n`
/// components ("Cannot cast to FixedSizeList(n): value at index i has length m", `i` in its
/// batch), as a plan error naming the vector column of `schema` (those of that dimension)
/// and, while rows stream in (`before` of them in earlier batches), the row. A literal cast
/// while the plan is optimized (`before` is `None`) is cast alone: its index says nothing.
pub(super) fn naming_the_vector_column(
    error: DataFusionError,
    schema: &Schema,
    before: Option<u64>,
) -> DataFusionError {
    let DataFusionError::ArrowError(cause, _) = error.find_root() else {
        return error;
    };
    let datafusion::arrow::error::ArrowError::CastError(message) = cause.as_ref() else {
        return error;
    };
    let numbers: Vec<u64> = (message.strip_prefix("Cannot cast to FixedSizeList("))
        .map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let [dimension, index, length] = numbers[..] else {
        return error;
    };
    let columns: Vec<&str> = (schema.fields().iter())
        .filter(|f| vector_dimension(f.data_type()).is_some_and(|n| n as u64 == dimension))
        .map(|f| f.name().as_str())
        .collect();
    let column = match columns.as_slice() {
        [one] => format!("column {one}"),
        _ => format!("one of columns {}", columns.join(", ")),
    };
    let value = match before {
        Some(before) => format!("row {} of the rows inserted", before + index + 1),
        None => "a value given".to_string(),
    };
    DataFusionError::Plan(format!(
        "{column} takes vectors of {dimension} components (VECTOR({dimension})); {value} has \
         {length}"
    ))
}

/// What a [`DmlExec`] does.
#[derive(Debug, Clone)]
pub enum DmlKind {
    /// Deletes the rows `rows` names.
    Delete {
        /// The rows.
        rows: RowMatch,
    },
    /// Sets columns of the rows `rows` names.
    Update {
        /// The rows.
        rows: RowMatch,
        /// (column index, new value) over the matched rows.
        values: Vec<(usize, Arc<dyn PhysicalExpr>)>,
        /// The table's user columns, which `values` are evaluated over.
        schema: SchemaRef,
        /// Write only the assigned columns, as row patches (`natal.patch_max_share`),
        /// rather than rewrite the rows.
        patch: bool,
        /// The columns `values` read (indexes of `schema`): all a patch reads of the rows.
        reads: Vec<usize>,
    },
}

/// Runs a `DELETE` or `UPDATE` when executed and yields one row: `count`.
#[derive(Debug)]
pub struct DmlExec {
    table: Table,
    kind: DmlKind,
    properties: Arc<PlanProperties>,
}

pub(crate) fn count_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]))
}

impl DmlExec {
    /// A DELETE or UPDATE of `table`.
    pub fn new(table: Table, kind: DmlKind) -> Self {
        let properties = leaf_properties(count_schema(), 1, EmissionType::Final);
        Self {
            table,
            kind,
            properties,
        }
    }
}

/// What a DELETE or UPDATE names, as EXPLAIN shows it.
fn describe(rows: &RowMatch) -> String {
    let mut parts = Vec::new();
    if let Some(filter) = &rows.filter {
        parts.push(format!("filter={filter}"));
    }
    if let Some(ids) = &rows.row_ids {
        parts.push(format!("row_ids=exact mask of {} ids", ids.len()));
    }
    if let Some(range) = &rows.row_id_range {
        parts.push(format!(
            "row_ids=exact range {}..={}",
            range.start(),
            range.end()
        ));
    }
    if parts.is_empty() {
        "every row".to_string()
    } else {
        parts.join(", ")
    }
}

impl DisplayAs for DmlExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.kind {
            DmlKind::Delete { rows } => write!(f, "NatalDeleteExec: {}", describe(rows)),
            DmlKind::Update {
                rows,
                values,
                patch,
                ..
            } => {
                let how = if *patch { "row patches" } else { "rewrite" };
                write!(
                    f,
                    "NatalUpdateExec: {} assignments as {how}, {}",
                    values.len(),
                    describe(rows)
                )
            }
        }
    }
}

async fn run(table: Table, kind: DmlKind) -> crate::Result<u64> {
    match kind {
        DmlKind::Delete { rows } => Ok(table.delete_matching(rows).await?.figures.rows_removed),
        DmlKind::Update {
            rows,
            values,
            schema,
            patch,
            reads,
        } => {
            let assigned: Vec<usize> = values.iter().map(|(index, _)| *index).collect();
            // A patch reads only what the assignments read: the other columns reach the
            // row it computes as nulls, which only a column it does not write holds.
            let schema = match patch {
                true => Arc::new(Schema::new(
                    (schema.fields().iter())
                        .map(|f| f.as_ref().clone().with_nullable(true))
                        .collect::<Vec<_>>(),
                )),
                false => schema,
            };
            let update = move |batch: &RecordBatch| -> crate::Result<RecordBatch> {
                // Assignments see the row as it was, system columns included; the new row
                // is its user columns with the assigned ones replaced.
                let mut columns: Vec<ArrayRef> = batch.columns()[..schema.fields().len()].to_vec();
                for (index, expr) in &values {
                    let value = expr
                        .evaluate(batch)
                        .map_err(to_natal)?
                        .into_array(batch.num_rows())
                        .map_err(to_natal)?;
                    let target = schema.field(*index).data_type();
                    columns[*index] = if value.data_type() == target {
                        value
                    } else {
                        cast(&value, target)?
                    };
                }
                crate::io::table_batch(&schema, columns)
            };
            if patch {
                let (_, patched) =
                    (table.patch_matching(rows, (&assigned, &reads), &update)).await?;
                return Ok(patched);
            }
            Ok(table
                .rewrite_matching(rows, &update)
                .await?
                .figures
                .rows_removed)
        }
    }
}

impl ExecutionPlan for DmlExec {
    fn name(&self) -> &str {
        match &self.kind {
            DmlKind::Delete { .. } => "NatalDeleteExec",
            DmlKind::Update { .. } => "NatalUpdateExec",
        }
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    leaf_exec_methods!();

    fn execute(
        &self,
        _partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let table = self.table.with_progress(progress_of(&context));
        let kind = self.kind.clone();
        figures_stream(count_schema(), None, async move {
            Ok(vec![Some(run(table, kind).await?)])
        })
    }
}
