//! The literal arguments of natal's table functions (`natal_compact('t')`,
//! `natal_changes('t', 3)`): checked while planning, with errors naming the function, the
//! argument and what it must be.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;

/// String argument `i` of function `name` (`what` it is, for errors).
pub(in crate::datafusion) fn literal_string(
    name: &str,
    args: &[Expr],
    i: usize,
    what: &str,
) -> Result<String> {
    match args.get(i) {
        Some(Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        )) => Ok(s.clone()),
        Some(other) => Err(DataFusionError::Plan(format!(
            "{name}: argument {} ({what}) must be a string literal, got {other}",
            i + 1
        ))),
        None => Err(DataFusionError::Plan(format!(
            "{name}: missing argument {} ({what})",
            i + 1
        ))),
    }
}

/// Non-negative integer argument `i` of function `name`, if given.
pub(in crate::datafusion) fn literal_u64(
    name: &str,
    args: &[Expr],
    i: usize,
    what: &str,
) -> Result<Option<u64>> {
    match args.get(i) {
        None => Ok(None),
        // Only integer literals: a cast would truncate `1.7` to version 1.
        Some(Expr::Literal(value, _)) if value.data_type().is_integer() => {
            match value.cast_to(&DataType::UInt64) {
                Ok(ScalarValue::UInt64(Some(v))) => Ok(Some(v)),
                _ => Err(DataFusionError::Plan(format!(
                    "{name}: argument {} ({what}) must be a non-negative integer, got {value}",
                    i + 1
                ))),
            }
        }
        Some(Expr::Literal(value, _)) => Err(DataFusionError::Plan(format!(
            "{name}: argument {} ({what}) must be a non-negative integer, got {value}",
            i + 1
        ))),
        Some(other) => Err(DataFusionError::Plan(format!(
            "{name}: argument {} ({what}) must be a literal, got {other}",
            i + 1
        ))),
    }
}
