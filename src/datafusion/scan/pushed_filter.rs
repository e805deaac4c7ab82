//! [`PushedFilter`]: filters operators above a scan push into it as the query runs — a hash
//! join's build-side keys (their bounds, and the keys themselves), a top-k's current bound —
//! and how the scan uses them. They are hints, not the query's filters: a row one rejects is
//! a row the operator would drop anyway, so skipping it is free to get wrong in one way only
//! (keeping it). The scan
//! - rules pages out by their bounds as each fragment is opened (`ExprPredicate::select_pages`);
//! - drops the rows they reject as batches decode, before the rows cross partitions or reach
//!   the join — while that pays, judged for each pushed filter on its own over its first
//!   [`TRIAL_ROWS`], and again whenever its operator changes it. A filter that keeps most
//!   rows costs a probe a row and saves little: evaluated only while it keeps less than
//!   [`WORTH_KEEPING`] of the rows the scan's own filter keeps. A join built in partitions
//!   pushes one filter a partition behind a `CASE` on each row's partition hash: two hashes,
//!   a scatter and a probe a row, which measured costs more than the next join saves on the
//!   rows it rejects (TPC-H q4 at SF 1: keeping 3.8% of `lineitem`, 1.35× the time without
//!   it), and pays only when almost nothing passes and the rows would have gone through more
//!   joins (q18: 57 orders of 1.5M, 0.58×): evaluated only while it keeps less than
//!   [`WORTH_KEEPING_ROUTED`].

use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{
    new_null_array, Array, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch,
};
use datafusion::arrow::compute::{and, filter_record_batch, prep_null_mask_filter};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::expressions::{CaseExpr, DynamicFilterPhysicalExpr, Literal};
use datafusion::physical_expr::{conjunction, split_conjunction};
use datafusion::physical_expr_common::physical_expr::{
    snapshot_generation, snapshot_physical_expr,
};
use datafusion::physical_plan::PhysicalExpr;

/// Rows read while a pushed filter is evaluated before its worth is judged.
const TRIAL_ROWS: u64 = 64 * 1024;

/// The share of rows (of those the planned filter keeps) from which a pushed filter is not
/// evaluated: the rows it would save downstream cost less than evaluating it.
const WORTH_KEEPING: f64 = 0.8;

/// [`WORTH_KEEPING`] for a filter that routes each row by its partition.
const WORTH_KEEPING_ROUTED: f64 = 0.01;

/// Filters pushed into a scan, over the scan's predicate layout, each with what evaluating
/// it has kept so far.
#[derive(Debug)]
pub(crate) struct PushedFilter {
    /// All of them, as one conjunction.
    expr: Arc<dyn PhysicalExpr>,
    parts: Vec<Part>,
}

/// One pushed filter and its trial.
#[derive(Debug)]
struct Part {
    expr: Arc<dyn PhysicalExpr>,
    trial: Mutex<Trial>,
}

/// Rows seen and kept since the filter last changed.
#[derive(Debug, Default)]
struct Trial {
    generation: u64,
    /// The share of rows from which it is not worth evaluating, as it stands.
    worth_keeping: f64,
    /// Rows read while it was evaluated.
    rows_read: u64,
    /// Of those, the rows the planned filter kept, and those it kept too.
    rows_seen: u64,
    rows_kept: u64,
    not_worth_it: bool,
}

impl PushedFilter {
    /// The filters of the conjunction `expr`.
    pub(crate) fn new(expr: Arc<dyn PhysicalExpr>) -> Self {
        let parts = (split_conjunction(&expr).into_iter())
            .map(|part| Part {
                expr: part.clone(),
                trial: Mutex::new(Trial::default()),
            })
            .collect();
        Self { expr, parts }
    }

    pub(crate) fn expr(&self) -> &Arc<dyn PhysicalExpr> {
        &self.expr
    }

    /// The filters as they stand now that rule anything out yet (a join's filter is `true`
    /// until its build side is read), as one conjunction.
    pub(crate) fn now(&self) -> Option<Arc<dyn PhysicalExpr>> {
        let now: Vec<_> = self.parts.iter().filter_map(Part::now).collect();
        (!now.is_empty()).then(|| conjunction(now))
    }

