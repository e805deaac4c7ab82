//! [`DmlGuard`]: refuses `DELETE`/`UPDATE` statements whose row selection DataFusion 55
//! cannot hand to a table provider.
//!
//! DataFusion passes `delete_from`/`update` only the filters that mention the target table
//! alone. A `WHERE x IN (SELECT ...)`, `EXISTS (...)`, scalar subquery or `UPDATE ... FROM`
//! join is decorrelated into a join and reaches the provider as *no filter at all*
//! (apache/datafusion#24654) — which would touch every row. The guard runs in the analyzer,
//! before decorrelation, and turns such statements into a clear error.

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, LogicalPlan, WriteOp};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule that refuses the DML statements natal cannot run yet (see the module).
#[derive(Debug, Default)]
pub struct DmlGuard;

fn has_subquery(expr: &Expr) -> Result<bool> {
    expr.exists(|e| {
        Ok(matches!(
            e,
            Expr::InSubquery(_)
                | Expr::Exists(_)
                | Expr::ScalarSubquery(_)
                | Expr::SetComparison(_)
        ))
    })
}

impl AnalyzerRule for DmlGuard {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let mut refusal = None;
        plan.apply(|node| {
            let LogicalPlan::Dml(dml) = node else {
                return Ok(TreeNodeRecursion::Continue);
            };
            let verb = match dml.op {
                WriteOp::Delete => "DELETE",
                WriteOp::Update => "UPDATE",
                _ => return Ok(TreeNodeRecursion::Continue),
            };
            dml.input.apply(|inner| {
                let joined = matches!(inner, LogicalPlan::Join(_) | LogicalPlan::Subquery(_));
                let mut nested = false;
                for expr in inner.expressions() {
                    nested |= has_subquery(&expr)?;
                }
                if joined || nested {
                    refusal = Some(format!(
                        "{verb} on '{}' selects rows through a subquery or join, which DataFusion 55 \
                         does not pass to the table (apache/datafusion#24654) and would apply to every row; \
                         select the rows first, then {verb} by key or by _rowid IN (...)",
                        dml.table_name
                    ));
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
            Ok(TreeNodeRecursion::Stop)
        })?;
        match refusal {
            Some(message) => Err(DataFusionError::Plan(message)),
            None => Ok(plan),
        }
    }

    fn name(&self) -> &str {
        "natal_dml_guard"
    }
}
