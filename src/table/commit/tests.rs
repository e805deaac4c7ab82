//! The conflict matrix (DESIGN.md §4): every operation planned at one version and committed
//! after every other operation landed on top of it is either rebased — and then the table
//! holds what running the two in turn gives — or refused with [`Error::Conflict`] naming
//! both operations, committing nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use futures::TryStreamExt;
use object_store::memory::InMemory;

use crate::error::{Error, Result};
use crate::operation::Operation;
use crate::table::{CompactOptions, ScanRequest, Table, TableOptions};

/// The operations of the matrix. The table starts as two fragments, A (keys 0..4) and B
/// (keys 4..8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Append,
    /// Deletes key 1, in fragment A.
    DeleteA,
    /// Deletes key 5, in fragment B.
    DeleteB,
    /// Rewrites key 1 with its own value (a move).
    UpdateA,
    /// Merges A and B.
    Compact,
    Overwrite,
    /// Restores the two-fragment version.
    Restore,
    Checkpoint,
    CreateIndex,
}

const OPS: [Op; 9] = [
    Op::Append,
    Op::DeleteA,
    Op::DeleteB,
    Op::UpdateA,
    Op::Compact,
    Op::Overwrite,
    Op::Restore,
    Op::Checkpoint,
    Op::CreateIndex,
];

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Rebased,
    Conflict,
}

/// What DESIGN.md §4 says of `planned` committed after `landed`.
fn expected(planned: Op, landed: Op) -> Outcome {
    use Op::*;
    match (planned, landed) {
        (Overwrite | Restore, _) => Outcome::Rebased,
        (_, Overwrite | Restore) => Outcome::Conflict,
        // The same row deleted or rewritten on both sides.
        (DeleteA | UpdateA, DeleteA | UpdateA) | (DeleteB, DeleteB) => Outcome::Conflict,
        // Compaction yields to any rewrite of its inputs but deletes, which it carries over.
        (Compact, UpdateA | Compact) => Outcome::Conflict,
        // The fragments an index was built from were compacted away, or indexed meanwhile.
        (CreateIndex, Compact | CreateIndex) => Outcome::Conflict,
        _ => Outcome::Rebased,
    }
}

const RESTORED_VERSION: u64 = 3;

fn schema() -> Schema {
    Schema::new(vec![Field::new("key", DataType::Int64, false)])
}

fn batch(keys: impl IntoIterator<Item = i64>) -> RecordBatch {
    let keys = Int64Array::from_iter_values(keys);
    RecordBatch::try_new(Arc::new(schema()), vec![Arc::new(keys)]).expect("a batch")
}

fn key_is(key: i64) -> impl Fn(&RecordBatch) -> Result<BooleanArray> + Send + Sync {
    move |batch: &RecordBatch| {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        Ok(keys.iter().map(|k| Some(k == Some(key))).collect())
    }
}

async fn run(table: &Table, op: Op) -> Result<()> {
    match op {
        Op::Append => table.append(vec![batch([100])]).await.map(drop),
        Op::DeleteA => table.delete_where(key_is(1)).await.map(drop),
        Op::DeleteB => table.delete_where(key_is(5)).await.map(drop),
        Op::UpdateA => {
            let same = |batch: &RecordBatch| Ok(batch.project(&[0])?);
            table.update_where(key_is(1), &same).await.map(drop)
        }
        Op::Compact => {
            let options = CompactOptions {
                target_rows_per_fragment: Some(10),
                ..Default::default()
            };
            let report = table.compact(options).await?;
            assert!(report.published, "the compaction merged A and B");
            Ok(())
        }
        Op::Overwrite => table.overwrite(vec![batch(0..8)]).await.map(drop),
        Op::Restore => table.restore(RESTORED_VERSION).await.map(drop),
        Op::Checkpoint => table.checkpoint().await.map(drop),
        Op::CreateIndex => table.create_index("by_key", "key").await.map(drop),
    }
}

/// What `op` does to the table's keys.
fn model(keys: &mut BTreeSet<i64>, op: Op) {
    match op {
        Op::Append => {
            keys.insert(100);
        }
        Op::DeleteA => {
            keys.remove(&1);
        }
        Op::DeleteB => {
            keys.remove(&5);
        }
        Op::Overwrite | Op::Restore => *keys = (0..8).collect(),
        Op::UpdateA | Op::Compact | Op::Checkpoint | Op::CreateIndex => {}
    }
}

async fn keys(table: &Table) -> BTreeSet<i64> {
    let batches: Vec<RecordBatch> = table
        .latest()
        .await
        .unwrap()
        .scan(ScanRequest::default())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_against_every_concurrent_one() {
    for planned in OPS {
        for landed in OPS {
            let options = TableOptions {
                max_rows_per_fragment: 4,
                merge: None,
                // Updates rewrite (a move), whatever they change; patches have their own
                // rules (`rebase.rs::patched_under`, the model test).
                patch_max_share: Some(0.0),
                ..Default::default()
            };
            let store = Arc::new(InMemory::new());
            let table = Table::create(store, "t".into(), &schema(), options)
                .await
                .unwrap();
            table.append(vec![batch(0..4)]).await.unwrap();
            let read = table.append(vec![batch(4..8)]).await.unwrap().version;
            assert_eq!(read, RESTORED_VERSION);
            let snapshot = table.at_version(read).await.unwrap();

            run(&table, landed).await.unwrap();
            let before = table.latest().await.unwrap().version();
            let mut expected_keys: BTreeSet<i64> = (0..8).collect();
            model(&mut expected_keys, landed);

            let outcome = run(&table.planned_at(snapshot), planned).await;
            let case = format!("{planned:?} planned at v{read}, after {landed:?}");
            match (expected(planned, landed), outcome) {
                (Outcome::Rebased, Ok(())) => {
                    model(&mut expected_keys, planned);
                    assert_eq!(table.latest().await.unwrap().version(), before + 1);
                }
                (
                    Outcome::Conflict,
                    Err(Error::Conflict {
                        operation, other, ..
                    }),
                ) => {
                    assert_eq!(operation, op_kind(planned), "{case}");
                    assert_eq!(other, Some(op_kind(landed)), "{case}");
                    assert_eq!(
                        table.latest().await.unwrap().version(),
                        before,
                        "{case}: nothing committed"
                    );
                }
                (want, got) => panic!("{case}: expected {want:?}, got {got:?}"),
            }
            assert_eq!(keys(&table).await, expected_keys, "{case}");
        }
    }
}

fn op_kind(op: Op) -> Operation {
    match op {
        Op::Append => Operation::Append,
        Op::DeleteA | Op::DeleteB => Operation::Delete,
        Op::UpdateA => Operation::Update,
        Op::Compact => Operation::Compact,
        Op::Overwrite => Operation::Overwrite,
        Op::Restore => Operation::Restore,
        Op::Checkpoint => Operation::Checkpoint,
        Op::CreateIndex => Operation::CreateIndex,
    }
}
