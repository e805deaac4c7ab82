//! Column defaults and constraints between DataFusion and natal: what a `CREATE TABLE` (or
//! `CREATE EXTERNAL TABLE ... STORED AS NATAL`) declared, as natal keeps it, and back as the
//! `Expr`s and `Constraints` a provider hands DataFusion's planner.
//!
//! A default that is a literal is kept as its value; any other (`now()`, `random()`,
//! `1 + 2`) as SQL text that each INSERT plans again, so `now()` is the time of the INSERT,
//! as in DataFusion's own tables. Such text is planned with DataFusion's built-in functions:
//! a default calling a function registered only in one session is refused at `CREATE`.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Schema as ArrowSchema};
use datafusion::common::{Constraint as DfConstraint, Constraints, DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::{Expr, ExprSchemable};

use crate::format::{ConstraintKind, Schema};
use crate::table::{ColumnDefault, Declarations, TableConstraint};

/// The state defaults' SQL is planned in: DataFusion's built-in functions, nothing else.
static BUILT_INS: LazyLock<SessionState> =
    LazyLock::new(|| SessionStateBuilder::new().with_default_features().build());

/// What `defaults` (a column name's default, as DataFusion planned it) and `constraints`
/// (over `schema`'s column indices) declare, as natal keeps it.
pub(in crate::datafusion) fn declarations<'a>(
    schema: &ArrowSchema,
    defaults: impl IntoIterator<Item = (&'a str, &'a Expr)>,
    constraints: Option<&Constraints>,
) -> Result<Declarations> {
    let mut declared = Declarations::default();
    for (name, expr) in defaults {
        let field = schema.field_with_name(name).map_err(|_| {
            DataFusionError::Plan(format!("a DEFAULT for no column named '{name}'"))
        })?;
        if let Some(default) = column_default(name, expr, field.data_type())? {
            declared.defaults.push((name.to_string(), default));
        }
    }
    let names = |indices: &[usize]| -> Result<Vec<String>> {
        indices
            .iter()
            .map(|&i| {
                schema
                    .fields()
                    .get(i)
                    .map(|f| f.name().clone())
                    .ok_or_else(|| DataFusionError::Plan(format!("a constraint over column {i}")))
            })
            .collect()
    };
    for constraint in constraints.into_iter().flat_map(|c| c.iter()) {
        declared.constraints.push(match constraint {
            DfConstraint::PrimaryKey(indices) => TableConstraint::PrimaryKey(names(indices)?),
            DfConstraint::Unique(indices) => TableConstraint::Unique(names(indices)?),
        });
    }
    Ok(declared)
}

/// The default `expr` declares for column `name` of type `data_type`.
/// `None` for `DEFAULT NULL`, which every column has.
fn column_default(name: &str, expr: &Expr, data_type: &DataType) -> Result<Option<ColumnDefault>> {
    let refused =
        |reason: String| DataFusionError::Plan(format!("column {name}'s DEFAULT {expr} {reason}"));
    if let Some(value) = literal(expr) {
        if value.is_null() {
            // NULL is what a column without a default gets.
            return Ok(None);
        }
        let options = arrow::compute::CastOptions {
            safe: false,
            ..Default::default()
        };
        let typed = value
            .to_array()
            .and_then(|array| {
                Ok(arrow::compute::cast_with_options(
                    &array, data_type, &options,
                )?)
            })
            .map_err(|e| refused(format!("is not a {data_type}: {e}")))?;
        return super::alter::value_text(&typed).map(|text| Some(ColumnDefault::Value(text)));
    }
    let sql = datafusion::sql::unparser::expr_to_sql(expr)
        .map_err(|e| refused(format!("cannot be kept as SQL: {e}")))?
        .to_string();
    let planned = plan_default(&sql).map_err(|e| {
        refused(format!(
            "cannot be planned outside this session (natal keeps defaults of DataFusion's \
             built-in functions): {e}"
        ))
    })?;
    planned
        .get_type(&DFSchema::empty())
        .map_err(|e| refused(e.to_string()))?;
    Ok(Some(ColumnDefault::Expression(sql)))
}

/// The value of a literal, under any casts and aliases.
fn literal(expr: &Expr) -> Option<&ScalarValue> {
    match expr {
        Expr::Literal(value, _) => Some(value),
        Expr::Alias(alias) => literal(&alias.expr),
        Expr::Cast(cast) => literal(&cast.expr),
        Expr::TryCast(cast) => literal(&cast.expr),
        _ => None,
    }
}

/// A kept default expression planned again, as each INSERT plans it.
fn plan_default(sql: &str) -> Result<Expr> {
    BUILT_INS.create_logical_expr(sql, &DFSchema::empty())
}

/// The defaults of `schema`'s columns as DataFusion's INSERT planner takes them, by column
/// name; and the first default that no longer plans, as an error for writes to give.
pub(in crate::datafusion) fn planned_defaults(
    schema: &Schema,
) -> (HashMap<String, Expr>, Option<String>) {
    let mut defaults = HashMap::new();
    let mut broken = None;
    for field in &schema.fields {
        if let Some(sql) = &field.default_expression {
            match plan_default(sql) {
                Ok(expr) => {
                    defaults.insert(field.name.clone(), expr);
                }
                Err(e) => {
                    broken.get_or_insert(format!(
                        "column {}'s DEFAULT {sql} no longer plans: {e}",
                        field.name
                    ));
                }
            }
            continue;
        }
        // A default's text was checked when the manifest was read.
        let value = field
            .default_array()
            .ok()
            .flatten()
            .and_then(|array| ScalarValue::try_from_array(&array, 0).ok());
        if let Some(value) = value {
            defaults.insert(field.name.clone(), datafusion::prelude::lit(value));
        }
    }
    (defaults, broken)
}

/// `schema`'s constraints over its columns' positions, as DataFusion's planner takes them.
pub(in crate::datafusion) fn constraints(schema: &Schema) -> Constraints {
    let position = |id: &u32| schema.fields.iter().position(|f| f.id == *id);
    Constraints::new_unverified(
        schema
            .constraints
            .iter()
            .filter_map(|c| {
                let indices = c
                    .field_ids
                    .iter()
                    .map(position)
                    .collect::<Option<Vec<_>>>()?;
                Some(match c.kind {
                    ConstraintKind::PrimaryKey => DfConstraint::PrimaryKey(indices),
                    ConstraintKind::Unique => DfConstraint::Unique(indices),
                })
            })
            .collect(),
    )
}

/// `declarations` with the defaults of a statement whose columns are `schema`: DataFusion
/// hands a provider's defaults by name, one lookup per column.
pub(in crate::datafusion) fn provider_declarations(
    provider: &dyn datafusion::catalog::TableProvider,
    schema: &Arc<ArrowSchema>,
) -> Result<Declarations> {
    let defaults: Vec<(&str, &Expr)> = schema
        .fields()
        .iter()
        .filter_map(|f| Some((f.name().as_str(), provider.get_column_default(f.name())?)))
        .collect();
    declarations(schema, defaults, provider.constraints())
}
