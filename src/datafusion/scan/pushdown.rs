//! Filter pushdown: what the provider makes of a query's filters before it plans a scan or
//! a DML statement. `_rowid` equalities, `IN` lists and ranges become masks (a take); an
//! equality, `IN` list or range on an indexed column becomes an index probe; everything
//! else is a column filter the scan evaluates as it reads.

use std::ops::RangeInclusive;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use roaring::RoaringTreemap;

use crate::io::IndexLookup;
use crate::rowid::RowIdSet;
use crate::table::{IndexProbe, Snapshot, ROW_ID};

fn is_row_id(e: &Expr) -> bool {
    matches!(e, Expr::Column(c) if c.name == ROW_ID)
}

/// A literal as a row id; `None` for anything else (negative or non-integer values too).
fn id_literal(e: &Expr) -> Option<u64> {
    match e {
        Expr::Literal(value, _) => match value.cast_to(&DataType::UInt64).ok()? {
            ScalarValue::UInt64(Some(v)) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

/// The empty id range (`_rowid > u64::MAX`, `_rowid < 0`).
const NO_IDS: RangeInclusive<u64> = RangeInclusive::new(1, 0);

/// The ids `_rowid <op> v` (either side), `_rowid BETWEEN a AND b` select, as an inclusive
/// range (empty when `start > end`); `None` for other filters.
fn row_id_range(expr: &Expr) -> Option<RangeInclusive<u64>> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (op, value) = if is_row_id(left) {
                (*op, id_literal(right)?)
            } else if is_row_id(right) {
                (op.swap()?, id_literal(left)?)
            } else {
                return None;
            };
            match op {
                Operator::Gt => Some(value.checked_add(1).map_or(NO_IDS, |v| v..=u64::MAX)),
                Operator::GtEq => Some(value..=u64::MAX),
                Operator::Lt => Some(value.checked_sub(1).map_or(NO_IDS, |v| 0..=v)),
                Operator::LtEq => Some(0..=value),
                _ => None,
            }
        }
        Expr::Between(between) if !between.negated && is_row_id(&between.expr) => {
            Some(id_literal(&between.low)?..=id_literal(&between.high)?)
        }
        _ => None,
    }
}

/// The ids an `_rowid = v` or `_rowid IN (...)` filter selects; `None` for other filters.
fn row_id_set(expr: &Expr) -> Option<RoaringTreemap> {
    let (is_row_id, literal) = (is_row_id, id_literal);
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => {
            let value = if is_row_id(left) {
                literal(right)
            } else if is_row_id(right) {
                literal(left)
            } else {
                None
            }?;
            Some(RoaringTreemap::from_iter([value]))
        }
        // DataFusion rewrites short IN lists into OR chains.
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => Some(row_id_set(left)? | row_id_set(right)?),
        Expr::ScalarFunction(_) => super::rowid_list::folded_row_ids(expr),
        Expr::InList(list) if !list.negated && is_row_id(&list.expr) => {
            let values: Option<Vec<u64>> = list.list.iter().map(literal).collect();
            Some(values?.into_iter().collect())
        }
        _ => None,
    }
}

/// The column and values of `col = v`, `col IN (...)` or an `OR` chain of those on one
/// column; `None` for other filters.
fn equality_values(expr: &Expr) -> Option<(&str, Vec<ScalarValue>)> {
    let literal = |e: &Expr| match e {
        Expr::Literal(value, _) => Some(value.clone()),
        _ => None,
    };
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), other) | (other, Expr::Column(c)) => {
                Some((c.name.as_str(), vec![literal(other)?]))
            }
            _ => None,
        },
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            let (name, mut values) = equality_values(left)?;
            let (other, more) = equality_values(right)?;
            (name == other).then(|| {
                values.extend(more);
                (name, values)
            })
        }
        Expr::InList(list) if !list.negated => match list.expr.as_ref() {
            Expr::Column(c) => Some((
                c.name.as_str(),
                list.list.iter().map(literal).collect::<Option<_>>()?,
            )),
            _ => None,
        },
        _ => None,
    }
}

/// One side of a range: `col <op> v` (either side) or `col BETWEEN a AND b`, as
/// (column, low bound, high bound), each bound a value and whether it is included.
type RangeFilter<'a> = (
    &'a str,
    Option<(ScalarValue, bool)>,
    Option<(ScalarValue, bool)>,
);

