//! Fragment pruning: the manifest's per-file statistics as DataFusion
//! [`PruningStatistics`], one container per fragment.
//!
//! Sound with deletions: min, max and null counts cover a fragment's physical rows, a
//! superset of its live rows. Float bounds are used only where the file holds no NaN (its
//! min/max skip NaN); string bounds are truncated bounds, which is all pruning needs.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;

use crate::format::{ColumnStats, Fragment, Schema, StatValue};

struct FragmentStatistics<'a> {
    fragments: &'a [&'a Fragment],
    schema: &'a Schema,
}

impl FragmentStatistics<'_> {
    fn column_stats<'f>(
        &self,
        fragment: &'f Fragment,
        column: &Column,
    ) -> Option<(&'f ColumnStats, DataType)> {
        let field = self.schema.field_by_name(&column.name)?;
        let stats = fragment.column_stats(field.id)?;
        Some((stats, field.data_type.clone()))
    }

    fn bound(
        &self,
        column: &Column,
        pick: fn(&ColumnStats) -> Option<&StatValue>,
    ) -> Option<ArrayRef> {
        let data_type = self.schema.field_by_name(&column.name)?.data_type.clone();
        let values = self.fragments.iter().map(|fragment| {
            self.column_stats(fragment, column)
                .filter(|(stats, _)| !is_float(&data_type) || stats.nan_count == Some(0))
                .and_then(|(stats, _)| pick(stats))
                .and_then(|value| to_scalar(value, &data_type))
                .unwrap_or_else(|| ScalarValue::try_from(&data_type).unwrap_or(ScalarValue::Null))
        });
        ScalarValue::iter_to_array(values).ok()
    }
}

fn is_float(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Float16 | DataType::Float32 | DataType::Float64
    )
}

pub(in crate::datafusion) fn to_scalar(
    value: &StatValue,
    data_type: &DataType,
) -> Option<ScalarValue> {
    let raw = match value {
        StatValue::Boolean(b) => ScalarValue::Boolean(Some(*b)),
        StatValue::Int(i) => ScalarValue::Int64(Some(*i)),
        StatValue::UInt(u) => ScalarValue::UInt64(Some(*u)),
        StatValue::Float(f) => ScalarValue::Float64(Some(*f)),
        StatValue::Utf8(s) => ScalarValue::Utf8(Some(s.clone())),
        StatValue::Binary(b) => ScalarValue::Binary(Some(b.clone())),
    };
    raw.cast_to(data_type).ok()
}

impl PruningStatistics for FragmentStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, |s| s.min.as_ref())
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, |s| s.max.as_ref())
    }

    fn num_containers(&self) -> usize {
        self.fragments.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let counts: UInt64Array = self
            .fragments
            .iter()
            .map(|f| self.column_stats(f, column).and_then(|(s, _)| s.null_count))
            .collect();
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let rows: UInt64Array = self
            .fragments
            .iter()
            .map(|f| Some(f.physical_rows as u64))
            .collect();
        Some(Arc::new(rows))
    }

    #[allow(clippy::mutable_key_type)]
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// Which of `fragments` may hold rows matching `predicate` (over `arrow_schema`). On any
/// failure to build the pruning predicate every fragment is kept: pruning only saves work.
pub(crate) fn prune_fragments(
    fragments: &[&Fragment],
    schema: &Schema,
    predicate: Arc<dyn PhysicalExpr>,
    arrow_schema: SchemaRef,
) -> Vec<bool> {
    let keep_all = vec![true; fragments.len()];
    let Some(pruning) = PruningPredicateBuilder::new()
        .with_file_schema(arrow_schema)
        .build(predicate)
    else {
        return keep_all;
    };
    if pruning.always_true() {
        return keep_all;
    }
    pruning
        .prune(&FragmentStatistics { fragments, schema })
        .unwrap_or(keep_all)
}
