//! The lineage columns of `t$rows` (`_row_created_version`, `_row_updated_version`) in
//! SQL: they come from fragment metadata after rows are read, so filters on them stay with
//! DataFusion (inexact), and the scan uses them only to skip fragments whose versions
//! cannot match (`WHERE _row_updated_version > 7` skips every fragment whose rows all
//! last changed by version 7, and those written before lineage was recorded, whose
//! versions are NULL).

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};

use crate::format::Fragment;
use crate::table::{ROW_CREATED_VERSION, ROW_UPDATED_VERSION};

/// True for the name of a lineage column.
pub(in crate::datafusion) fn is_lineage(name: &str) -> bool {
    name == ROW_CREATED_VERSION || name == ROW_UPDATED_VERSION
}

/// True when `filter` reads a lineage column.
pub(in crate::datafusion) fn on_lineage(filter: &Expr) -> bool {
    filter.column_refs().iter().any(|c| is_lineage(&c.name))
}

/// False only when no row of `fragment` can pass `filter` (a filter on lineage columns),
/// judged from the bounds of its rows' versions.
pub(in crate::datafusion) fn may_match(filter: &Expr, fragment: &Fragment) -> bool {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => may_match(left, fragment) && may_match(right, fragment),
            Operator::Or => may_match(left, fragment) || may_match(right, fragment),
            _ => match (column_bounds(left, fragment), literal(right)) {
                (Some(bounds), Some(value)) => compare(bounds, *op, value),
                _ => match (literal(left), column_bounds(right, fragment)) {
                    (Some(value), Some(bounds)) => match op.swap() {
                        Some(op) => compare(bounds, op, value),
                        None => true,
                    },
                    _ => true,
                },
            },
        },
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => match (column_bounds(expr, fragment), literal(low), literal(high)) {
            (Some(bounds), Some(low), Some(high)) => {
                compare(bounds, Operator::GtEq, low) && compare(bounds, Operator::LtEq, high)
            }
            _ => true,
        },
        _ => true,
    }
}

/// The bounds of a lineage column's values in `fragment`: `Some(None)` when none is
/// recorded (every value NULL); `None` when `expr` is not a lineage column.
fn column_bounds(expr: &Expr, fragment: &Fragment) -> Option<Option<(u64, u64)>> {
    let Expr::Column(column) = expr else {
        return None;
    };
    match column.name.as_str() {
        ROW_CREATED_VERSION => Some(fragment.lineage.created_bounds()),
        ROW_UPDATED_VERSION => Some(fragment.lineage.updated_bounds()),
        _ => None,
    }
}

fn literal(expr: &Expr) -> Option<i128> {
    let Expr::Literal(value, _) = expr else {
        return None;
    };
    match value {
        ScalarValue::Int8(Some(v)) => Some(i128::from(*v)),
        ScalarValue::Int16(Some(v)) => Some(i128::from(*v)),
        ScalarValue::Int32(Some(v)) => Some(i128::from(*v)),
        ScalarValue::Int64(Some(v)) => Some(i128::from(*v)),
        ScalarValue::UInt8(Some(v)) => Some(i128::from(*v)),
        ScalarValue::UInt16(Some(v)) => Some(i128::from(*v)),
        ScalarValue::UInt32(Some(v)) => Some(i128::from(*v)),
        ScalarValue::UInt64(Some(v)) => Some(i128::from(*v)),
        _ => None,
    }
}

/// Whether some value in `bounds` may satisfy `value op literal`; values that are all
/// NULL (`None`) satisfy no comparison.
fn compare(bounds: Option<(u64, u64)>, op: Operator, literal: i128) -> bool {
    let Some((lo, hi)) = bounds else {
        return !matches!(
            op,
            Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
        );
    };
    let (lo, hi) = (i128::from(lo), i128::from(hi));
    match op {
        Operator::Eq => lo <= literal && literal <= hi,
        Operator::NotEq => !(lo == hi && lo == literal),
        Operator::Lt => lo < literal,
        Operator::LtEq => lo <= literal,
        Operator::Gt => hi > literal,
        Operator::GtEq => hi >= literal,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::prelude::{col, lit};

    use super::*;
    use crate::format::{FragmentRowIds, Lineage, VersionRuns};

    fn fragment(lineage: Lineage) -> Fragment {
        Fragment {
            id: 0,
            files: Vec::new(),
            deletion: None,
            physical_rows: 3,
            row_ids: FragmentRowIds::Native,
            lineage,
            patches: Vec::new(),
        }
    }

    #[test]
    fn fragments_whose_versions_cannot_match_are_skipped() {
        let native = fragment(Lineage::native(5));
        let carried = fragment(Lineage {
            written_in: Some(9),
            row_created: Some(Arc::new(VersionRuns::from_values(&[2, 0, 4]))),
            ..Lineage::default()
        });
        let unknown = fragment(Lineage::default());
        let updated = col(ROW_UPDATED_VERSION);
        let created = col(ROW_CREATED_VERSION);
        let cases = [
            (updated.clone().gt(lit(7u64)), [false, true, false]),
            (updated.clone().gt_eq(lit(5)), [true, true, false]),
            (lit(5).lt(updated.clone()), [false, true, false]),
            (created.clone().eq(lit(3)), [false, true, false]),
            (created.clone().eq(lit(5)), [true, false, false]),
            (
                created.clone().between(lit(5), lit(8)),
                [true, false, false],
            ),
            (
                created.clone().lt(lit(2)).or(updated.clone().eq(lit(9))),
                [false, true, false],
            ),
            (created.clone().is_null(), [true, true, true]),
        ];
        for (filter, expected) in cases {
            let got = [&native, &carried, &unknown].map(|f| may_match(&filter, f));
            assert_eq!(got, expected, "{filter}");
        }
    }
}
