//! The model test's schema side: nullable extra columns after `key, val, name`, added
//! (empty, or with values), dropped, renamed, widened and moved between (and concurrently with) row
//! operations. An extra added with values holds each then-live row's key; writes put NULL
//! in every extra. So the model keeps its row state as it is, and per extra the ids whose
//! row holds its key there: rows updated since read NULL, as do rows written since.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use futures::TryStreamExt;
use natal::internals::format::Schema;
use natal::{NewColumn, ScanRequest, SchemaChange, Snapshot, Table};
use proptest::prelude::*;
use proptest::sample::Index;

/// An extra column: its name and type, and the ids of the rows holding their key in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Extra {
    /// Which column this is, whatever its name (the count of names handed out when it was
    /// added).
    pub tag: u32,
    pub name: String,
    pub data_type: DataType,
    pub valued: Arc<BTreeSet<u64>>,
}

/// The extra columns of a version, in table order.
pub type Extras = Vec<Extra>;

/// A schema operation of the model test.
#[derive(Debug, Clone)]
pub enum SchemaOp {
    Add,
    /// Add a column holding each row's key (`Table::add_column_with_values`): (0) an Int32,
    /// (1) a month-day-nano interval of that many nanoseconds, a type Parquet cannot hold,
    /// or (2) a blob column of bytes made from the key, of every kind (`common::blob_written`).
    AddValued(u8),
    Drop(Index),
    Rename(Index),
    Widen(Index),
    /// Move an extra to another place among the extras (after `name` or after another).
    Move(Index, Index),
}

pub fn schema_op() -> impl Strategy<Value = SchemaOp> {
    prop_oneof![
        2 => Just(SchemaOp::Add),
        3 => (0u8..3).prop_map(SchemaOp::AddValued),
        1 => any::<Index>().prop_map(SchemaOp::Drop),
        1 => any::<Index>().prop_map(SchemaOp::Rename),
        1 => any::<Index>().prop_map(SchemaOp::Widen),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| SchemaOp::Move(a, b)),
    ]
}

/// The change `op` asks of a table with `extras` whose live rows are `live`, and the extras
/// it leaves; `None` when there is no extra to drop, rename or widen. Widening an Int64
/// extra changes nothing. (For [`SchemaOp::AddValued`] the change only names the column.)
pub fn plan_schema(
    op: &SchemaOp,
    extras: &Extras,
    names: &mut u32,
    live: impl Iterator<Item = u64>,
) -> Option<(SchemaChange, Extras)> {
    let mut after = extras.clone();
    let pick = |index: &Index| (!extras.is_empty()).then(|| index.index(extras.len()));
    *names += 1;
    let change = match op {
        SchemaOp::Add | SchemaOp::AddValued(_) => {
            let name = format!("x{names}");
            let valued = match op {
                SchemaOp::AddValued(_) => live.collect(),
                _ => BTreeSet::new(),
            };
            let data_type = match op {
                SchemaOp::AddValued(1) => INTERVAL,
                SchemaOp::AddValued(2) => DataType::LargeBinary,
                _ => DataType::Int32,
            };
            after.push(Extra {
                tag: *names,
                name: name.clone(),
                data_type: data_type.clone(),
                valued: Arc::new(valued),
            });
            SchemaChange::AddColumn {
                name: name.into(),
                data_type,
            }
        }
        SchemaOp::Drop(index) => {
            let at = pick(index)?;
            let name = after.remove(at).name;
            SchemaChange::DropColumn { name: name.into() }
        }
        SchemaOp::Rename(index) => {
            let at = pick(index)?;
            let to = format!("r{names}");
            let from = std::mem::replace(&mut after[at].name, to.clone());
            SchemaChange::RenameColumn {
                from: from.into(),
                to,
            }
        }
        SchemaOp::Widen(index) => {
            let at = pick(index)?;
            if matches!(after[at].data_type, INTERVAL | DataType::LargeBinary) {
                return None;
            }
            after[at].data_type = DataType::Int64;
            SchemaChange::SetDataType {
                name: after[at].name.as_str().into(),
                data_type: DataType::Int64,
            }
        }
        SchemaOp::Move(index, place) => {
            let at = pick(index)?;
            let moving = after.remove(at);
            let slot = place.index(after.len() + 1);
            let sibling = match slot {
                0 => "name".to_string(),
                _ => after[slot - 1].name.clone(),
            };
            let name = moving.name.as_str().into();
            after.insert(slot, moving);
            SchemaChange::Move {
                name,
                to: natal::Position::After(sibling),
            }
        }
    };
    Some((change, after))
}

