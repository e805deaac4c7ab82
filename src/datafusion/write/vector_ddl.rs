//! `VECTOR(n)` in SQL, a type DataFusion's planner does not know: wherever a statement names
//! it (a `CREATE TABLE` column, `ALTER TABLE ... ADD COLUMN` or `ALTER COLUMN ... SET DATA
//! TYPE`, a `CAST`), it becomes `REAL[n]`, which DataFusion plans as natal's vector type
//! `FixedSizeList<Float32, n>` (`table::vector::vector_type`).

use std::ops::ControlFlow;

use datafusion::error::{DataFusionError, Result};
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    self, AlterColumnOperation, AlterTableOperation, ArrayElemTypeDef, Expr, VisitMut, VisitorMut,
};

/// The largest dimension a vector column may have.
pub const MAX_DIMENSION: u64 = 65_536;

/// `statement` with every `VECTOR(n)` as `REAL[n]`, and whether it named one; an error for a
/// `VECTOR` without a dimension from 1 to [`MAX_DIMENSION`].
pub(in crate::datafusion) fn rewrite_vector_types(statement: &mut Statement) -> Result<bool> {
    let Statement::Statement(inner) = statement else {
        if let Statement::Explain(explain) = statement {
            return rewrite_vector_types(&mut explain.statement);
        }
        return Ok(false);
    };
    let mut visitor = VectorTypes::default();
    match inner.visit(&mut visitor) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(visitor.named),
    }
}

/// Whether `statement` names `VECTOR`, rightly or not: natal runs it (DataFusion would not
/// know the type).
pub(in crate::datafusion) fn names_vector_type(statement: &Statement) -> bool {
    let mut copy = statement.clone();
    rewrite_vector_types(&mut copy).unwrap_or(true)
}

#[derive(Default)]
struct VectorTypes {
    named: bool,
}

impl VectorTypes {
    fn fix(&mut self, data_type: &mut ast::DataType) -> ControlFlow<DataFusionError> {
        match as_vector(data_type) {
            None => ControlFlow::Continue(()),
            Some(Err(error)) => ControlFlow::Break(error),
            Some(Ok(real)) => {
                *data_type = real;
                self.named = true;
                ControlFlow::Continue(())
            }
        }
    }
}

impl VisitorMut for VectorTypes {
    type Break = DataFusionError;

    fn pre_visit_statement(&mut self, statement: &mut ast::Statement) -> ControlFlow<Self::Break> {
        match statement {
            ast::Statement::CreateTable(create) => {
                for column in &mut create.columns {
                    self.fix(&mut column.data_type)?;
                }
            }
            ast::Statement::AlterTable(alter) => {
                for operation in &mut alter.operations {
                    match operation {
                        AlterTableOperation::AddColumn { column_def, .. } => {
                            self.fix(&mut column_def.data_type)?;
                        }
                        AlterTableOperation::AlterColumn {
                            op: AlterColumnOperation::SetDataType { data_type, .. },
                            ..
                        } => self.fix(data_type)?,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<Self::Break> {
        if let Expr::Cast { data_type, .. } = expr {
            self.fix(data_type)?;
        }
        ControlFlow::Continue(())
    }
}

/// `REAL[n]` for `VECTOR(n)`; `None` for any other type.
fn as_vector(data_type: &ast::DataType) -> Option<Result<ast::DataType>> {
    let ast::DataType::Custom(name, modifiers) = data_type else {
        return None;
    };
    if !name.to_string().eq_ignore_ascii_case("vector") {
        return None;
    }
    let dimension = match modifiers.as_slice() {
        [n] => n.trim().parse::<u64>().ok(),
        _ => None,
    };
    Some(match dimension {
        Some(n) if (1..=MAX_DIMENSION).contains(&n) => Ok(ast::DataType::Array(
            ArrayElemTypeDef::SquareBracket(Box::new(ast::DataType::Real), Some(n)),
        )),
        _ => Err(DataFusionError::Plan(format!(
            "{data_type}: a VECTOR column takes its dimension, from 1 to {MAX_DIMENSION} \
             (VECTOR(128))"
        ))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    fn rewritten(sql: &str) -> Result<String> {
        let state = SessionContext::new().state();
        let mut statement = super::super::statement::parse(&state, sql)?.remove(0);
        rewrite_vector_types(&mut statement)?;
        Ok(statement.to_string())
    }

    #[test]
    fn vector_types_become_fixed_size_lists_of_reals() {
        let sql = rewritten("CREATE TABLE t (id INT, e VECTOR(3), f vector(2))").unwrap();
        assert_eq!(sql, "CREATE TABLE t (id INT, e REAL[3], f REAL[2])");
        let sql = rewritten("ALTER TABLE t ADD COLUMN e VECTOR(4)").unwrap();
        assert_eq!(sql, "ALTER TABLE t ADD COLUMN e REAL[4]");
        let sql = rewritten("SELECT CAST(x AS VECTOR(2)) FROM t").unwrap();
        assert_eq!(sql, "SELECT CAST(x AS REAL[2]) FROM t");
        let sql = rewritten("EXPLAIN CREATE TABLE t (e VECTOR(8))").unwrap();
        assert!(sql.contains("REAL[8]"), "{sql}");
        assert_eq!(rewritten("SELECT 1").unwrap(), "SELECT 1");
    }

    #[test]
    fn statements_naming_vector_types_are_natal_s() {
        let state = SessionContext::new().state();
        let named = |sql: &str| {
            let statement = super::super::statement::parse(&state, sql)
                .unwrap()
                .remove(0);
            names_vector_type(&statement)
        };
        assert!(named("CREATE TABLE t (e VECTOR(3))"));
        assert!(named("CREATE TABLE t (e VECTOR(0))"));
        assert!(named("SELECT CAST(x AS VECTOR(3)) FROM t"));
        assert!(!named("CREATE TABLE t (e REAL[3])"));
        assert!(!named("SELECT 1"));
    }

    #[test]
    fn a_vector_without_a_dimension_in_range_is_refused() {
        for sql in [
            "CREATE TABLE t (e VECTOR(0))",
            "CREATE TABLE t (e VECTOR(70000))",
            "CREATE TABLE t (e VECTOR(x))",
            "CREATE TABLE t (e VECTOR(2, 3))",
        ] {
            let error = rewritten(sql).unwrap_err().to_string();
            assert!(error.contains("takes its dimension"), "{sql}: {error}");
        }
    }
}
