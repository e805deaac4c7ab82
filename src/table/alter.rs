//! Schema changes on a table, one version each: those that rewrite no data file (see
//! `format/schema_change.rs` for what is allowed), and a column added with values, which
//! writes only that column, one file beside each fragment's (`commit/schema.rs` for how
//! both land and rebase).

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, UInt64Type};
use futures::TryStreamExt;

use super::commit::Action;
use super::scan_request::ScanRequest;
use super::write::{delete_files, surely_unpublished};
use super::{Committed, RowChanges, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::{DataFile, Field, Fragment, Schema, SchemaChange};
use crate::rowid::{FragmentId, RowAddress};

/// Computes an added column's values: given live rows of one fragment (the
/// [`NewColumn::inputs`] columns, then `_rowid`), returns one value per row, of the column's
/// type.
pub type ColumnValues<'a> = &'a (dyn Fn(&RecordBatch) -> Result<ArrayRef> + Send + Sync);

/// A column to add with values ([`Table::add_column_with_values`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewColumn {
    /// Its name.
    pub name: String,
    /// Its type.
    pub data_type: DataType,
    /// Whether it may hold nulls; when not, every value computed must be non-null.
    pub nullable: bool,
    /// The existing columns its values are computed from (may be none).
    pub inputs: Vec<String>,
    /// The value later rows written without the column get, as text cast to its type
    /// (SQL's `DEFAULT` of a constant; see [`Field::default_value`]); `None`: NULL.
    pub default_value: Option<String>,
    /// For a blob column (`data_type` `LargeBinary`): how its values are placed.
    pub blob: Option<crate::format::BlobColumn>,
}

impl Table {
    /// Changes the schema as `changes` say, in order, publishing one version for all of
    /// them (none when they change nothing: a column already of that type, or already
    /// nullable). Older versions keep the schema they were written with. A refused change is
    /// [`Error::SchemaChange`](crate::Error::SchemaChange) naming it, and commits nothing;
    /// so is widening an indexed column (checked as the change is applied, so an index
    /// built meanwhile counts too).
    pub async fn alter(&self, changes: Vec<SchemaChange>) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let from = read.manifest().schema.clone();
        let mut to = from.clone();
        for change in &changes {
            if let Some(next) = to.changed_by(change)? {
                to = next;
            }
        }
        if to == from {
            return Ok(Committed::unchanged(&read, RowChanges::default()));
        }
        self.commit(&read, alter_action(from, to, Vec::new())).await
    }

    /// Adds `column` with a value per existing row, computed by `values` fragment by
    /// fragment, in one version. Only the new column is written: one data file per
    /// fragment, beside its others; row ids, deletions and indexes are untouched, and rows
    /// written later without the column read NULL there.
    ///
    /// It commits against concurrent writers that only delete rows; one that added or
    /// rewrote rows meanwhile (an append, update or compaction) is a conflict, as those rows
    /// have no value computed. A refused column is [`Error::SchemaChange`]; an error of
    /// `values`, or a value of the wrong type or count, commits nothing and leaves no file.
    pub async fn add_column_with_values(
        &self,
        column: NewColumn,
        values: ColumnValues<'_>,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let from = read.manifest().schema.clone();
        let change = match column.blob {
            Some(blob) if column.data_type == DataType::LargeBinary => {
                SchemaChange::AddBlobColumn {
                    name: column.name.as_str().into(),
                    blob,
                }
            }
            Some(_) => {
                return Err(Error::invalid(format!(
                    "blob column {} must be LargeBinary, not {}",
                    column.name, column.data_type
                )))
            }
            None => SchemaChange::AddColumn {
                name: column.name.as_str().into(),
                data_type: column.data_type.clone(),
            },
        };
        let mut to = from
            .changed_by(&change)?
            .ok_or_else(|| Error::internal("adding a column changed nothing"))?;
        for input in &column.inputs {
            if from.field_by_name(input).is_none() {
                return Err(Error::SchemaChange {
                    change: change.to_string(),
                    reason: format!("no column named '{input}' to compute it from"),
                });
            }
        }
        let field = to
            .fields
            .last_mut()
            .ok_or_else(|| Error::internal("adding a column left no column"))?;
        field.nullable = column.nullable;
        field.default_value = column.default_value.clone();
        // The file's field is nullable whatever the column: a deleted row's slot may hold
        // nothing (it is never read), and a file need not be stricter than its table.
        let file_schema = Schema {
            fields: vec![Field {
                nullable: true,
                default_value: None,
                ..field.clone()
            }],
            next_field_id: to.next_field_id,
            metadata: Default::default(),
            constraints: Vec::new(),
        };
        let field = field.clone();
        let mut written: Vec<(FragmentId, DataFile)> = Vec::new();
        let outcome = async {
            for fragment in &read.manifest().fragments {
                let array = fragment_values(&read, fragment, &column, &field, values).await?;
                let batch = RecordBatch::try_new(file_schema.to_arrow(), vec![array])?;
                let file = self.store.write_data_file(&file_schema, &[batch]).await?;
                written.push((fragment.id, file));
            }
            self.commit(&read, alter_action(from, to, written.clone()))
                .await
        }
        .await;
        if outcome.as_ref().is_err_and(surely_unpublished) {
            delete_files(
                &self.store,
                &file_schema,
                written.iter().map(|(_, file)| file),
            )
            .await;
        }
        outcome
    }
}

