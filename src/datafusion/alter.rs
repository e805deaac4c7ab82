//! `ALTER TABLE` on natal tables, which DataFusion 55's planner refuses: sqlparser's
//! statement turned into [`SchemaChange`]s and committed as one version
//! ([`Table::alter`](crate::Table::alter)). Reached through natal's SQL entry point.

use datafusion::catalog::TableProvider;
use datafusion::dataframe::DataFrame;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, ColumnOption, Ident,
};

use super::NatalTableProvider;
use crate::format::SchemaChange;

fn refused(what: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Plan(format!("ALTER TABLE: {what}"))
}

/// Runs `alter`: every change it lists, in one version.
pub(super) async fn alter_table(ctx: &SessionContext, alter: &AlterTable) -> Result<DataFrame> {
    let name = alter.name.to_string();
    let provider = match ctx.table_provider(name.as_str()).await {
        Ok(provider) => provider,
        Err(_) if alter.if_exists => return ctx.read_empty(),
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
    let normalize = ctx
        .state()
        .config_options()
        .sql_parser
        .enable_ident_normalization;
    let column = |ident: &Ident| match ident.quote_style {
        None if normalize => ident.value.to_lowercase(),
        _ => ident.value.clone(),
    };
    let mut changes = Vec::new();
    for operation in &alter.operations {
        match operation {
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
                if column_position.is_some() {
                    return Err(refused("a column is added last (no FIRST or AFTER)"));
                }
                for option in &column_def.options {
                    match &option.option {
                        ColumnOption::Null => {}
                        ColumnOption::NotNull => {
                            return Err(refused(format!(
                                "cannot add NOT NULL column {name}: rows that exist have no \
                                 value for it, so an added column is nullable"
                            )))
                        }
                        other => {
                            return Err(refused(format!(
                                "ADD COLUMN {name} ... {other} is not supported"
                            )))
                        }
                    }
                }
                let data_type = arrow_type(ctx, &column_def.data_type).await?;
                changes.push(SchemaChange::AddColumn { name, data_type });
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
                    changes.push(SchemaChange::DropColumn { name });
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => changes.push(SchemaChange::RenameColumn {
                from: column(old_column_name),
                to: column(new_column_name),
            }),
            AlterTableOperation::AlterColumn { column_name, op } => {
                let name = column(column_name);
                changes.push(match op {
                    AlterColumnOperation::DropNotNull => SchemaChange::DropNotNull { name },
                    AlterColumnOperation::SetDataType {
                        data_type,
                        using: None,
                        ..
                    } => SchemaChange::SetDataType {
                        name,
                        data_type: arrow_type(ctx, data_type).await?,
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
    natal.table().alter(changes).await?;
    ctx.read_empty()
}

/// The Arrow type DataFusion gives SQL type `sql` (as in a CAST), so `ALTER` and `CREATE`
/// agree on what `INT` or `VARCHAR` is.
async fn arrow_type(
    ctx: &SessionContext,
    sql: &datafusion::sql::sqlparser::ast::DataType,
) -> Result<arrow::datatypes::DataType> {
    let probe = ctx.sql(&format!("SELECT CAST(NULL AS {sql})")).await?;
    Ok(probe.schema().field(0).data_type().clone())
}
