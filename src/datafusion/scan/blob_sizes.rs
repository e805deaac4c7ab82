//! `octet_length` of a blob column from its descriptors: the physical rule [`BlobSizes`]
//! finds a projection over a natal scan in which a blob column is used only as the argument
//! of `octet_length`, has the scan read that column as its values' sizes (a few bytes a row
//! from the data file, no sidecar or external object touched), and replaces each
//! `octet_length(col)` by the size, cast to the type `octet_length` returns. The scan is
//! natal's exec, or its file-scan form where a Ballista scheduler plans it (`cluster.rs`
//! runs the rule there).
//!
//! `SELECT id, octet_length(img) FROM t` then reads what a scan of `id` and the descriptors
//! reads; `SELECT img, octet_length(img)` still fetches the bytes (it needs them anyway).
//!
//! DataFusion 55's `octet_length` takes strings only; natal's session [`OctetLength`] takes
//! binary values too (their length in bytes), and leaves strings to DataFusion's.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Int32Array, Int64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::expressions::{CastExpr, Column};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::ExecutionPlan;

use super::exec::{blob_columns, NatalScanExec};
use super::file_source::{planned_scan, planned_source};
use super::path::{passes_rows_on, with_scan_replaced};

/// The rule (registered by `natal::datafusion::register`).
#[derive(Debug, Default)]
pub struct BlobSizes;

impl BlobSizes {
    /// Its name among the session's physical optimizer rules.
    pub const NAME: &'static str = "natal_blob_sizes";
}

/// `expr` as `octet_length(<column at>)`, if it is one.
fn octet_length_of(expr: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    let call = expr.downcast_ref::<ScalarFunctionExpr>()?;
    if call.name() != "octet_length" {
        return None;
    }
    match call.args() {
        [arg] => arg.downcast_ref::<Column>().map(Column::index),
        _ => None,
    }
}

/// Whether `expr` takes `octet_length` of the column at `at`, at any depth.
fn measures(expr: &Arc<dyn PhysicalExpr>, at: usize) -> bool {
    (expr.exists(|node| Ok(octet_length_of(node) == Some(at)))).unwrap_or(false)
}

