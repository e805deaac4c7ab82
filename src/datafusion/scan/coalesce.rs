//! Joins the small batches a selective scan yields into batches of about DataFusion's batch
//! size, as its own `FilterExec` does. A filter keeping 1% of 8,192-row batches leaves ~80
//! rows a batch; each costs every operator above it a poll, and a wake of another thread
//! where partitions are merged: a 1% filter over 100M rows made 19,000 context switches
//! (Parquet's scan, whose filter coalesces, 900).

use arrow::compute::BatchCoalescer;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use futures::stream::BoxStream;
use futures::StreamExt;

/// Bytes a coalesced batch may grow to, judged from its parts' bytes per row: wide rows
/// (long strings, blob payloads) pass as they come, however few, since a batch of
/// thousands of them would hold far more memory than the scan meant to.
const MAX_COALESCED_BYTES: usize = 16 << 20;

/// `batches` (all of `schema`) with runs of small ones joined into batches of `target`
/// rows, in order. A batch of over half the target goes out as it is (after what was
/// gathered before it, unless that is a few rows it joins), as one of rows too wide to
/// gather does.
pub(in crate::datafusion) fn coalesce_small(
    batches: BoxStream<'static, Result<RecordBatch>>,
    schema: SchemaRef,
    target: usize,
) -> BoxStream<'static, Result<RecordBatch>> {
    let target = target.max(1);
    let state = Coalescing {
        batches,
        // Large batches pass by the coalescer itself (its biggest coalesced batch size).
        coalescer: BatchCoalescer::new(schema, target)
            .with_biggest_coalesce_batch_size(Some(target / 2)),
        target,
        wide: None,
        ended: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        let next = state.next().await?;
        Some((next, state))
    })
    .boxed()
}

struct Coalescing {
    batches: BoxStream<'static, Result<RecordBatch>>,
    coalescer: BatchCoalescer,
    target: usize,
    /// A batch of wide rows, to yield once what was gathered before it is out.
    wide: Option<RecordBatch>,
    ended: bool,
}

impl Coalescing {
    async fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some(batch) = self.coalescer.next_completed_batch() {
                return Some(Ok(batch));
            }
            if let Some(batch) = self.wide.take() {
                return Some(Ok(batch));
            }
            if self.ended {
                return None;
            }
            let gathered = match self.batches.next().await {
                Some(Ok(batch)) if self.is_wide(&batch) => {
                    self.wide = Some(batch);
                    self.coalescer.finish_buffered_batch()
                }
                Some(Ok(batch)) => self.coalescer.push_batch(batch),
                Some(Err(e)) => {
                    // What was gathered is dropped with the query the error ends.
                    self.ended = true;
                    return Some(Err(e));
                }
                None => {
                    self.ended = true;
                    self.coalescer.finish_buffered_batch()
                }
            };
            if let Err(e) = gathered {
                self.ended = true;
                return Some(Err(DataFusionError::ArrowError(Box::new(e), None)));
            }
        }
    }

    fn is_wide(&self, batch: &RecordBatch) -> bool {
        let rows = batch.num_rows();
        rows > 0 && batch.get_array_memory_size() / rows * self.target > MAX_COALESCED_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, BinaryArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn run(batches: Vec<RecordBatch>, schema: SchemaRef, target: usize) -> Vec<RecordBatch> {
        let input = futures::stream::iter(batches.into_iter().map(Ok)).boxed();
        let out = coalesce_small(input, schema, target).collect::<Vec<_>>();
        futures::executor::block_on(out)
            .into_iter()
            .collect::<Result<_>>()
            .unwrap()
    }

    fn ints(schema: &SchemaRef, values: std::ops::Range<i64>) -> RecordBatch {
        let column = Arc::new(Int64Array::from_iter_values(values));
        RecordBatch::try_new(schema.clone(), vec![column]).unwrap()
    }

    fn values(batches: &[RecordBatch]) -> Vec<i64> {
        let column = |b: &RecordBatch| b.column(0).as_any().downcast_ref::<Int64Array>().cloned();
        (batches.iter().filter_map(column))
            .flat_map(|a| a.values().to_vec())
            .collect()
    }

    #[test]
    fn small_batches_join_in_order_and_large_ones_pass_as_they_are() {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let mut input = Vec::new();
        let mut next = 0;
        for rows in [30, 0, 45, 20, 500, 10, 40, 40, 40, 7] {
            input.push(ints(&schema, next..next + rows));
            next += rows;
        }
        let out = run(input, schema, 100);
        let sizes: Vec<usize> = out.iter().map(RecordBatch::num_rows).collect();
        // 95 gathered before the large batch, which passes whole; then 100 of the small
        // ones after it, and the 37 left at the end.
        assert_eq!(sizes, vec![95, 500, 100, 37]);
        assert_eq!(values(&out), (0..next).collect::<Vec<_>>());
    }

    #[test]
    fn wide_rows_are_not_gathered_and_an_error_ends_the_stream() {
        let schema = Arc::new(Schema::new(vec![Field::new("b", DataType::Binary, false)]));
        let wide = |n: usize| {
            let payload = vec![7u8; 64 << 10];
            let column = BinaryArray::from_iter_values((0..n).map(|_| payload.as_slice()));
            RecordBatch::try_new(schema.clone(), vec![Arc::new(column)]).unwrap()
        };
        let out = run(vec![wide(3), wide(2), wide(4)], schema.clone(), 8192);
        let sizes: Vec<usize> = out.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes, vec![3, 2, 4]);
        assert!(out.iter().all(|b| b.column(0).len() == b.num_rows()));

        let failing = futures::stream::iter(vec![
            Ok(wide(1)),
            Err(DataFusionError::Execution("damaged".into())),
        ])
        .boxed();
        let got: Vec<Result<RecordBatch>> =
            futures::executor::block_on(coalesce_small(failing, schema, 8192).collect());
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ok() && got[1].is_err());
        let small = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let failing = futures::stream::iter(vec![
            Ok(ints(&small, 0..5)),
            Err(DataFusionError::Execution("damaged".into())),
            Ok(ints(&small, 5..9)),
        ])
        .boxed();
        let got: Vec<Result<RecordBatch>> =
            futures::executor::block_on(coalesce_small(failing, small, 8192).collect());
        assert!(matches!(got.as_slice(), [Err(_)]), "{got:?}");
    }
}
