//! `_rowid IN (<literal ids>)` as one expression node: the [`FoldRowIdLists`] rewrite turns
//! the list into a call of [`RowIdIn`] on `_rowid` that holds the ids itself
//! (`natal_rowid_in[ids](_rowid)`).
//!
//! Why: DataFusion plans an `IN` list node by node. For a take of 1,000 ids that was ~3.5 ms
//! of a ~5 ms plan — type coercion casting each literal to `UInt64`, then every optimizer
//! pass visiting, simplifying and hashing 1,000 children, then a physical `IN` set built only
//! to be dropped, since natal's scan answers the filter from the relocation view. The ids
//! ride in the function, not in a list literal argument, because passes that name an
//! expression (type coercion asks each one's name) would format every id of a literal each
//! time: ~13% of planning a take of 1,000 ids. The function's name shows the ids, up to 16
//! of them; a longer list shows its first few, its length and a digest, so two different
//! lists never share a name. The rewrite runs first in the analyzer (a function rewrite,
//! before type coercion) and only where the list is non-negative integer literals on a
//! `UInt64` column named `_rowid`; anything else is left to DataFusion as written.
//!
//! The function is a real one: where no natal scan takes the filter (above a join, on
//! another engine's `_rowid`) it is evaluated row by row with the same result as the `IN`
//! list, including `NULL` for a `NULL` id. What it costs another table in the same session
//! with a `UInt64` `_rowid` column: DataFusion's own pruning does not see through the call,
//! so such a table reads every row group for the filter instead of the ones whose min/max
//! could match.

use std::any::Any;
use std::fmt::Write;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{AsArray, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::DataType;
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

/// `natal_rowid_in[ids](_rowid)`: whether each row id is one of the ids the function holds;
/// `NULL` where the id is.
#[derive(Debug)]
pub struct RowIdIn {
    signature: Signature,
    /// Sorted and distinct.
    ids: Arc<[u64]>,
    /// The function's name, showing its ids (see the module header).
    name: String,
}

impl PartialEq for RowIdIn {
    fn eq(&self, other: &Self) -> bool {
        self.ids == other.ids
    }
}

impl Eq for RowIdIn {}

impl Hash for RowIdIn {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The name is derived from the ids: equal ids, equal names.
        self.name.hash(state);
    }
}

/// Lists up to this long are named with every id.
const NAMED_IN_FULL: usize = 16;

impl RowIdIn {
    /// The function's name in plans.
    pub const NAME: &'static str = "natal_rowid_in";

    /// The function, as a call on `row_id` (the ids in any order, repeats allowed).
    pub fn call(row_id: Expr, ids: impl IntoIterator<Item = u64>) -> Expr {
        Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(Self::function(ids)),
            vec![row_id],
        ))
    }

    /// The function holding `ids` (in any order, repeats allowed).
    pub fn function(ids: impl IntoIterator<Item = u64>) -> ScalarUDF {
        let mut ids: Vec<u64> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        ScalarUDF::new_from_impl(Self {
            // One UInt64 argument, built by the rewrite with its final type.
            signature: Signature::any(1, Volatility::Immutable),
            name: name_of(&ids),
            ids: ids.into(),
        })
    }

    /// The ids it holds, sorted and distinct.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }
}

/// `natal_rowid_in[1, 5]`, or for a long list `natal_rowid_in[1, 5, 9, 12, … 1000 ids
/// #<digest>]`.
fn name_of(ids: &[u64]) -> String {
    let shown = if ids.len() <= NAMED_IN_FULL {
        ids
    } else {
        &ids[..4]
    };
    let shown: Vec<String> = shown.iter().map(u64::to_string).collect();
    let mut name = format!("{}[{}", RowIdIn::NAME, shown.join(", "));
    if ids.len() > NAMED_IN_FULL {
        let mut digest = std::hash::DefaultHasher::new();
        ids.hash(&mut digest);
        let _ = write!(name, ", … {} ids #{:016x}", ids.len(), digest.finish());
    }
    name.push(']');
    name
}

impl ScalarUDFImpl for RowIdIn {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::UInt64] => Ok(DataType::Boolean),
            _ => Err(DataFusionError::Plan(format!(
                "{} takes a UInt64 row id, not {arg_types:?}",
                Self::NAME
            ))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let malformed =
            || DataFusionError::Execution(format!("{} takes a UInt64 row id", Self::NAME));
        let [row_ids] = args.args.as_slice() else {
            return Err(malformed());
        };
        let row_ids = row_ids.to_array(args.number_rows)?;
        let row_ids: &UInt64Array = row_ids.as_primitive_opt().ok_or_else(malformed)?;
        let found: BooleanArray = row_ids
            .iter()
            .map(|id| id.map(|id| self.ids.binary_search(&id).is_ok()))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(found)))
    }
}

/// The ids a `natal_rowid_in` call on `_rowid` selects; `None` for any other expression.
pub(crate) fn folded_row_ids(expr: &Expr) -> Option<RoaringTreemap> {
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    let function = (call.func.inner().as_ref() as &dyn Any).downcast_ref::<RowIdIn>()?;
    match call.args.as_slice() {
        // Sorted and distinct: built in one pass, not id by id.
        [Expr::Column(column)] if column.name == ROW_ID => {
            RoaringTreemap::from_sorted_iter(function.ids.iter().copied()).ok()
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
/// `[NOT] natal_rowid_in[ids](_rowid)`. Registered by [`crate::datafusion::register`].
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
        let row_ids = UInt64Array::from(vec![Some(1), None, Some(3), Some(7)]);
        let args = ScalarFunctionArgs {
            args: vec![ColumnarValue::Array(Arc::new(row_ids))],
            arg_fields: vec![Arc::new(Field::new(ROW_ID, DataType::UInt64, true))],
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

        assert!(call.func.return_type(&[DataType::Int64]).is_err());
    }

    #[test]
    fn the_name_shows_the_ids_and_tells_lists_apart() {
        let name = |ids: Vec<u64>| match RowIdIn::call(col(ROW_ID), ids) {
            Expr::ScalarFunction(call) => call.func.name().to_string(),
            other => panic!("not a call: {other}"),
        };
        assert_eq!(name(vec![5, 1, 5]), "natal_rowid_in[1, 5]");
        let long: Vec<u64> = (0..1000).collect();
        let mut other = long.clone();
        other[999] = 5000;
        let (a, b) = (name(long.clone()), name(other));
        assert!(
            a.starts_with("natal_rowid_in[0, 1, 2, 3, … 1000 ids #"),
            "{a}"
        );
        assert_ne!(a, b, "lists differing in one id share a name");
        assert_eq!(a, name(long), "the name depends only on the ids");
        // Calls on equal id sets are equal expressions; on different ones, not.
        assert_eq!(
            RowIdIn::call(col(ROW_ID), [3, 2]),
            RowIdIn::call(col(ROW_ID), [2, 3])
        );
        assert_ne!(
            RowIdIn::call(col(ROW_ID), [3, 2]),
            RowIdIn::call(col(ROW_ID), [2, 4])
        );
    }
}
