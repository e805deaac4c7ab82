//! Rows of several streams, each ascending by `_rowid`, as one stream ascending by it: how
//! a rewrite merges fragments so that the fragment it writes holds one sorted run of ids.
//!
//! Why: each update commit leaves its rows' ids as one sorted run, and merging fragments
//! one after another keeps every run, so after 100 commits a take searched each of its ids
//! in 100 runs. Merged by id, a fragment is one run, searched once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::interleave_record_batch;
use arrow::datatypes::UInt64Type;
use futures::stream::BoxStream;
use futures::TryStreamExt;

use super::scan_request::ScanRequest;
use super::snapshot::Snapshot;
use crate::error::{Error, Result};
use crate::format::Fragment;
use crate::io::READ_BATCH_ROWS;
use crate::rowid::{RowAddress, RowId};

/// A group's rows as a rewrite reads them: merged in id order, or fragment after fragment.
pub(super) enum GroupRows {
    ById(IdOrderMerge),
    ByFragment(BoxStream<'static, Result<RecordBatch>>),
}

impl GroupRows {
    /// The rows of `group` as `request` reads them (every user column, then `_rowid`),
    /// merged in id order if `by_id` and the group gains by it ([`read_in_id_order`]).
    pub(super) async fn read(
        read: &Snapshot,
        group: &[Fragment],
        request: ScanRequest,
        by_id: bool,
    ) -> Result<Self> {
        let id_column = read.manifest().schema.fields.len();
        if by_id {
            if let Some(merge) = read_in_id_order(read, group, &request, id_column).await? {
                return Ok(Self::ById(merge));
            }
        }
        Ok(Self::ByFragment(read.scan(request).await?))
    }

    /// The next batch; `None` once every row is read.
    pub(super) async fn next(&mut self) -> Result<Option<RecordBatch>> {
        match self {
            Self::ById(merge) => merge.next_batch(READ_BATCH_ROWS).await,
            Self::ByFragment(rows) => rows.try_next().await,
        }
    }
}

/// At most this many bytes of rows (before compression) held at once by a merge: a batch
/// of each input. A group whose inputs would hold more is merged one fragment after another.
const MERGE_MEMORY_BYTES: u64 = 256 << 20;

/// The rows of `group` as `request` reads them (with `_rowid` at `id_column`), merged in
/// id order: each fragment read run by run of ascending ids, the runs merged. `None` when
/// the group is better read fragment after fragment: its runs already in order, or too
/// many or too wide to hold a batch of each.
async fn read_in_id_order(
    read: &Snapshot,
    group: &[Fragment],
    request: &ScanRequest,
    id_column: usize,
) -> Result<Option<IdOrderMerge>> {
    // Each fragment's runs of ascending ids, with their first and last ids, in the order
    // a scan of the group reads them (by fragment id, then offset).
    let mut fragments: Vec<&Fragment> = group.iter().collect();
    fragments.sort_by_key(|f| f.id);
    let mut runs = Vec::new();
    for fragment in fragments {
        let Some(sequence) = fragment.row_ids.sequence() else {
            let rows = 0..fragment.physical_rows;
            let id = |offset| RowAddress::new(fragment.id, offset).as_u64();
            runs.push((fragment.id, id(0), id(rows.end.saturating_sub(1)), rows));
            continue;
        };
        for rows in sequence.ascending_runs() {
            let id = |offset: u32| sequence.get(offset as usize).map_or(0, RowId::as_u64);
            runs.push((fragment.id, id(rows.start), id(rows.end - 1), rows));
        }
    }
    // Runs already in order one after another (native fragments) need no merge.
    if runs.windows(2).all(|w| w[0].2 < w[1].1) {
        return Ok(None);
    }
    let rows: u64 = group.iter().map(|f| u64::from(f.physical_rows)).sum();
    let fields: Vec<_> = read.manifest().schema.fields.iter().map(|f| f.id).collect();
    let bytes: u64 = group.iter().map(|f| f.uncompressed_bytes(&fields)).sum();
    let held = (bytes / rows.max(1)).saturating_mul(READ_BATCH_ROWS as u64);
    if held.saturating_mul(runs.len() as u64) > MERGE_MEMORY_BYTES {
        return Ok(None);
    }
    let mut streams = Vec::with_capacity(runs.len());
    for (fragment, _, _, rows) in runs {
        let request = ScanRequest {
            fragments: Some(vec![fragment]),
            fragment_rows: Some([(fragment, rows)].into()),
            ..request.clone()
        };
        streams.push(read.scan(request).await?);
    }
    Ok(Some(IdOrderMerge::new(streams, id_column).await?))
}

/// One input: its stream, the batch being taken from and where.
struct Input {
    rows: BoxStream<'static, Result<RecordBatch>>,
    batch: Option<RecordBatch>,
    at: usize,
}

/// The merge of streams ascending by the id column `id_column` (a `UInt64` column, unique
/// across all of them).
pub(super) struct IdOrderMerge {
    inputs: Vec<Input>,
    id_column: usize,
    /// (next id, input) of every input with rows left, smallest first.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    /// The last id given, which the next must be above.
    last: Option<u64>,
}

impl IdOrderMerge {
    /// The merge of `streams`, whose first batches it reads.
    pub(super) async fn new(
        streams: Vec<BoxStream<'static, Result<RecordBatch>>>,
        id_column: usize,
    ) -> Result<Self> {
        let mut merge = Self {
            inputs: Vec::with_capacity(streams.len()),
            id_column,
            heads: BinaryHeap::with_capacity(streams.len()),
            last: None,
        };
        for rows in streams {
            merge.inputs.push(Input {
                rows,
                batch: None,
                at: 0,
            });
            merge.advance(merge.inputs.len() - 1).await?;
        }
        Ok(merge)
    }