/// The extras a schema change planned against an older state leaves on `now`: `planned`,
/// with each column's rows as `now` has them (rewrites since the plan forgot some).
pub fn schema_changed(now: &Extras, planned: Extras) -> Extras {
    planned
        .into_iter()
        .map(|mut extra| {
            if let Some(current) = now.iter().find(|e| e.tag == extra.tag) {
                extra.valued = current.valued.clone();
            }
            extra
        })
        .collect()
}

/// Rows `ids` were written with NULL in the extras `tags` (a rewrite or patch padded to its
/// plan's schema): none of those extras holds their key now.
pub fn forget(extras: &mut Extras, tags: &[u32], ids: impl Iterator<Item = u64> + Clone) {
    for extra in extras.iter_mut().filter(|e| tags.contains(&e.tag)) {
        if ids.clone().any(|id| extra.valued.contains(&id)) {
            let valued = Arc::make_mut(&mut extra.valued);
            for id in ids.clone() {
                valued.remove(&id);
            }
        }
    }
}

pub use crate::common::INTERVAL;

/// Adds a column `name` of `data_type` (Int32 or [`INTERVAL`]) holding each live row's key.
pub async fn add_valued(
    table: &Table,
    name: &str,
    data_type: DataType,
) -> natal::Result<natal::Committed> {
    let column = NewColumn {
        name: name.to_string(),
        data_type: data_type.clone(),
        nullable: true,
        inputs: vec!["key".to_string()],
        default_value: None,
        blob: (data_type == DataType::LargeBinary).then_some(crate::common::MODEL_BLOB),
    };
    let keys = move |batch: &RecordBatch| -> natal::Result<arrow::array::ArrayRef> {
        if data_type == DataType::LargeBinary {
            let keys = batch.column(0).as_primitive::<Int64Type>();
            let values: arrow::array::LargeBinaryArray = keys
                .iter()
                .map(|k| k.map(crate::common::blob_written))
                .collect();
            return Ok(Arc::new(values));
        }
        if data_type == crate::common::INTERVAL {
            let keys = batch.column(0).as_primitive::<Int64Type>();
            let intervals: arrow::array::IntervalMonthDayNanoArray = keys
                .iter()
                .map(|k| k.map(|k| arrow::datatypes::IntervalMonthDayNano::new(0, 0, k)))
                .collect();
            return Ok(Arc::new(intervals));
        }
        Ok(arrow::compute::cast(batch.column(0), &data_type)?)
    };
    table.add_column_with_values(column, &keys).await
}

/// Checks `snapshot`'s extras against the model's: names and types, and per live row the
/// key where the model says the row holds it, NULL elsewhere.
pub async fn check_extras(snapshot: &Snapshot, extras: &Extras) {
    let columns: Vec<(String, DataType)> = snapshot.schema().fields[3..]
        .iter()
        .map(|f| (f.name.clone(), f.data_type.clone()))
        .collect();
    let expected: Vec<(String, DataType)> = extras
        .iter()
        .map(|e| (e.name.clone(), e.data_type.clone()))
        .collect();
    let version = snapshot.version();
    assert_eq!(columns, expected, "version {version}'s columns");
    let request = ScanRequest {
        with_row_id: true,
        ..Default::default()
    };
    let batches: Vec<RecordBatch> = snapshot
        .scan(request)
        .await
        .expect("scan")
        .try_collect()
        .await
        .expect("scan");
    for batch in batches {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let ids = batch
            .column(batch.num_columns() - 1)
            .as_primitive::<arrow::datatypes::UInt64Type>();
        for (at, extra) in extras.iter().enumerate() {
            let column = crate::common::as_keys(batch.column(3 + at));
            let values = column.as_primitive::<Int64Type>();
            for i in 0..batch.num_rows() {
                let id = ids.value(i);
                let want = extra.valued.contains(&id).then(|| keys.value(i));
                let got = values.is_valid(i).then(|| values.value(i));
                assert_eq!(got, want, "version {version}: row {id}'s {}", extra.name);
            }
        }
    }
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

/// An update (see `common::add_to_val`) whose rows keep their extras' values, as read.
pub fn carried_update(
    delta: i64,
    schema: Arc<Schema>,
) -> impl Fn(&RecordBatch) -> natal::Result<RecordBatch> + Send + Sync {
    let update = crate::common::add_to_val(delta);
    move |batch: &RecordBatch| {
        let mut columns = update(batch)?.columns()[..3].to_vec();
        columns.extend_from_slice(&batch.columns()[3..schema.fields.len()]);
        Ok(RecordBatch::try_new(schema.to_arrow(), columns)?)
    }
}

/// An update (see `common::add_to_val`) whose output is padded to `schema`.
pub fn padded_update(
    delta: i64,
    schema: Arc<Schema>,
) -> impl Fn(&RecordBatch) -> natal::Result<RecordBatch> + Send + Sync {
    let update = crate::common::add_to_val(delta);
    move |batch: &RecordBatch| Ok(pad(update(batch)?, &schema))
}
