//! The model test's schema side: nullable extra columns after `key, val, name`, added,
//! dropped, renamed and widened between (and concurrently with) row operations. Writes put
//! NULL in every extra, so the model keeps its row state as it is and checks each version's
//! extras (names and types) apart, and that every extra reads NULL.

use std::sync::Arc;

use arrow::array::{new_null_array, RecordBatch};
use arrow::datatypes::DataType;
use natal::internals::format::Schema;
use natal::SchemaChange;
use proptest::prelude::*;
use proptest::sample::Index;

/// The extra columns of a version, in table order.
pub type Extras = Vec<(String, DataType)>;

/// A schema operation of the model test.
#[derive(Debug, Clone)]
pub enum SchemaOp {
    Add,
    Drop(Index),
    Rename(Index),
    Widen(Index),
}

pub fn schema_op() -> impl Strategy<Value = SchemaOp> {
    prop_oneof![
        2 => Just(SchemaOp::Add),
        1 => any::<Index>().prop_map(SchemaOp::Drop),
        1 => any::<Index>().prop_map(SchemaOp::Rename),
        1 => any::<Index>().prop_map(SchemaOp::Widen),
    ]
}

/// The change `op` asks of a table with `extras`, and the extras it leaves; `None` when
/// there is no extra to drop, rename or widen. Widening an Int64 extra changes nothing.
pub fn plan_schema(
    op: &SchemaOp,
    extras: &Extras,
    names: &mut u32,
) -> Option<(SchemaChange, Extras)> {
    let mut after = extras.clone();
    let pick = |index: &Index| (!extras.is_empty()).then(|| index.index(extras.len()));
    *names += 1;
    let change = match op {
        SchemaOp::Add => {
            let name = format!("x{names}");
            after.push((name.clone(), DataType::Int32));
            SchemaChange::AddColumn {
                name,
                data_type: DataType::Int32,
            }
        }
        SchemaOp::Drop(index) => {
            let at = pick(index)?;
            let (name, _) = after.remove(at);
            SchemaChange::DropColumn { name }
        }
        SchemaOp::Rename(index) => {
            let at = pick(index)?;
            let to = format!("r{names}");
            let from = std::mem::replace(&mut after[at].0, to.clone());
            SchemaChange::RenameColumn { from, to }
        }
        SchemaOp::Widen(index) => {
            let at = pick(index)?;
            after[at].1 = DataType::Int64;
            SchemaChange::SetDataType {
                name: after[at].0.clone(),
                data_type: DataType::Int64,
            }
        }
    };
    Some((change, after))
}

/// The extras of `schema`: its columns after the first three.
pub fn extras_of(schema: &Schema) -> Extras {
    schema.fields[3..]
        .iter()
        .map(|f| (f.name.clone(), f.data_type.clone()))
        .collect()
}

/// `batch` (`key, val, name`) with NULL in every extra of `schema`, the schema its write
/// plans against.
pub fn pad(batch: RecordBatch, schema: &Schema) -> RecordBatch {
    let rows = batch.num_rows();
    let mut columns = batch.columns()[..3].to_vec();
    for field in &schema.fields[3..] {
        columns.push(new_null_array(&field.data_type, rows));
    }
    RecordBatch::try_new(schema.to_arrow(), columns).expect("padded batch")
}

/// An update (see `common::add_to_val`) whose output is padded to `schema`.
pub fn padded_update(
    delta: i64,
    schema: Arc<Schema>,
) -> impl Fn(&RecordBatch) -> natal::Result<RecordBatch> + Send + Sync {
    let update = crate::common::add_to_val(delta);
    move |batch: &RecordBatch| Ok(pad(update(batch)?, &schema))
}