fn alter_action(from: Schema, to: Schema, column_files: Vec<(FragmentId, DataFile)>) -> Action {
    Action::AlterSchema {
        from: Box::new(from),
        to: Box::new(to),
        column_files,
    }
}

/// The added column's value for every physical row of `fragment`, by offset: computed for
/// its live rows; a deleted row's slot holds a live row's value (so a NOT NULL column holds
/// none), or NULL where no row is live.
async fn fragment_values(
    read: &Snapshot,
    fragment: &Fragment,
    column: &NewColumn,
    field: &Field,
    values: ColumnValues<'_>,
) -> Result<ArrayRef> {
    let refused = |reason: String| Error::SchemaChange {
        change: format!("ADD COLUMN {} {}", field.name, field.data_type),
        reason,
    };
    let mut scan = read
        .scan(ScanRequest {
            columns: Some(column.inputs.clone()),
            with_row_id: true,
            with_row_addr: true,
            fragments: Some(vec![fragment.id]),
            ..Default::default()
        })
        .await?;
    let mut computed: Vec<ArrayRef> = Vec::new();
    let mut offsets: Vec<u32> = Vec::new();
    while let Some(batch) = scan.try_next().await? {
        let addr_column = batch.num_columns() - 1;
        let addrs = batch
            .column(addr_column)
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| Error::internal("scan lost _rowaddr"))?;
        offsets.extend(
            addrs
                .values()
                .iter()
                .map(|&a| RowAddress::from_u64(a).offset()),
        );
        let input = batch.project(&(0..addr_column).collect::<Vec<_>>())?;
        let array = values(&input)?;
        if array.len() != input.num_rows() {
            return Err(refused(format!(
                "{} values were computed for {} rows",
                array.len(),
                input.num_rows()
            )));
        }
        if array.data_type() != &field.data_type {
            return Err(refused(format!(
                "values of type {} were computed for a column of type {}",
                array.data_type(),
                field.data_type
            )));
        }
        if !field.nullable && array.null_count() > 0 {
            return Err(refused(
                "a value computed for the NOT NULL column is NULL".into(),
            ));
        }
        computed.push(array);
    }
    let rows = fragment.physical_rows as usize;
    if offsets.is_empty() {
        return Ok(arrow::array::new_null_array(&field.data_type, rows));
    }
    let parts: Vec<&dyn Array> = computed.iter().map(|a| a.as_ref()).collect();
    let live = arrow::compute::concat(&parts)?;
    if offsets.len() == rows {
        return Ok(live);
    }
    let mut positions = vec![0u32; rows];
    for (position, &offset) in offsets.iter().enumerate() {
        positions[offset as usize] = position as u32;
    }
    Ok(arrow::compute::take(
        &live,
        &UInt32Array::from(positions),
        None,
    )?)
}