    /// The next at most `rows` rows in id order; `None` once every input is spent.
    pub(super) async fn next_batch(&mut self, rows: usize) -> Result<Option<RecordBatch>> {
        // The batches the rows come from, and for each input the one it is at among them.
        let mut sources: Vec<RecordBatch> = Vec::new();
        let mut source_of: Vec<Option<usize>> = vec![None; self.inputs.len()];
        let mut picked: Vec<(usize, usize)> = Vec::with_capacity(rows);
        while picked.len() < rows {
            let Some(Reverse((id, i))) = self.heads.pop() else {
                break;
            };
            // An input whose ids descend, or two sharing one, show here: the smaller id
            // comes out after the larger.
            if self.last.is_some_and(|last| id <= last) {
                return Err(Error::internal(format!(
                    "row id {id} met twice or out of order while merging fragments by id"
                )));
            }
            self.last = Some(id);
            let input = &mut self.inputs[i];
            let Some(batch) = &input.batch else {
                return Err(Error::internal("a merge input lost its batch"));
            };
            let source = *source_of[i].get_or_insert_with(|| {
                sources.push(batch.clone());
                sources.len() - 1
            });
            picked.push((source, input.at));
            input.at += 1;
            if input.at == batch.num_rows() {
                source_of[i] = None;
            }
            self.advance(i).await?;
        }
        if picked.is_empty() {
            return Ok(None);
        }
        let sources: Vec<&RecordBatch> = sources.iter().collect();
        Ok(Some(interleave_record_batch(&sources, &picked)?))
    }

    /// Moves input `i` to its next row (reading its next non-empty batch when its batch is
    /// spent) and queues that row's id.
    async fn advance(&mut self, i: usize) -> Result<()> {
        let input = &mut self.inputs[i];
        while input
            .batch
            .as_ref()
            .is_none_or(|b| input.at >= b.num_rows())
        {
            match input.rows.try_next().await? {
                Some(batch) => (input.batch, input.at) = (Some(batch), 0),
                None => {
                    input.batch = None;
                    return Ok(());
                }
            }
        }
        let Some(batch) = &input.batch else {
            return Ok(());
        };
        let ids = (batch
            .column(self.id_column)
            .as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| Error::internal("a merge input's ids are not UInt64"))?;
        self.heads.push(Reverse((ids.value(input.at), i)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use futures::StreamExt;
    use proptest::prelude::*;

    use super::*;

    fn batch(ids: &[u64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("v", DataType::Int64, false),
            Field::new("_rowid", DataType::UInt64, false),
        ]));
        let values = Int64Array::from_iter_values(ids.iter().map(|&i| i as i64 * 10));
        let ids = UInt64Array::from(ids.to_vec());
        RecordBatch::try_new(schema, vec![Arc::new(values), Arc::new(ids)]).expect("a batch")
    }

    /// A stream of `ids` in batches of the sizes `cuts` gives (some empty).
    fn stream(ids: Vec<u64>, cuts: Vec<usize>) -> BoxStream<'static, Result<RecordBatch>> {
        let mut batches = Vec::new();
        let mut rest = &ids[..];
        for cut in cuts {
            let (head, tail) = rest.split_at(cut.min(rest.len()));
            batches.push(Ok(batch(head)));
            rest = tail;
        }
        batches.push(Ok(batch(rest)));
        futures::stream::iter(batches).boxed()
    }

    async fn merged(
        streams: Vec<BoxStream<'static, Result<RecordBatch>>>,
        rows: usize,
    ) -> Result<Vec<(i64, u64)>> {
        let mut merge = IdOrderMerge::new(streams, 1).await?;
        let mut out = Vec::new();
        while let Some(batch) = merge.next_batch(rows).await? {
            assert!(batch.num_rows() <= rows);
            let values = batch
                .column(0)
                .as_primitive::<arrow::datatypes::Int64Type>();
            let ids = batch.column(1).as_primitive::<UInt64Type>();
            out.extend(values.iter().flatten().zip(ids.iter().flatten()));
        }
        Ok(out)
    }

    proptest! {
        /// Whatever the inputs' batches, the merge gives every row once, ascending by id,
        /// each with its own values.
        #[test]
        fn merges_sorted_inputs_into_one_sorted_run(
            inputs in prop::collection::vec(
                (prop::collection::btree_set(0u64..5000, 0..200), prop::collection::vec(0usize..40, 0..6)),
                0..6,
            ),
            rows in 1usize..64,
        ) {
            // Ids unique across inputs: each keeps those no earlier input took.
            let mut taken = std::collections::BTreeSet::new();
            let mut streams = Vec::new();
            for (ids, cuts) in inputs {
                let ids: Vec<u64> = ids.into_iter().filter(|id| taken.insert(*id)).collect();
                streams.push(stream(ids, cuts));
            }
            let out = futures::executor::block_on(merged(streams, rows)).expect("merges");
            let expected: Vec<(i64, u64)> = taken.iter().map(|&id| (id as i64 * 10, id)).collect();
            prop_assert_eq!(out, expected);
        }
    }

    #[test]
    fn refuses_inputs_out_of_order_or_sharing_an_id() {
        let run = |streams| futures::executor::block_on(merged(streams, 4));
        assert!(run(vec![stream(vec![3, 2], vec![])]).is_err());
        assert!(run(vec![stream(vec![1, 5], vec![1]), stream(vec![5], vec![])]).is_err());
        assert_eq!(run(vec![]).expect("nothing to merge"), vec![]);
    }
}