    /// Which rows of `batch` pass the filters worth evaluating, or `None` if none is.
    /// `planned`: the rows the scan's own filter keeps. Where it keeps fewer than half, the
    /// pushed filters see only those rows (a join's probe a row is dear; TPC-H q19 keeps 2%
    /// of `lineitem` by its own filter); their worth is judged among them.
    pub(crate) fn evaluate(
        &self,
        batch: &RecordBatch,
        planned: Option<&BooleanArray>,
    ) -> crate::Result<Option<BooleanArray>> {
        // A null is a row the planned filter does not keep.
        let planned = planned.map(|p| match p.null_count() {
            0 => p.clone(),
            _ => prep_null_mask_filter(p),
        });
        match planned {
            Some(planned) if planned.true_count() * 2 < batch.num_rows() => {
                let kept_rows = filter_record_batch(batch, &planned)?;
                let kept = self.evaluate_parts(&kept_rows, None, batch.num_rows())?;
                Ok(kept.map(|kept| spread(&planned, &kept)))
            }
            planned => self.evaluate_parts(batch, planned.as_ref(), batch.num_rows()),
        }
    }

    /// Which rows of `batch` (of `scanned` rows read) pass the parts worth evaluating, or
    /// `None` if none is.
    fn evaluate_parts(
        &self,
        batch: &RecordBatch,
        planned: Option<&BooleanArray>,
        scanned: usize,
    ) -> crate::Result<Option<BooleanArray>> {
        let mut keep: Option<BooleanArray> = None;
        for part in &self.parts {
            if let Some(kept) = part.evaluate(batch, planned, scanned)? {
                keep = Some(match keep {
                    Some(keep) => and(&keep, &kept)?,
                    None => kept,
                });
            }
        }
        Ok(keep)
    }
}

/// `kept`, one answer for each row `planned` keeps, as an answer for every row of
/// `planned` (false where it keeps none; null: not kept).
fn spread(planned: &BooleanArray, kept: &BooleanArray) -> BooleanArray {
    let mut out = BooleanBufferBuilder::new(planned.len());
    out.append_n(planned.len(), false);
    for (i, at) in planned.values().set_indices().enumerate() {
        if kept.is_valid(i) && kept.value(i) {
            out.set_bit(at, true);
        }
    }
    BooleanArray::new(out.finish(), None)
}

impl Part {
    /// The filter as it stands now, if it rules anything out yet.
    fn now(&self) -> Option<Arc<dyn PhysicalExpr>> {
        let now = snapshot_physical_expr(self.expr.clone()).ok()?;
        let always = (now.downcast_ref::<Literal>())
            .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)));
        (!always).then_some(now)
    }

    /// Which rows of `batch` (of `scanned` rows read) pass, or `None` while evaluating it is
    /// not worth it.
    fn evaluate(
        &self,
        batch: &RecordBatch,
        planned: Option<&BooleanArray>,
        scanned: usize,
    ) -> crate::Result<Option<BooleanArray>> {
        let generation = snapshot_generation(&self.expr);
        {
            let mut trial = self.trial.lock().unwrap_or_else(|e| e.into_inner());
            if trial.generation != generation {
                let now = self.now();
                let routed = now.as_ref().is_some_and(routes_by_partition);
                *trial = Trial {
                    generation,
                    worth_keeping: if routed {
                        WORTH_KEEPING_ROUTED
                    } else {
                        WORTH_KEEPING
                    },
                    // Not set yet: nothing to rule out.
                    not_worth_it: now.is_none(),
                    ..Trial::default()
                };
            }
            if trial.not_worth_it {
                return Ok(None);
            }
        }
        let keep = evaluate(&self.expr, batch)?;
        let (seen, kept) = match planned {
            Some(planned) => (planned.true_count(), and(planned, &keep)?.true_count()),
            None => (batch.num_rows(), keep.true_count()),
        };
        let mut trial = self.trial.lock().unwrap_or_else(|e| e.into_inner());
        if trial.generation == generation {
            trial.rows_read += scanned as u64;
            trial.rows_seen += seen as u64;
            trial.rows_kept += kept as u64;
            trial.not_worth_it = trial.rows_read >= TRIAL_ROWS
                && trial.rows_kept as f64 >= trial.worth_keeping * trial.rows_seen as f64;
        }
        Ok(Some(keep))
    }
}

