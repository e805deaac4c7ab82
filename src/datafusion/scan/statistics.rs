//! What a natal scan tells the planner before it runs: row counts, and per column the
//! minimum, maximum, null count and size, folded from the manifest's per-file statistics.
//!
//! The planner sizes joins from these (which side builds the hash table, whether to
//! broadcast it): a join's cardinality is estimated from its keys' value ranges, so a scan
//! without them makes every join look like its smallest input. DataFusion answers
//! `count(*)`, `min` and `max` from *exact* figures without reading data, so a figure is
//! exact only when it is known to be the answer: every live row of whole fragments without
//! deletions is returned (no filter, mask or limit), bounds are not truncated, floats hold
//! no NaN. Everything else is an estimate; min and max stay bounds of what is returned.

use std::collections::BTreeSet;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics};

use super::partitions::Piece;
use super::plan::ScanPlan;
use super::pruning::to_scalar;
use crate::format::{ColumnStats, FieldId, Fragment, StatValue};

/// The statistics of the pieces one partition reads (`partition`), or of the whole scan.
pub(in crate::datafusion) fn scan_statistics(
    plan: &ScanPlan,
    output: &SchemaRef,
    partition: Option<usize>,
) -> Statistics {
    let pieces: Vec<Piece> = match partition {
        Some(p) => plan.partitions.get(p).cloned().unwrap_or_default(),
        None => plan.partitions.concat(),
    };
    let manifest = plan.snapshot.manifest();
    let mut read = Reads {
        fragments: Vec::new(),
        rows: 0.0,
        exact: true,
    };
    let mut whole_fragments = BTreeSet::new();
    for piece in &pieces {
        let Some(fragment) = manifest.fragment(piece.fragment) else {
            continue;
        };
        // Every piece of a fragment together (the whole scan) reads all its rows, once.
        let share = match &piece.rows {
            None => 1.0,
            Some(_) if partition.is_none() => {
                if !whole_fragments.insert(fragment.id) {
                    continue;
                }
                1.0
            }
            // Which of its live rows a piece holds only the deletion vector knows.
            Some(range) => {
                f64::from(range.end - range.start) / f64::from(fragment.physical_rows.max(1))
            }
        };
        read.add(fragment, share);
    }

    let every_live_row =
        plan.row_ids.is_none() && plan.row_id_range.is_none() && plan.filter.is_none();
    let exact = read.exact && every_live_row && plan.limit.is_none();
    let mut estimate = read.rows;
    if plan.filter.is_some() || plan.row_id_range.is_some() {
        estimate *= plan.filter_selectivity;
    }
    if let Some(ids) = &plan.row_ids {
        estimate = estimate.min(ids.len() as f64);
    }
    if let Some(limit) = plan.limit {
        estimate = estimate.min(limit as f64);
    }
    let num_rows = if exact {
        Precision::Exact(read.rows as usize)
    } else {
        Precision::Inexact(estimate as usize)
    };
    // The share of the rows read that the scan returns, to scale sizes and null counts.
    let returned = if read.rows > 0.0 {
        estimate / read.rows
    } else {
        0.0
    };

    let schema = plan.snapshot.schema();
    let columns: Vec<ColumnStatistics> = output
        .fields()
        .iter()
        .map(|field| {
            // A user column the scan reads (system columns have no stored statistics).
            let stored = schema
                .field_by_name(field.name())
                .filter(|_| plan.columns.contains(field.name()));
            let mut column = match stored {
                Some(stored) => {
                    let fold = fold_column(&read.fragments, stored.id);
                    fold.into_statistics(field.data_type(), exact, returned)
                }
                None => ColumnStatistics::new_unknown(),
            };
            if let Some(width) = field.data_type().primitive_width() {
                column.byte_size = num_rows.multiply(&Precision::Exact(width));
            }
            column
        })
        .collect();
    let total_byte_size = columns
        .iter()
        .map(|c| c.byte_size)
        .reduce(|a, b| a.add(&b))
        .unwrap_or(Precision::Absent)
        .to_inexact();
    Statistics {
        num_rows,
        total_byte_size,
        column_statistics: columns,
    }
}

/// The fragments a scan reads, each with the share of its rows it reads.
struct Reads<'a> {
    fragments: Vec<(&'a Fragment, f64)>,
    /// Estimated live rows read.
    rows: f64,
    /// The row count is known: a part of a fragment is read only where it has no
    /// deletions (a range of its rows is then that many rows).
    exact: bool,
}