fn range_of(expr: &Expr) -> Option<RangeFilter<'_>> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, op, value) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (c, *op, v),
                (Expr::Literal(v, _), Expr::Column(c)) => (c, op.swap()?, v),
                _ => return None,
            };
            let bound = Some((value.clone(), matches!(op, Operator::GtEq | Operator::LtEq)));
            match op {
                Operator::Gt | Operator::GtEq => Some((column.name.as_str(), bound, None)),
                Operator::Lt | Operator::LtEq => Some((column.name.as_str(), None, bound)),
                _ => None,
            }
        }
        Expr::Between(between) if !between.negated => match (
            between.expr.as_ref(),
            between.low.as_ref(),
            between.high.as_ref(),
        ) {
            (Expr::Column(c), Expr::Literal(low, _), Expr::Literal(high, _)) => Some((
                c.name.as_str(),
                Some((low.clone(), true)),
                Some((high.clone(), true)),
            )),
            _ => None,
        },
        _ => None,
    }
}

/// The name of an index on `column` of the snapshot, and the column's type.
fn index_on<'a>(snapshot: &'a Snapshot, column: &str) -> Option<(&'a str, DataType)> {
    let field = snapshot.schema().field_by_name(column)?;
    let segment = snapshot
        .manifest()
        .indexes
        .segments
        .iter()
        .find(|s| s.field_id == field.id && s.vector.is_none())?;
    Some((segment.name.as_str(), field.data_type.clone()))
}

/// A probe of an index for the scan's filters: an equality filter on an indexed column
/// (`col = v`, `col IN (...)`), else the range the conjuncts on one indexed column bound.
/// `None` when no filter fits or a value does not convert to the column's type.
pub(in crate::datafusion) fn index_probe(
    snapshot: &Snapshot,
    filters: &[Expr],
) -> Option<IndexProbe> {
    for filter in filters {
        let Some((column, values)) = equality_values(filter) else {
            continue;
        };
        let Some((name, data_type)) = index_on(snapshot, column) else {
            continue;
        };
        // `col = NULL` matches nothing; the filter still says so.
        let values: Option<Vec<ScalarValue>> = values
            .into_iter()
            .filter(|v| !v.is_null())
            .map(|v| v.cast_to(&data_type).ok())
            .collect();
        let Some(values) = values else { continue };
        let array = if values.is_empty() {
            datafusion::arrow::array::new_empty_array(&data_type)
        } else {
            match ScalarValue::iter_to_array(values) {
                Ok(array) => array,
                Err(_) => continue,
            }
        };
        return Some(IndexProbe::new(name, IndexLookup::Values(array)));
    }
    // Conjuncts on one column narrow each other: `a > 3 AND a <= 9`.
    let mut ranges: Vec<RangeFilter<'_>> = Vec::new();
    for (column, low, high) in filters.iter().filter_map(range_of) {
        match ranges.iter_mut().find(|r| r.0 == column) {
            Some(range) => {
                range.1 = tighter(range.1.take(), low, true);
                range.2 = tighter(range.2.take(), high, false);
            }
            None => ranges.push((column, low, high)),
        }
    }
    ranges.into_iter().find_map(|(column, low, high)| {
        let (name, data_type) = index_on(snapshot, column)?;
        let bound = |b: Option<(ScalarValue, bool)>| -> Option<Option<(datafusion::arrow::array::ArrayRef, bool)>> {
            match b {
                None => Some(None),
                // `col > NULL` matches nothing; leave such filters to the scan.
                Some((v, _)) if v.is_null() => None,
                Some((v, inclusive)) => {
                    let array = v.cast_to(&data_type).ok()?.to_array().ok()?;
                    Some(Some((array, inclusive)))
                }
            }
        };
        let (low, high) = (bound(low)?, bound(high)?);
        (low.is_some() || high.is_some())
            .then(|| IndexProbe::new(name, IndexLookup::Range { low, high }))
    })
}

/// The tighter of two bounds on the same side (`low`: the larger), keeping both when they
/// cannot be compared.
fn tighter(
    a: Option<(ScalarValue, bool)>,
    b: Option<(ScalarValue, bool)>,
    low: bool,
) -> Option<(ScalarValue, bool)> {
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(a), Some(b)) => match a.0.partial_cmp(&b.0) {
            Some(std::cmp::Ordering::Equal) => Some((a.0, a.1 && b.1)),
            Some(std::cmp::Ordering::Greater) => Some(if low { a } else { b }),
            Some(std::cmp::Ordering::Less) => Some(if low { b } else { a }),
            None => Some(a),
        },
    }
}

/// Filters taken apart: `_rowid` sets and ranges, which become masks, and the rest.
pub(in crate::datafusion) struct Classified {
    pub row_ids: Option<RowIdSet>,
    pub row_id_range: Option<RangeInclusive<u64>>,
    pub column_filters: Vec<Expr>,
}