/// The rows of `batch` for which `expr` is true (null: not): a planned or a pushed filter.
pub(in crate::datafusion) fn evaluate(
    expr: &Arc<dyn PhysicalExpr>,
    batch: &RecordBatch,
) -> crate::Result<BooleanArray> {
    let outcome = expr
        .evaluate(batch)
        .and_then(|value| value.into_array(batch.num_rows()))
        .map_err(|e| crate::Error::External(Box::new(e)))?;
    match outcome.as_boolean_opt() {
        Some(keep) => Ok(keep.clone()),
        None => Err(crate::Error::invalid(format!(
            "filter {expr} is {}, not boolean",
            outcome.data_type()
        ))),
    }
}

/// Whether `expr` picks its test by each row's partition (a `CASE` over the join's
/// partitions).
fn routes_by_partition(expr: &Arc<dyn PhysicalExpr>) -> bool {
    (expr.exists(|e| Ok(e.downcast_ref::<CaseExpr>().is_some()))).unwrap_or(false)
}

/// Whether the operator that pushed `filter` can compute what it fills it with, for every
/// key of `schema`'s rows it covers. A hash join fills its filter with the bounds of its
/// build keys (DataFusion's min and max), which exist for no map or union (nor a struct or
/// list holding one), and fails the query when asked for them: it computes them only while
/// its filter is held by the scan below, so such a filter is left to the join alone.
pub(crate) fn bounds_computable(filter: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    let unbounded_key = filter.exists(|e| {
        let Some(dynamic) = e.downcast_ref::<DynamicFilterPhysicalExpr>() else {
            return Ok(false);
        };
        let unbounded = (dynamic.children().into_iter())
            .any(|key| key.data_type(schema).map_or(true, |t| !has_bounds(&t)));
        Ok(unbounded)
    });
    !unbounded_key.unwrap_or(true)
}

