//! `_rowid IN (<literal ids>)` as one expression node: the [`FoldRowIdLists`] rewrite turns
//! the list into a single `List<UInt64>` literal argument of [`RowIdIn`]
//! (`natal_rowid_in(_rowid, [ids])`).
//!
//! Why: DataFusion plans an `IN` list node by node. For a take of 1,000 ids that was ~3.5 ms
//! of a ~5 ms plan — type coercion casting each literal to `UInt64`, then every optimizer
//! pass visiting, simplifying and hashing 1,000 children, then a physical `IN` set built only
//! to be dropped, since natal's scan answers the filter from the relocation view. One literal
//! is one node to every pass. The rewrite runs first in the analyzer (a function rewrite,
//! before type coercion) and only where the list is non-negative integer literals on a
//! `UInt64` column named `_rowid`; anything else is left to DataFusion as written.
//!
//! The function is a real one: where no natal scan takes the filter (above a join, on
//! another engine's `_rowid`) it is evaluated row by row with the same result as the `IN`
//! list, including `NULL` for a `NULL` id. What it costs another table in the same session
//! with a `UInt64` `_rowid` column: DataFusion's own pruning does not see through the call,
//! so such a table reads every row group for the filter instead of the ones whose min/max
//! could match.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::{InList, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::FunctionRewrite;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use roaring::RoaringTreemap;

use crate::table::ROW_ID;

/// `natal_rowid_in(_rowid, ids)`: whether each row id is one of `ids` (a `List<UInt64>`
/// literal); `NULL` where the id is.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RowIdIn {
    signature: Signature,
}

impl RowIdIn {
    pub const NAME: &'static str = "natal_rowid_in";

    fn new() -> Self {
        Self {
            // The rewrite builds both arguments with their final types; nothing to coerce.
            signature: Signature::any(2, Volatility::Immutable),
        }
    }

    /// The function, as a call on `ids` of `row_id`.
    pub fn call(row_id: Expr, ids: impl IntoIterator<Item = u64>) -> Expr {
        let ids: Vec<ScalarValue> = ids
            .into_iter()
            .map(|v| ScalarValue::UInt64(Some(v)))
            .collect();
        let list = ScalarValue::List(ScalarValue::new_list_nullable(&ids, &DataType::UInt64));
        Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(Self::new())),
            vec![row_id, Expr::Literal(list, None)],
        ))
    }
}

fn is_id_list(data_type: &DataType) -> bool {
    matches!(data_type, DataType::List(item) if item.data_type() == &DataType::UInt64)
}

/// The sorted, distinct ids of a `List<UInt64>` value.
fn ids_of_list(value: &ScalarValue) -> Option<Vec<u64>> {
    let ScalarValue::List(list) = value else {
        return None;
    };
    if list.len() != 1 || list.is_null(0) {
        return None;
    }
    let values = list.value(0);
    let values = values.as_primitive_opt::<UInt64Type>()?;
    let mut ids: Vec<u64> = values.iter().collect::<Option<_>>()?;
    ids.sort_unstable();
    ids.dedup();
    Some(ids)
}

impl ScalarUDFImpl for RowIdIn {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::UInt64, list] if is_id_list(list) => Ok(DataType::Boolean),
            _ => Err(DataFusionError::Plan(format!(
                "{}(row id, ids) takes a UInt64 row id and a list of UInt64 ids, not {arg_types:?}",
                Self::NAME
            ))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let malformed = || {
            DataFusionError::Execution(format!(
                "{} takes a UInt64 row id and a literal list of ids",
                Self::NAME
            ))
        };
        let [row_ids, ColumnarValue::Scalar(list)] = args.args.as_slice() else {
            return Err(malformed());
        };
        let wanted = ids_of_list(list).ok_or_else(malformed)?;
        let row_ids = row_ids.to_array(args.number_rows)?;
        let row_ids: &UInt64Array = row_ids.as_primitive_opt().ok_or_else(malformed)?;
        let found: BooleanArray = row_ids
            .iter()
            .map(|id| id.map(|id| wanted.binary_search(&id).is_ok()))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(found)))
    }
}

/// The ids a `natal_rowid_in` call on `_rowid` selects; `None` for any other expression.
pub(crate) fn folded_row_ids(expr: &Expr) -> Option<RoaringTreemap> {
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    match (call.name(), call.args.as_slice()) {
        (RowIdIn::NAME, [Expr::Column(column), Expr::Literal(list, _)])
            if column.name == ROW_ID =>
        {
            // Sorted and distinct: built in one pass, not id by id.
            RoaringTreemap::from_sorted_iter(ids_of_list(list)?).ok()
        }
        _ => None,
    }
}