pub(in crate::datafusion) fn classify(filters: &[Expr]) -> Classified {
    let mut out = Classified {
        row_ids: None,
        row_id_range: None,
        column_filters: Vec::new(),
    };
    for filter in filters {
        if let Some(set) = row_id_set(filter) {
            let set = RowIdSet::from(set);
            out.row_ids = Some(match out.row_ids {
                Some(prev) => prev & set,
                None => set,
            });
        } else if let Some(range) = row_id_range(filter) {
            out.row_id_range = Some(match out.row_id_range {
                Some(prev) => (*prev.start()).max(*range.start())..=(*prev.end()).min(*range.end()),
                None => range,
            });
        } else {
            out.column_filters.push(filter.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::common::DFSchema;
    use datafusion::prelude::SessionContext;

    use super::*;

    /// The filter of `WHERE <sql>` over `(_rowid, k, s)`, split at its conjunctions as
    /// DataFusion hands them to a provider.
    fn filters(sql: &str) -> Vec<Expr> {
        let schema = Schema::new(vec![
            Field::new(ROW_ID, DataType::UInt64, false),
            Field::new("k", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        let schema = DFSchema::try_from(schema).unwrap();
        let expr = SessionContext::new()
            .parse_sql_expr(sql, &schema)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        datafusion::logical_expr::utils::split_conjunction_owned(expr)
    }

    fn ids(list: &[u64]) -> Option<RowIdSet> {
        Some(RowIdSet::from(
            list.iter().copied().collect::<RoaringTreemap>(),
        ))
    }

    /// A filter, the ids and id range it selects, and how many column filters remain.
    type Case = (
        &'static str,
        Option<RowIdSet>,
        Option<RangeInclusive<u64>>,
        usize,
    );

    #[test]
    fn row_id_filters_become_masks_and_the_rest_column_filters() {
        let cases: [Case; 12] = [
            ("_rowid = 7", ids(&[7]), None, 0),
            ("7 = _rowid", ids(&[7]), None, 0),
            ("_rowid IN (1, 2, 3)", ids(&[1, 2, 3]), None, 0),
            ("_rowid = 1 OR _rowid = 9", ids(&[1, 9]), None, 0),
            (
                "_rowid IN (1, 2, 3) AND _rowid IN (2, 3, 4)",
                ids(&[2, 3]),
                None,
                0,
            ),
            ("_rowid BETWEEN 10 AND 20", None, Some(10..=20), 0),
            ("_rowid > 10 AND _rowid < 20", None, Some(11..=19), 0),
            ("_rowid >= 5 AND _rowid <= 5", None, Some(5..=5), 0),
            ("_rowid < 0", None, Some(NO_IDS), 0),
            ("_rowid = 3 AND k > 1", ids(&[3]), None, 1),
            ("k = 1 OR _rowid = 3", None, None, 1),
            ("s = 'x' AND k IN (1, 2)", None, None, 2),
        ];
        for (sql, want_ids, want_range, want_columns) in cases {
            let got = classify(&filters(sql));
            assert_eq!(got.row_ids, want_ids, "{sql}");
            let range = got.row_id_range.map(|r| (*r.start(), *r.end()));
            let want = want_range.map(|r| (*r.start(), *r.end()));
            // An empty range is any empty range.
            let empty = |r: Option<(u64, u64)>| r.is_some_and(|(a, b)| a > b);
            assert!(
                range == want || (empty(range) && empty(want)),
                "{sql}: {range:?}"
            );
            assert_eq!(got.column_filters.len(), want_columns, "{sql}");
        }
    }

    #[test]
    fn index_probes_see_equalities_lists_and_ranges() {
        let cases: [(&str, Option<usize>); 6] = [
            ("k = 3", Some(1)),
            ("k IN (1, 2, 3)", Some(3)),
            ("k = 1 OR k = 2", Some(2)),
            ("s = 'x'", Some(1)),
            ("k + 1 = 3", None),
            ("k = s", None),
        ];
        for (sql, values) in cases {
            let expr = filters(sql).remove(0);
            let found = equality_values(&expr).map(|(_, v)| v.len());
            assert_eq!(found, values, "{sql}");
        }
        let bounded = filters("k >= 3 AND k < 9");
        let bounds: Vec<_> = bounded.iter().filter_map(range_of).collect();
        assert_eq!(bounds.len(), 2, "both bounds of the range are seen");
        assert!(range_of(&filters("k <> 3")[0]).is_none());
    }
}