/// Whether every use of the column at `at` in `expr` is as `octet_length`'s argument.
fn only_measured(expr: &Arc<dyn PhysicalExpr>, at: usize) -> bool {
    let mut other_use = false;
    let _ = expr.apply(|node| {
        if octet_length_of(node) == Some(at) {
            return Ok(TreeNodeRecursion::Jump);
        }
        if node.downcast_ref::<Column>().map(Column::index) == Some(at) {
            other_use = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    !other_use
}

/// `expr` with `octet_length(col)` of each column of `sized` as that (Int64) column, cast
/// to what `octet_length` returned.
fn measured(expr: &Arc<dyn PhysicalExpr>, sized: &[usize]) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(Arc::clone(expr)
        .transform_up(|node| {
            let Some(at) = octet_length_of(&node).filter(|at| sized.contains(at)) else {
                return Ok(Transformed::no(node));
            };
            let Some(call) = node.downcast_ref::<ScalarFunctionExpr>() else {
                return Ok(Transformed::no(node));
            };
            let name = call.args()[0]
                .downcast_ref::<Column>()
                .map(|c| c.name().to_string())
                .unwrap_or_default();
            let size: Arc<dyn PhysicalExpr> = Arc::new(Column::new(&name, at));
            let out = call.return_type().clone();
            Ok(Transformed::yes(Arc::new(CastExpr::new(size, out, None))))
        })?
        .data)
}

/// The blob columns `plan` could read as sizes, if it is a natal scan: the exec, or its
/// file-scan form planned in this process (the form a Ballista scheduler plans,
/// `file_source.rs`).
fn sizable_columns(plan: &Arc<dyn ExecutionPlan>) -> Option<Vec<usize>> {
    if let Some(scan) = plan.downcast_ref::<NatalScanExec>() {
        return Some(scan.blob_columns());
    }
    let (config, shared) = plan
        .downcast_ref::<DataSourceExec>()
        .and_then(planned_source)?;
    Some(blob_columns(shared, config.file_schema()))
}

/// The blob columns of the natal scan under `plan` (see [`sizable_columns`]), through
/// operators that pass its rows on as they are (a round-robin repartition, partitions
/// coalesced, cooperative scheduling): the projection's columns are the scan's.
fn scan_below(plan: &Arc<dyn ExecutionPlan>) -> Option<Vec<usize>> {
    if let Some(columns) = sizable_columns(plan) {
        return Some(columns);
    }
    match plan.children().as_slice() {
        [child] if passes_rows_on(plan) => scan_below(child),
        _ => None,
    }
}

/// `plan` (a [`scan_below`] path) with its scan reading the blob columns at `sized` as sizes.
fn with_sizes(plan: &Arc<dyn ExecutionPlan>, sized: &[usize]) -> Result<Arc<dyn ExecutionPlan>> {
    with_scan_replaced(plan, &|node| {
        if let Some(scan) = node.downcast_ref::<NatalScanExec>() {
            return Some(Ok(
                Arc::new(scan.reading_sizes(sized)) as Arc<dyn ExecutionPlan>
            ));
        }
        let scan = node
            .downcast_ref::<DataSourceExec>()
            .and_then(planned_scan)?;
        Some(Ok(scan.reading_sizes(sized).as_data_source()))
    })
}

impl PhysicalOptimizerRule for BlobSizes {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(plan
            .transform_up(|node| {
                let Some(projection) = node.downcast_ref::<ProjectionExec>() else {
                    return Ok(Transformed::no(node));
                };
                let Some(blob_columns) = scan_below(projection.input()) else {
                    return Ok(Transformed::no(node));
                };
                let exprs = projection.expr();
                let sized: Vec<usize> = (blob_columns.into_iter())
                    .filter(|at| {
                        exprs.iter().any(|e| measures(&e.expr, *at))
                            && exprs.iter().all(|e| only_measured(&e.expr, *at))
                    })
                    .collect();
                if sized.is_empty() {
                    return Ok(Transformed::no(node));
                }
                let exprs = exprs
                    .iter()
                    .map(|e| {
                        Ok(ProjectionExpr {
                            expr: measured(&e.expr, &sized)?,
                            alias: e.alias.clone(),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let input = with_sizes(projection.input(), &sized)?;
                Ok(Transformed::yes(
                    Arc::new(ProjectionExec::try_new(exprs, input)?) as Arc<dyn ExecutionPlan>,
                ))
            })?
            .data)
    }

    fn name(&self) -> &str {
        Self::NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `octet_length` for strings (DataFusion's own) and binary values (their length in bytes:
/// `Int32` for `Binary` and `BinaryView`, `Int64` for `LargeBinary`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct OctetLength {
    strings: Arc<ScalarUDF>,
    signature: Signature,
}

impl OctetLength {
    /// The function, strings handed to `strings` (DataFusion's `octet_length`).
    pub fn new(strings: Arc<ScalarUDF>) -> Self {
        Self {
            strings,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

fn is_binary(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView
    )
}

impl ScalarUDFImpl for OctetLength {
    fn name(&self) -> &str {
        "octet_length"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] if is_binary(t) => Ok(vec![t.clone()]),
            // Everything else as DataFusion's own coerces it (dictionaries stay dictionaries).
            _ => {
                let fields: Vec<_> = (arg_types.iter())
                    .map(|t| {
                        Arc::new(datafusion::arrow::datatypes::Field::new(
                            "",
                            t.clone(),
                            true,
                        ))
                    })
                    .collect();
                let coerced = fields_with_udf(&fields, self.strings.as_ref())?;
                Ok(coerced.iter().map(|f| f.data_type().clone()).collect())
            }
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::LargeBinary] => Ok(DataType::Int64),
            [t] if is_binary(t) => Ok(DataType::Int32),
            _ => self.strings.return_type(arg_types),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let binary = args.args.first().map(|a| a.data_type()).filter(is_binary);
        if binary.is_none() {
            return self.strings.invoke_with_args(args);
        }
        let values = args.args[0].to_array(args.number_rows)?;
        let lengths: Arc<dyn Array> = match values.data_type() {
            DataType::LargeBinary => Arc::new(
                values
                    .as_binary::<i64>()
                    .iter()
                    .map(|v| v.map(|v| v.len() as i64))
                    .collect::<Int64Array>(),
            ),
            DataType::Binary => Arc::new(
                values
                    .as_binary::<i32>()
                    .iter()
                    .map(|v| v.map(|v| v.len() as i32))
                    .collect::<Int32Array>(),
            ),
            _ => Arc::new(
                values
                    .as_binary_view()
                    .iter()
                    .map(|v| v.map(|v| v.len() as i32))
                    .collect::<Int32Array>(),
            ),
        };
        Ok(ColumnarValue::Array(lengths))
    }
}
