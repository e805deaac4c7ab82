//! `ALTER TABLE` on natal tables, which DataFusion 55's planner refuses: sqlparser's
//! statement turned into [`SchemaChange`]s and committed as one version
//! ([`Table::alter`](crate::Table::alter)). Reached through natal's SQL entry point.

use datafusion::catalog::TableProvider;
use datafusion::dataframe::DataFrame;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, ColumnOption, Expr, Ident,
    MySQLColumnPosition, SqlOption, Value,
};

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::can_cast_types;
use arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::logical_expr::ExprSchemable;

use crate::datafusion::NatalTableProvider;
use crate::format::{Position, SchemaChange};
use crate::{NewColumn, ROW_ADDR, ROW_ID};

fn refused(what: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Plan(format!("ALTER TABLE: {what}"))
}

/// Runs `alter`: every change it lists, in one version.
pub(in crate::datafusion) async fn alter_table(
    ctx: &SessionContext,
    alter: &AlterTable,
) -> Result<DataFrame> {
    let name = alter.name.to_string();
    let provider = match ctx.table_provider(name.as_str()).await {
        Ok(provider) => provider,
        Err(_) if alter.if_exists => return no_rows(ctx),
        Err(e) => return Err(e),
    };
    let natal = provider
        .downcast_ref::<NatalTableProvider>()
        .ok_or_else(|| refused(format!("{name} is not a natal table")))?;
    let view = natal.view();
    if view.version.is_some() || view.system_columns {
        return Err(refused(format!(
            "{name} is read-only (a version or the $rows face): alter the table by its name"
        )));
    }
    // The columns of the version the provider resolved (`IF [NOT] EXISTS` asks of them).
    let schema = natal.schema();
    let has_column = |name: &str| schema.field_with_name(name).is_ok();
    let state = ctx.state();
    let normalize = state.config_options().sql_parser.enable_ident_normalization;
    let column = |ident: &Ident| match ident.quote_style {
        None if normalize => ident.value.to_lowercase(),
        _ => ident.value.clone(),
    };
    let mut changes = Vec::new();
    let (mut feed, mut share) = (None, None);
    for operation in &alter.operations {
        match operation {
            AlterTableOperation::SetTblProperties { table_properties } => {
                for property in table_properties {
                    match table_property(property)? {
                        TableProperty::ChangeDataFeed(enabled) => feed = Some(enabled),
                        TableProperty::PatchMaxShare(most) => share = Some(most),
                    }
                }
            }
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                column_position,
                ..
            } => {
                let name = column(&column_def.name);
                if *if_not_exists && has_column(&name) {
                    continue;
                }
                let position = column_position.as_ref().map(|p| moved_to(p, &column));
                let mut not_null = false;
                let mut default = None;
                for option in &column_def.options {
                    match &option.option {
                        ColumnOption::Null => {}
                        ColumnOption::NotNull => not_null = true,
                        ColumnOption::Default(expr) => default = Some(expr),
                        other => {
                            return Err(refused(format!(
                                "ADD COLUMN {name} ... {other} is not supported"
                            )))
                        }
                    }
                }
                if super::blob_ddl::is_blob_type(&column_def.data_type) {
                    if not_null || default.is_some() || position.is_some() {
                        return Err(refused(format!(
                            "ADD COLUMN {name} BLOB is added nullable, empty and last: \
                             NOT NULL, DEFAULT and FIRST/AFTER are not supported for it"
                        )));
                    }
                    changes.push(SchemaChange::AddBlobColumn {
                        name: name.as_str().into(),
                        blob: crate::format::BlobColumn::default(),
                    });
                    continue;
                }
                let data_type = sql_type(&state, &column_def.data_type.to_string())?;
                match default {
                    Some(_) if position.is_some() => {
                        return Err(refused(format!(
                            "ADD COLUMN {name} ... DEFAULT is added last: move it after, with \
                             ALTER TABLE ... MODIFY COLUMN {name} <type> FIRST or AFTER <column>"
                        )))
                    }
                    Some(expr) if alter.operations.len() == 1 => {
                        let column = (name, data_type, !not_null);
                        add_with_values(ctx, natal, column, &expr.to_string()).await?;
                        return no_rows(ctx);
                    }
                    Some(_) => {
                        return Err(refused(format!(
                            "ADD COLUMN {name} ... DEFAULT computes a value per row: give it \
                             an ALTER TABLE of its own"
                        )))
                    }
                    None if not_null => {
                        return Err(refused(format!(
                            "cannot add NOT NULL column {name} without a DEFAULT: rows that \
                             exist would have no value for it"
                        )))
                    }
                    None => {
                        changes.push(SchemaChange::AddColumn {
                            name: name.as_str().into(),
                            data_type,
                        });
                        if let Some(to) = position {
                            changes.push(SchemaChange::Move {
                                name: name.into(),
                                to,
                            });
                        }
                    }
                }
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for ident in column_names {
                    let name = column(ident);
                    if *if_exists && !has_column(&name) {
                        continue;
                    }
                    changes.push(SchemaChange::DropColumn { name: name.into() });
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => changes.push(SchemaChange::RenameColumn {
                from: column(old_column_name).into(),
                to: column(new_column_name),
            }),
            AlterTableOperation::ChangeColumn {
                old_name,
                new_name,
                data_type,
                options,
                column_position,
            } => {
                let (from, to) = (column(old_name), column(new_name));
                changes.push(SchemaChange::RenameColumn {
                    from: from.into(),
                    to: to.clone(),
                });
                let data_type = sql_type(&state, &data_type.to_string())?;
                let position = column_position.as_ref().map(|p| moved_to(p, &column));
                changes.extend(modified(&to, data_type, options, position)?);
            }
            AlterTableOperation::ModifyColumn {
                col_name,
                data_type,
                options,
                column_position,
            } => {
                let data_type = sql_type(&state, &data_type.to_string())?;
                let position = column_position.as_ref().map(|p| moved_to(p, &column));
                changes.extend(modified(&column(col_name), data_type, options, position)?);
            }
            AlterTableOperation::AlterColumn { column_name, op } => {
                let name: crate::FieldPath = column(column_name).into();
                changes.push(match op {
                    AlterColumnOperation::DropNotNull => SchemaChange::DropNotNull { name },
                    AlterColumnOperation::SetDataType {
                        data_type,
                        using: None,
                        ..
                    } => SchemaChange::SetDataType {
                        name,
                        data_type: sql_type(&state, &data_type.to_string())?,
                    },
                    AlterColumnOperation::SetNotNull => {
                        return Err(refused(format!(
                            "cannot SET NOT NULL on {name}: natal only relaxes nullability"
                        )))
                    }
                    other => {
                        return Err(refused(format!(
                            "ALTER COLUMN {name} {other} is not supported"
                        )))
                    }
                });
            }
            other => return Err(refused(format!("{other} is not supported"))),
        }
    }
    if !changes.is_empty() || (feed.is_none() && share.is_none()) {
        natal.table().alter(changes).await?;
    }
    if let Some(enabled) = feed {
        natal.table().set_change_data_feed(enabled).await?;
    }
    if let Some(most) = share {
        natal.table().set_patch_max_share(most).await?;
    }
    no_rows(ctx)
}

/// What a DDL statement answers, as DataFusion's own do: no rows and no columns (the CLI
/// prints `0 row(s) fetched.`).
pub(in crate::datafusion) fn no_rows(ctx: &SessionContext) -> Result<DataFrame> {
    let plan = datafusion::logical_expr::LogicalPlanBuilder::empty(false).build()?;
    Ok(DataFrame::new(ctx.state(), plan))
}

/// A table property `SET TBLPROPERTIES` sets.
enum TableProperty {
    /// `change_data_feed = true|false`: whether deletes, updates and merges capture the
    /// rows they remove for change reads.
    ChangeDataFeed(bool),
    /// `patch_max_share = <0..1>|default`: the share of the table's bytes an UPDATE's
    /// assigned columns may hold for it to write row patches (`default`: natal's).
    PatchMaxShare(Option<f64>),
}

fn table_property(property: &SqlOption) -> Result<TableProperty> {
    let SqlOption::KeyValue { key, value } = property else {
        return Err(refused(format!(
            "SET TBLPROPERTIES: {property} is not a property"
        )));
    };
    let text = match value {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        other => other.to_string(),
    };
    if key.value.eq_ignore_ascii_case(CHANGE_DATA_FEED) {
        return (parse_switch(&text).map(TableProperty::ChangeDataFeed)).ok_or_else(|| {
            refused(format!(
                "SET TBLPROPERTIES: {CHANGE_DATA_FEED} is true or false, not {text}"
            ))
        });
    }
    if key.value.eq_ignore_ascii_case(PATCH_MAX_SHARE) {
        if text.eq_ignore_ascii_case("default") {
            return Ok(TableProperty::PatchMaxShare(None));
        }
        return (parse_share(&text))
            .map(|share| TableProperty::PatchMaxShare(Some(share)))
            .ok_or_else(|| {
                refused(format!(
                    "SET TBLPROPERTIES: {PATCH_MAX_SHARE} is a share between 0 and 1, or \
                     default, not {text}"
                ))
            });
    }
    Err(refused(format!(
        "SET TBLPROPERTIES: natal has no table property '{}' (it has {CHANGE_DATA_FEED} and \
         {PATCH_MAX_SHARE})",
        key.value
    )))
}

/// The table property that sets an UPDATE's patch share (`Table::set_patch_max_share`), in
/// `SET TBLPROPERTIES` and `CREATE EXTERNAL TABLE … OPTIONS`.
pub(in crate::datafusion) const PATCH_MAX_SHARE: &str = "patch_max_share";

/// A share between 0 and 1.
pub(in crate::datafusion) fn parse_share(text: &str) -> Option<f64> {
    (text.trim().parse::<f64>().ok()).filter(|&share| crate::format::is_patch_share(share))
}

/// The table property that starts or stops change data capture, in `SET TBLPROPERTIES` and
/// `CREATE EXTERNAL TABLE … OPTIONS`.
pub(in crate::datafusion) const CHANGE_DATA_FEED: &str = "change_data_feed";

/// `true` or `false`, in any case.
pub(in crate::datafusion) fn parse_switch(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Where `position` (MySQL's `FIRST` or `AFTER c`) moves a column.
fn moved_to(position: &MySQLColumnPosition, column: &impl Fn(&Ident) -> String) -> Position {
    match position {
        MySQLColumnPosition::First => Position::First,
        MySQLColumnPosition::After(ident) => Position::After(column(ident)),
    }
}

/// The changes `MODIFY COLUMN name data_type options position` (or the part of `CHANGE
/// COLUMN` after its rename) asks for: the type (widened, or the same), `NULL` (relaxed;
/// `NOT NULL` only if it is so already, which the change cannot check here: natal never
/// tightens), then the move.
fn modified(
    name: &str,
    data_type: DataType,
    options: &[ColumnOption],
    position: Option<Position>,
) -> Result<Vec<SchemaChange>> {
    let mut changes = vec![SchemaChange::SetDataType {
        name: name.into(),
        data_type,
    }];
    for option in options {
        match option {
            ColumnOption::Null => changes.push(SchemaChange::DropNotNull { name: name.into() }),
            ColumnOption::NotNull => {
                return Err(refused(format!(
                    "MODIFY COLUMN {name} ... NOT NULL: natal only relaxes nullability (omit \
                     NOT NULL to keep it as it is)"
                )))
            }
            other => {
                return Err(refused(format!(
                    "MODIFY COLUMN {name} ... {other} is not supported"
                )))
            }
        }
    }
    if let Some(to) = position {
        changes.push(SchemaChange::Move {
            name: name.into(),
            to,
        });
    }
    Ok(changes)
}

/// Adds `column` (name, type, nullable) with the value of `default` (SQL) for every row:
/// evaluated per row over the table's columns and `_rowid` (natal's extension of SQL's
/// constant DEFAULT), cast to the column's type. A default naming no column is also the
/// column's default for later INSERTs that omit it.
async fn add_with_values(
    ctx: &SessionContext,
    natal: &NatalTableProvider,
    (name, data_type, nullable): (String, DataType, bool),
    default: &str,
) -> Result<()> {
    let bad_default =
        |reason: String| refused(format!("ADD COLUMN {name} DEFAULT {default}: {reason}"));
    let table_schema = DFSchema::try_from(natal.predicate_schema().as_ref().clone())?;
    let expr = ctx
        .parse_sql_expr(default, &table_schema)
        .map_err(|e| bad_default(e.to_string()))?;
    let from = expr
        .get_type(&table_schema)
        .map_err(|e| bad_default(e.to_string()))?;
    if !can_cast_types(&from, &data_type) {
        return Err(bad_default(format!(
            "a {from} cannot be cast to {data_type}"
        )));
    }
    let expr = expr.cast_to(&data_type, &table_schema)?;
    // The batch the values are computed from: the columns the default names, then _rowid.
    let referenced = expr.column_refs();
    if referenced.iter().any(|c| c.name == ROW_ADDR) {
        return Err(bad_default(
            "a row's address is not one of its values".into(),
        ));
    }
    let mut input_fields: Vec<arrow::datatypes::FieldRef> = table_schema
        .fields()
        .iter()
        .filter(|f| f.name() != ROW_ID && f.name() != ROW_ADDR)
        .filter(|f| referenced.iter().any(|c| &c.name == f.name()))
        .cloned()
        .collect();
    let inputs: Vec<String> = input_fields.iter().map(|f| f.name().clone()).collect();
    input_fields.push(Arc::new(arrow::datatypes::Field::new(
        ROW_ID,
        DataType::UInt64,
        false,
    )));
    let input_schema = DFSchema::try_from(arrow::datatypes::Schema::new(input_fields))?;
    let physical = ctx.create_physical_expr(expr.clone(), &input_schema)?;
    let default_value = match referenced.is_empty() && !expr.is_volatile() {
        true => Some(constant_text(physical.as_ref())?),
        false => None,
    };
    let column = NewColumn {
        name: name.clone(),
        data_type,
        nullable,
        inputs,
        default_value,
        blob: None,
    };
    let change = format!("ADD COLUMN {name} DEFAULT {default}");
    let values = move |batch: &RecordBatch| -> crate::Result<ArrayRef> {
        physical
            .evaluate(batch)
            .and_then(|v| v.into_array(batch.num_rows()))
            .map_err(|e| crate::Error::SchemaChange {
                change: change.clone(),
                reason: format!("computing a row's value: {e}"),
            })
    };
    natal
        .table()
        .add_column_with_values(column, &values)
        .await?;
    Ok(())
}

/// A constant expression's value (it reads no column, so one row of none will do) as the
/// text natal stores for a column's default.
fn constant_text(expr: &dyn datafusion::physical_plan::PhysicalExpr) -> Result<String> {
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(arrow::datatypes::Schema::empty()),
        vec![],
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    let value = expr.evaluate(&one_row)?.into_array(1)?;
    value_text(&value)
}

/// The text natal keeps for a default of the value `value[0]` (already of its column's type;
/// `Field::default_value`).
pub(in crate::datafusion) fn value_text(value: &arrow::array::ArrayRef) -> Result<String> {
    let text = arrow::compute::cast(value, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    if text.is_null(0) {
        return Err(refused(
            "a DEFAULT of NULL is every column's default: omit it",
        ));
    }
    Ok(text.value(0).to_string())
}

/// The Arrow type DataFusion gives the SQL type `sql` (as a CAST reads it), so `ALTER`, the
/// `natal_*_column` functions and `CREATE` agree on what `INT` or `VARCHAR` is.
pub(in crate::datafusion) fn sql_type(
    state: &datafusion::execution::session_state::SessionState,
    sql: &str,
) -> Result<DataType> {
    let empty = DFSchema::empty();
    state
        .create_logical_expr(&format!("CAST(NULL AS {sql})"), &empty)?
        .get_type(&empty)
}