impl<'a> Reads<'a> {
    fn add(&mut self, fragment: &'a Fragment, share: f64) {
        self.exact &= share == 1.0 || fragment.deletion.is_none();
        self.rows += fragment.live_rows() as f64 * share;
        self.fragments.push((fragment, share));
    }
}

/// One column's statistics over the fragments read.
struct ColumnFold<'a> {
    min: Option<&'a StatValue>,
    max: Option<&'a StatValue>,
    nulls: Option<f64>,
    bytes: Option<f64>,
    /// Every fragment had statistics for the column, none truncated or with NaN, none
    /// with deletions (which may have removed the extremes) or read in part.
    exact: bool,
}

fn fold_column<'a>(fragments: &[(&'a Fragment, f64)], field_id: FieldId) -> ColumnFold<'a> {
    let mut fold = ColumnFold {
        min: None,
        max: None,
        nulls: Some(0.0),
        bytes: Some(0.0),
        exact: true,
    };
    let mut bounded = true;
    for (fragment, share) in fragments {
        let Some(stats) = fragment.column_stats(field_id) else {
            if fragment.file_holding(field_id).is_none() {
                // The fragment predates the column: each row reads NULL, bounding nothing.
                let rows = f64::from(fragment.physical_rows) * share;
                fold.nulls = fold.nulls.map(|sum| sum + rows);
                continue;
            }
            bounded = false;
            fold.nulls = None;
            fold.bytes = None;
            continue;
        };
        fold.exact &= *share == 1.0
            && fragment.deletion.is_none()
            && !stats.bounds_only
            && stats.nan_count.unwrap_or(0) == 0;
        fold.nulls = fold
            .nulls
            .zip(stats.null_count)
            .map(|(sum, n)| sum + n as f64 * share);
        fold.bytes = fold
            .bytes
            .zip(stats.uncompressed_bytes)
            .map(|(sum, n)| sum + n as f64 * share);
        let rows = u64::from(fragment.physical_rows);
        bounded &= fold_bound(
            &mut fold.min,
            stats,
            rows,
            |s| s.min.as_ref(),
            StatValue::less_than,
        );
        bounded &= fold_bound(
            &mut fold.max,
            stats,
            rows,
            |s| s.max.as_ref(),
            |a, b| b.less_than(a),
        );
    }
    if !bounded {
        fold.min = None;
        fold.max = None;
    }
    fold
}

/// Folds one file's bound into `bound`; false when the file has none (unless it holds
/// nulls only, which constrain nothing) or its floats hold NaN (bounds skip NaN).
fn fold_bound<'a>(
    bound: &mut Option<&'a StatValue>,
    stats: &'a ColumnStats,
    rows: u64,
    pick: fn(&'a ColumnStats) -> Option<&'a StatValue>,
    better: fn(&StatValue, &StatValue) -> bool,
) -> bool {
    if stats.nan_count.unwrap_or(0) > 0 {
        return false;
    }
    match pick(stats) {
        Some(value) => {
            if bound.is_none_or(|b| better(value, b)) {
                *bound = Some(value);
            }
            true
        }
        None => stats.null_count == Some(rows),
    }
}

impl ColumnFold<'_> {
    fn into_statistics(
        self,
        data_type: &DataType,
        rows_exact: bool,
        returned: f64,
    ) -> ColumnStatistics {
        let exact = self.exact && rows_exact;
        let precise = |value: ScalarValue| {
            if exact {
                Precision::Exact(value)
            } else {
                Precision::Inexact(value)
            }
        };
        let scalar = |value: Option<&StatValue>| {
            value
                .and_then(|v| to_scalar(v, data_type))
                .map_or(Precision::Absent, precise)
        };
        let count = |value: Option<f64>| match value {
            Some(n) if exact => Precision::Exact(n as usize),
            Some(n) => Precision::Inexact((n * returned) as usize),
            None => Precision::Absent,
        };
        ColumnStatistics {
            null_count: count(self.nulls),
            max_value: scalar(self.max),
            min_value: scalar(self.min),
            sum_value: Precision::Absent,
            distinct_count: Precision::Absent,
            byte_size: match self.bytes {
                Some(n) => Precision::Inexact((n * returned) as usize),
                None => Precision::Absent,
            },
        }
    }
}