/// A non-negative integer literal as an id.
fn literal_id(expr: &Expr) -> Option<u64> {
    let Expr::Literal(value, _) = expr else {
        return None;
    };
    let value = match value {
        ScalarValue::Int8(Some(v)) => i64::from(*v),
        ScalarValue::Int16(Some(v)) => i64::from(*v),
        ScalarValue::Int32(Some(v)) => i64::from(*v),
        ScalarValue::Int64(Some(v)) => *v,
        ScalarValue::UInt8(Some(v)) => return Some(u64::from(*v)),
        ScalarValue::UInt16(Some(v)) => return Some(u64::from(*v)),
        ScalarValue::UInt32(Some(v)) => return Some(u64::from(*v)),
        ScalarValue::UInt64(Some(v)) => return Some(*v),
        _ => return None,
    };
    u64::try_from(value).ok()
}

/// Rewrites `_rowid [NOT] IN (<non-negative integer literals>)` on a `UInt64` `_rowid` into
/// `[NOT] natal_rowid_in(_rowid, [ids])`. Registered by [`super::register`].
#[derive(Debug, Default)]
pub struct FoldRowIdLists;

impl FunctionRewrite for FoldRowIdLists {
    fn name(&self) -> &str {
        "natal_fold_rowid_lists"
    }

    fn rewrite(
        &self,
        expr: Expr,
        schema: &DFSchema,
        _config: &ConfigOptions,
    ) -> Result<Transformed<Expr>> {
        let Expr::InList(InList {
            expr: column,
            list,
            negated,
        }) = &expr
        else {
            return Ok(Transformed::no(expr));
        };
        let on_row_ids = matches!(column.as_ref(), Expr::Column(c) if c.name == ROW_ID)
            && matches!(column.get_type(schema), Ok(DataType::UInt64));
        if !on_row_ids {
            return Ok(Transformed::no(expr));
        }
        let Some(ids) = list.iter().map(literal_id).collect::<Option<Vec<u64>>>() else {
            return Ok(Transformed::no(expr));
        };
        let call = RowIdIn::call(column.as_ref().clone(), ids);
        Ok(Transformed::yes(if *negated { !call } else { call }))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::prelude::{col, lit};

    use super::*;

    fn schema(row_id_type: DataType) -> DFSchema {
        let fields = vec![
            Field::new(ROW_ID, row_id_type, true),
            Field::new("n", DataType::Int64, true),
        ];
        DFSchema::try_from(Schema::new(fields)).expect("a valid schema")
    }

    fn rewrite(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
        FoldRowIdLists
            .rewrite(expr, schema, &ConfigOptions::default())
            .expect("the rewrite never fails")
    }

    #[test]
    fn only_literal_id_lists_on_uint64_row_ids_fold() {
        let ids = schema(DataType::UInt64);
        let list = col(ROW_ID).in_list(vec![lit(5i64), lit(1u64), lit(5i32)], false);
        let folded = rewrite(list, &ids);
        assert!(folded.transformed);
        let expected: RoaringTreemap = [1u64, 5].into_iter().collect();
        assert_eq!(folded_row_ids(&folded.data), Some(expected));

        let negated = rewrite(col(ROW_ID).in_list(vec![lit(1i64)], true), &ids);
        assert!(matches!(&negated.data, Expr::Not(inner) if folded_row_ids(inner).is_some()));
        // A negated list is no id set: the scan evaluates it.
        assert_eq!(folded_row_ids(&negated.data), None);

        let untouched = [
            (
                col(ROW_ID).in_list(vec![lit(-1i64), lit(2i64)], false),
                &ids,
            ),
            (col(ROW_ID).in_list(vec![lit("2")], false), &ids),
            (col(ROW_ID).in_list(vec![lit(2i64), col("n")], false), &ids),
            (col("n").in_list(vec![lit(2i64)], false), &ids),
            (
                col(ROW_ID).in_list(vec![lit(2i64)], false),
                &schema(DataType::Int64),
            ),
        ];
        for (expr, schema) in untouched {
            let out = rewrite(expr.clone(), schema);
            assert!(!out.transformed, "{expr} was folded");
            assert_eq!(out.data, expr);
        }
    }

    #[test]
    fn evaluates_as_the_in_list_would() {
        let call = RowIdIn::call(col(ROW_ID), [7, 1, 1]);
        let Expr::ScalarFunction(call) = call else {
            panic!("a function call")
        };
        let [_, Expr::Literal(list, _)] = call.args.as_slice() else {
            panic!("a literal list argument")
        };
        let row_ids = UInt64Array::from(vec![Some(1), None, Some(3), Some(7)]);
        let args = ScalarFunctionArgs {
            args: vec![
                ColumnarValue::Array(Arc::new(row_ids)),
                ColumnarValue::Scalar(list.clone()),
            ],
            arg_fields: vec![
                Arc::new(Field::new(ROW_ID, DataType::UInt64, true)),
                Arc::new(Field::new("ids", list.data_type(), true)),
            ],
            number_rows: 4,
            return_field: Arc::new(Field::new("in", DataType::Boolean, true)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        let ColumnarValue::Array(found) = call.func.invoke_with_args(args).expect("evaluates")
        else {
            panic!("an array result")
        };
        let expected = BooleanArray::from(vec![Some(true), None, Some(false), Some(true)]);
        assert_eq!(found.as_boolean(), &expected);

        assert!(call
            .func
            .return_type(&[DataType::Int64, list.data_type()])
            .is_err());
    }
}