/// Whether DataFusion's min and max accumulate values of `data_type` (a dictionary's by
/// its values), as a hash join computing its build keys' bounds asks them to.
fn has_bounds(data_type: &DataType) -> bool {
    fn unordered(data_type: &DataType) -> bool {
        match data_type {
            DataType::Map(..) | DataType::Union(..) | DataType::RunEndEncoded(..) => true,
            DataType::Struct(fields) => fields.iter().any(|f| unordered(f.data_type())),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _) => unordered(f.data_type()),
            DataType::Dictionary(_, values) => unordered(values),
            _ => false,
        }
    }
    let mut values = data_type;
    while let DataType::Dictionary(_, inner) = values {
        values = inner;
    }
    if unordered(values) {
        return false;
    }
    let nulls = [new_null_array(values, 1)];
    let min = MinAccumulator::try_new(values).and_then(|mut m| m.update_batch(&nulls));
    let max = MaxAccumulator::try_new(values).and_then(|mut m| m.update_batch(&nulls));
    min.is_ok() && max.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_bounds_unless_a_map_or_union_is_in_them() {
        use datafusion::arrow::datatypes::Field;
        let map = DataType::Map(
            Arc::new(Field::new(
                "entries",
                DataType::Struct(
                    vec![
                        Field::new("key", DataType::Utf8, false),
                        Field::new("value", DataType::Int64, true),
                    ]
                    .into(),
                ),
                false,
            )),
            false,
        );
        let struct_of = |t: DataType| DataType::Struct(vec![Field::new("f", t, true)].into());
        let dictionary_of =
            |t: DataType| DataType::Dictionary(Box::new(DataType::Int32), Box::new(t));
        for bounded in [
            DataType::Int64,
            DataType::Utf8,
            struct_of(DataType::Int32),
            DataType::new_list(DataType::Utf8, true),
            dictionary_of(DataType::Utf8),
        ] {
            assert!(has_bounds(&bounded), "{bounded}");
        }
        for unbounded in [
            map.clone(),
            struct_of(map.clone()),
            DataType::new_list(map.clone(), true),
            dictionary_of(struct_of(map)),
        ] {
            assert!(!has_bounds(&unbounded), "{unbounded}");
        }
    }
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{
        lit, BinaryExpr, Column, DynamicFilterPhysicalExpr,
    };

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, false)]);
        let keys = Int64Array::from_iter_values(0..8192);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(keys)]).unwrap()
    }

    fn k(op: Operator, value: i64) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(
            Arc::new(Column::new("k", 0)),
            op,
            lit(value),
        ))
    }

    #[test]
    fn a_filter_that_keeps_most_rows_is_dropped_until_it_changes() {
        let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let dynamic = Arc::new(DynamicFilterPhysicalExpr::new(vec![column], lit(true)));
        let pushed = PushedFilter::new(dynamic.clone());
        assert!(pushed.now().is_none(), "not set yet: rules nothing out");
        dynamic.update(k(Operator::GtEq, 100)).unwrap();
        assert!(pushed.now().is_some());
        let batch = batch();
        let trial = (TRIAL_ROWS as usize).div_ceil(batch.num_rows());
        for _ in 0..trial {
            let keep = pushed.evaluate(&batch, None).unwrap().expect("on trial");
            assert_eq!(keep.true_count(), 8092);
        }
        assert!(
            pushed.evaluate(&batch, None).unwrap().is_none(),
            "keeps 99%: dropped"
        );
        // Changed, it is tried again, and kept while it rejects most rows.
        dynamic.update(k(Operator::Lt, 10)).unwrap();
        for _ in 0..trial * 2 {
            let keep = pushed.evaluate(&batch, None).unwrap().expect("selective");
            assert_eq!(keep.true_count(), 10);
        }
        // Judged among the rows the planned filter keeps, and evaluated on those only: of the
        // 20 below 20, 15 (75%) pass, then 19 (95%).
        let planned = datafusion::arrow::compute::kernels::cmp::lt(
            batch.column(0),
            &Int64Array::new_scalar(20),
        )
        .unwrap();
        dynamic.update(k(Operator::Lt, 15)).unwrap();
        for _ in 0..trial {
            let keep = pushed.evaluate(&batch, Some(&planned)).unwrap().unwrap();
            assert_eq!(keep.len(), batch.num_rows());
            let expected: Vec<bool> = (0..batch.num_rows()).map(|k| k < 15).collect();
            assert_eq!(keep, BooleanArray::from(expected));
        }
        dynamic.update(k(Operator::Lt, 19)).unwrap();
        for _ in 0..trial {
            assert!(pushed.evaluate(&batch, Some(&planned)).unwrap().is_some());
        }
        assert!(
            pushed.evaluate(&batch, Some(&planned)).unwrap().is_none(),
            "keeps 19 of the planned 20: dropped"
        );
    }

    /// A filter that tests `k < a` on even keys and `k < b` on odd ones, as a join built in
    /// two partitions pushes it.
    fn routed(a: i64, b: i64) -> Arc<dyn PhysicalExpr> {
        let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let partition = Arc::new(BinaryExpr::new(column, Operator::Modulo, lit(2i64)));
        let branches = vec![
            (lit(0i64), k(Operator::Lt, a)),
            (lit(1i64), k(Operator::Lt, b)),
        ];
        Arc::new(CaseExpr::try_new(Some(partition), branches, Some(lit(false))).unwrap())
    }

    #[test]
    fn a_filter_routed_by_partition_must_keep_almost_nothing() {
        let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let dynamic = Arc::new(DynamicFilterPhysicalExpr::new(vec![column], lit(true)));
        let other = Arc::new(DynamicFilterPhysicalExpr::new(vec![], lit(true)));
        let both = Arc::new(BinaryExpr::new(
            dynamic.clone(),
            Operator::And,
            other.clone(),
        ));
        let pushed = PushedFilter::new(both);
        let batch = batch();
        assert!(
            pushed.evaluate(&batch, None).unwrap().is_none(),
            "neither is set"
        );
        let trial = (TRIAL_ROWS as usize).div_ceil(batch.num_rows());
        // Keeps 5% of the rows: dropped after its trial, while its pages are still judged.
        dynamic.update(routed(400, 420)).unwrap();
        for _ in 0..trial {
            assert_eq!(
                pushed.evaluate(&batch, None).unwrap().unwrap().true_count(),
                410
            );
        }
        assert!(pushed.evaluate(&batch, None).unwrap().is_none());
        assert!(pushed.now().is_some());
        // Keeps 0.1%: evaluated on.
        dynamic.update(routed(8, 10)).unwrap();
        for _ in 0..trial * 2 {
            assert_eq!(
                pushed.evaluate(&batch, None).unwrap().unwrap().true_count(),
                9
            );
        }
        // Each filter is judged on its own: one that keeps every row leaves the other be.
        other.update(k(Operator::GtEq, 0)).unwrap();
        for _ in 0..trial * 2 {
            assert_eq!(
                pushed.evaluate(&batch, None).unwrap().unwrap().true_count(),
                9
            );
        }
    }
}
