//! `CREATE TABLE` with `BLOB` columns (also `TINYBLOB`, `MEDIUMBLOB`, `LONGBLOB`), for which
//! DataFusion's planner has no type: the statement is planned with `BYTEA` in their place,
//! and natal runs the planned `CREATE` itself (as DataFusion's `SessionContext` would) with
//! those columns as blob columns: `LargeBinary`, natal's blob metadata, default thresholds.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::MemTable;
use datafusion::dataframe::DataFrame;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{CreateMemoryTable, DdlStatement, LogicalPlan, LogicalPlanBuilder};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast;

use crate::format::BlobColumn;

/// The columns a `CREATE TABLE` declares `BLOB`, now `BYTEA` in `statement`; none for any
/// other statement.
pub(in crate::datafusion) fn take_blob_columns(
    statement: &mut Statement,
    normalize: bool,
) -> Vec<String> {
    let Statement::Statement(inner) = statement else {
        return Vec::new();
    };
    let ast::Statement::CreateTable(create) = inner.as_mut() else {
        return Vec::new();
    };
    let mut columns = Vec::new();
    for column in &mut create.columns {
        if is_blob_type(&column.data_type) {
            column.data_type = ast::DataType::Bytea;
            columns.push(match (normalize, column.name.quote_style) {
                (true, None) => column.name.value.to_ascii_lowercase(),
                _ => column.name.value.clone(),
            });
        }
    }
    columns
}

/// `schema` with the columns `options` (of a `CREATE EXTERNAL TABLE ... STORED AS NATAL`)
/// declares blob columns as such: `'blob.<column>' 'true'` with the default thresholds, and
/// `'blob.<column>.inline_limit'`, `.dedicated_threshold`, `.pack_file_size` (bytes) to set
/// them. A key naming no column or no threshold is an error.
pub(in crate::datafusion) fn with_blob_options(
    schema: &Schema,
    options: &std::collections::HashMap<String, String>,
) -> Result<Schema> {
    use crate::format::{
        BLOB_DEDICATED_THRESHOLD_META_KEY as DEDICATED_THRESHOLD,
        BLOB_INLINE_LIMIT_META_KEY as INLINE_LIMIT, BLOB_META_KEY as DECLARED,
        BLOB_PACK_FILE_SIZE_META_KEY as PACK_FILE_SIZE,
    };
    let mut declared: std::collections::HashMap<String, std::collections::HashMap<String, String>> =
        Default::default();
    for (key, value) in options {
        let Some(rest) = key.strip_prefix("blob.") else {
            continue;
        };
        let column_named = |name: &str| schema.fields().iter().any(|f| f.name() == name);
        let (column, meta_key) = if column_named(rest) {
            (rest, DECLARED)
        } else {
            let threshold = rest.rsplit_once('.').filter(|(c, _)| column_named(c));
            match threshold {
                Some((column, "inline_limit")) => (column, INLINE_LIMIT),
                Some((column, "dedicated_threshold")) => (column, DEDICATED_THRESHOLD),
                Some((column, "pack_file_size")) => (column, PACK_FILE_SIZE),
                _ => {
                    return Err(DataFusionError::Plan(format!(
                        "option '{key}' names no column and threshold: blob options are \
                         'blob.<column>' 'true' and 'blob.<column>.inline_limit', \
                         '.dedicated_threshold', '.pack_file_size' (bytes)"
                    )))
                }
            }
        };
        let metadata = declared.entry(column.to_string()).or_default();
        metadata.insert(DECLARED.to_string(), "true".to_string());
        if meta_key != DECLARED || value.trim().eq_ignore_ascii_case("false") {
            metadata.insert(meta_key.to_string(), value.clone());
        }
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match declared.remove(f.name()) {
            Some(metadata) => {
                let mut all = f.metadata().clone();
                all.extend(metadata);
                f.as_ref().clone().with_metadata(all)
            }
            None => f.as_ref().clone(),
        })
        .collect();
    Ok(Schema::new(fields).with_metadata(schema.metadata().clone()))
}

/// Whether SQL's `data_type` declares a blob column.
pub(in crate::datafusion) fn is_blob_type(data_type: &ast::DataType) -> bool {
    matches!(
        data_type,
        ast::DataType::Blob(_)
            | ast::DataType::TinyBlob
            | ast::DataType::MediumBlob
            | ast::DataType::LongBlob
    )
}

/// Runs `plan`, the planned `CREATE TABLE` whose `blobs` columns were declared `BLOB`.
pub(in crate::datafusion) async fn create_with_blobs(
    ctx: &SessionContext,
    plan: LogicalPlan,
    blobs: &[String],
) -> Result<DataFrame> {
    let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(create)) = plan else {
        return Err(DataFusionError::Plan(
            "BLOB is a column type of CREATE TABLE".into(),
        ));
    };
    let CreateMemoryTable {
        name,
        input,
        if_not_exists,
        or_replace,
        constraints,
        column_defaults,
        temporary,
    } = create;
    if temporary {
        return Err(DataFusionError::NotImplemented(
            "Temporary tables not supported".into(),
        ));
    }
    let empty = || -> Result<DataFrame> {
        Ok(DataFrame::new(
            ctx.state(),
            LogicalPlanBuilder::empty(false).build()?,
        ))
    };
    match (if_not_exists, or_replace, ctx.table_exist(name.clone())?) {
        (true, true, _) => {
            return Err(DataFusionError::Execution(
                "'IF NOT EXISTS' cannot coexist with 'REPLACE'".into(),
            ))
        }
        (true, false, true) => return empty(),
        (false, false, true) => {
            return Err(DataFusionError::Execution(format!(
                "Table '{name}' already exists"
            )))
        }
        (false, true, true) => {
            ctx.deregister_table(name.clone())?;
        }
        (_, _, false) => {}
    }
    let schema = blob_schema(input.schema().inner(), blobs)?;
    let partitions = DataFrame::new(ctx.state(), Arc::unwrap_or_clone(input))
        .collect_partitioned()
        .await?;
    let partitions = partitions
        .into_iter()
        .map(|batches| {
            batches
                .iter()
                .map(|batch| as_schema(batch, &schema))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    let table = MemTable::try_new(schema, partitions)?
        .with_constraints(constraints)
        .with_column_defaults(column_defaults.into_iter().collect());
    ctx.register_table(name, Arc::new(table))?;
    empty()
}

/// `schema` with its `blobs` columns as blob columns.
fn blob_schema(schema: &SchemaRef, blobs: &[String]) -> Result<SchemaRef> {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for name in blobs {
        let field = fields
            .iter_mut()
            .find(|f| f.name() == name)
            .ok_or_else(|| DataFusionError::Plan(format!("no BLOB column named {name}")))?;
        let mut metadata = field.metadata().clone();
        metadata.extend(BlobColumn::default().to_metadata());
        *field = field
            .clone()
            .with_data_type(DataType::LargeBinary)
            .with_metadata(metadata);
    }
    Ok(Arc::new(
        Schema::new(fields).with_metadata(schema.metadata().clone()),
    ))
}

/// `batch` as rows of `schema` (its blob columns cast to `LargeBinary`).
fn as_schema(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(
            |(column, field)| match column.data_type() == field.data_type() {
                true => Ok(column.clone()),
                false => arrow::compute::cast(column, field.data_type()),
            },
        )
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
