//! Upserts ([`Table::upsert`]): rows merged by a key column. A row whose key matches a live
//! row replaces it and keeps its id; the others are appended with new ids, in one version.
//! The input may hold some of the table's columns only (the key among them): a matched row
//! then changes only those, and an inserted row gets nulls in the others. When the columns
//! an upsert changes hold a small share of the table's bytes (its patch share), matched rows
//! get row patches of those columns and stay where they are; otherwise they are rewritten.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, RecordBatch, UInt32Array};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{Field as ArrowField, FieldRef, Schema as ArrowSchema};
use arrow::row::{RowConverter, SortField};
use futures::TryStreamExt;

use super::scan_request::ScanRequest;
use super::write::system_columns;
use super::{Committed, RowChangeSet, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::Schema;
use crate::rowid::{RowAddress, RowId};

/// Rows of the input with the id and address of the live row each replaces.
type Matched = Vec<(RecordBatch, Vec<(RowId, RowAddress)>)>;

impl Table {
    /// Merges rows by the key column `key`: a row whose key matches a live row replaces it
    /// and keeps its id; other rows are appended with new ids. The input holds every column
    /// of the table, or some of them with `key` among them: matched rows then keep their
    /// other columns' values, and appended rows get nulls there. Matched rows are written
    /// as row patches of the given columns when those are at most the table's patch share
    /// of its bytes ([`Self::set_patch_max_share`]), and rewritten otherwise.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an unknown key column, a column the table does not have
    /// or of another type, batches with different columns, a key that appears twice in the
    /// input, and a `NOT NULL` column the input does not give when some row is appended.
    /// Nothing is written then.
    pub async fn upsert(&self, key: &str, batches: Vec<RecordBatch>) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let schema = read.schema().clone();
        let key_position = (schema.fields.iter().position(|f| f.name == key))
            .ok_or_else(|| Error::invalid(format!("no column named '{key}' to merge on")))?;
        let given = given_columns(&schema, &batches, key)?;
        let wide = (batches.iter())
            .map(|batch| widened(&schema, &given, batch))
            .collect::<Result<Vec<_>>>()?;
        let found = matched_rows(&read, key_position, &wide).await?;
        let mut matched: Matched = Vec::with_capacity(wide.len());
        let mut inserted = Vec::with_capacity(wide.len());
        for (batch, found) in wide.into_iter().zip(found) {
            let is_match: BooleanArray = found.iter().map(|m| Some(m.is_some())).collect();
            let unmatched = filter_record_batch(&batch, &arrow::compute::not(&is_match)?)?;
            if unmatched.num_rows() > 0 {
                inserted.push(insertable(&schema, &given, unmatched)?);
            }
            let ids: Vec<(RowId, RowAddress)> = found.into_iter().flatten().collect();
            matched.push((filter_record_batch(&batch, &is_match)?, ids));
        }
        // Matched rows share their key with the row they replace: only the rest changes.
        let changed: Vec<usize> = given.into_iter().filter(|&p| p != key_position).collect();
        let ids: Vec<u32> = changed.iter().map(|&p| schema.fields[p].id).collect();
        let any_matched = matched.iter().any(|(b, _)| b.num_rows() > 0);
        if any_matched && read.patches_suit(&ids, read.patch_max_share()) {
            let changes = RowChangeSet {
                updated: matched,
                inserted,
                ..Default::default()
            };
            return self.planned_at(read).patch_changes(&changed, changes).await;
        }
        let updated = match changed.len() + 1 == schema.fields.len() {
            true => matched,
            // Only the key given: a matched row has nothing to change.
            false if changed.is_empty() => Vec::new(),
            false => whole_rows(&read, &changed, matched).await?,
        };
        let changes = RowChangeSet {
            updated,
            inserted,
            ..Default::default()
        };
        self.planned_at(read).commit_changes(changes).await
    }
}

/// The positions in `schema` (ascending) of the columns every batch of an upsert's input
/// holds: all of the table's, or some with `key` among them, each of its type.
fn given_columns(schema: &Schema, batches: &[RecordBatch], key: &str) -> Result<Vec<usize>> {
    let Some(first) = batches.first() else {
        return Ok((0..schema.fields.len()).collect());
    };
    let input = first.schema();
    let mut given = Vec::with_capacity(input.fields().len());
    for field in input.fields() {
        let position =
            (schema.fields.iter().position(|f| &f.name == field.name())).ok_or_else(|| {
                Error::invalid(format!(
                    "the table has no column '{}' to upsert",
                    field.name()
                ))
            })?;
        if given.contains(&position) {
            let name = field.name();
            return Err(Error::invalid(format!("column '{name}' is given twice")));
        }
        given.push(position);
    }
    if !input.fields().iter().any(|f| f.name() == key) {
        return Err(Error::invalid(format!(
            "the upsert input has no key column '{key}'"
        )));
    }
    // In table order: the input's own, checked as a whole input's is.
    let mut ordered = given.clone();
    ordered.sort_unstable();
    let expected = Schema {
        fields: ordered.iter().map(|&p| schema.fields[p].clone()).collect(),
        ..schema.clone()
    };
    for batch in batches {
        let arranged = (ordered.iter())
            .map(|&p| {
                batch
                    .schema()
                    .field_with_name(&schema.fields[p].name)
                    .cloned()
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::invalid("the upsert input's batches have different columns"))?;
        if batch.num_columns() != ordered.len() {
            return Err(Error::invalid(
                "the upsert input's batches have different columns",
            ));
        }
        expected.check_input(&ArrowSchema::new(arranged))?;
    }
    Ok(ordered)
}

/// `batch` (the columns at `given`, by name) as every column of `schema`, in its order,
/// those not given as nulls (their fields nullable).
fn widened(schema: &Schema, given: &[usize], batch: &RecordBatch) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let input = batch.schema();
    let mut fields: Vec<FieldRef> = Vec::with_capacity(schema.fields.len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields.len());
    for (position, field) in schema.fields.iter().enumerate() {
        match given.contains(&position) {
            true => {
                let at = input.index_of(&field.name)?;
                fields.push(input.fields()[at].clone());
                columns.push(batch.column(at).clone());
            }
            false => {
                let arrow = field.to_arrow();
                fields.push(Arc::new(ArrowField::new(
                    arrow.name(),
                    arrow.data_type().clone(),
                    true,
                )));
                columns.push(new_null_array(arrow.data_type(), rows));
            }
        }
    }
    Ok(RecordBatch::try_new(
        Arc::new(ArrowSchema::new(fields)),
        columns,
    )?)
}

/// `unmatched` rows (widened) to append: refused when a column they get no value for is
/// `NOT NULL`.
fn insertable(schema: &Schema, given: &[usize], unmatched: RecordBatch) -> Result<RecordBatch> {
    let missing =
        (schema.fields.iter().enumerate()).find(|(p, f)| !f.nullable && !given.contains(p));
    if let Some((_, field)) = missing {
        return Err(Error::invalid(format!(
            "column '{}' is NOT NULL and the upsert input does not give it, so its {} rows \
             matching no row cannot be appended",
            field.name,
            unmatched.num_rows()
        )));
    }
    Ok(unmatched)
}

/// Per input batch and row, the live row of `read` its key matches, if one does. The input's
/// keys (the small side) are indexed, then probed with the table's: memory and hashing stay
/// proportional to the input, not to the table.
async fn matched_rows(
    read: &Snapshot,
    key_position: usize,
    batches: &[RecordBatch],
) -> Result<Vec<Vec<Option<(RowId, RowAddress)>>>> {
    let key_field = &read.schema().fields[key_position];
    let converter = RowConverter::new(vec![SortField::new(key_field.data_type.clone())])?;
    let mut wanted: HashMap<Vec<u8>, (usize, usize)> = HashMap::new();
    for (b, batch) in batches.iter().enumerate() {
        let column = batch.column(key_position);
        let keys = converter.convert_columns(std::slice::from_ref(column))?;
        for i in (0..batch.num_rows()).filter(|&i| column.is_valid(i)) {
            if (wanted.insert(keys.row(i).as_ref().to_vec(), (b, i))).is_some() {
                return Err(Error::invalid(format!(
                    "key column '{}' repeats a value in the upsert input",
                    key_field.name
                )));
            }
        }
    }
    let mut matched: Vec<Vec<Option<(RowId, RowAddress)>>> =
        batches.iter().map(|b| vec![None; b.num_rows()]).collect();
    let mut scan = read
        .scan(ScanRequest {
            columns: Some(vec![key_field.name.clone()]),
            with_row_id: true,
            with_row_addr: true,
            ..Default::default()
        })
        .await?;
    while let Some(batch) = scan.try_next().await? {
        let column = batch.column(0);
        let keys = converter.convert_columns(std::slice::from_ref(column))?;
        let (ids, addrs) = system_columns(&batch)?;
        for i in (0..batch.num_rows()).filter(|&i| column.is_valid(i)) {
            // A key the table holds twice (no constraint forbids it) is replaced once.
            if let Some(&(b, row)) = wanted.get(keys.row(i).as_ref()) {
                matched[b][row].get_or_insert((ids[i], addrs[i]));
            }
        }
    }
    Ok(matched)
}

/// `matched` (widened rows giving only the columns at `changed` and the key) as whole rows:
/// the other columns' values read from the rows they replace.
async fn whole_rows(read: &Snapshot, changed: &[usize], matched: Matched) -> Result<Matched> {
    let schema = read.schema();
    let mut whole = Vec::with_capacity(matched.len());
    for (batch, rows) in matched {
        if rows.is_empty() {
            continue;
        }
        let ids: Vec<RowId> = rows.iter().map(|&(id, _)| id).collect();
        let request = ScanRequest {
            columns: None,
            with_row_id: true,
            with_row_addr: true,
            ..Default::default()
        };
        let current = read.take(&ids, request).await?;
        let (found, _) = system_columns(&current)?;
        let at: HashMap<RowId, u32> = (found.iter().enumerate())
            .map(|(i, &id)| (id, i as u32))
            .collect();
        let order = (ids.iter())
            .map(|id| at.get(id).copied().ok_or(Error::RowNotFound(*id)))
            .collect::<Result<Vec<u32>>>()?;
        let order = UInt32Array::from(order);
        let mut fields: Vec<FieldRef> = Vec::with_capacity(schema.fields.len());
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields.len());
        for position in 0..schema.fields.len() {
            let (field, column) = match changed.contains(&position) {
                true => (
                    batch.schema_ref().field(position),
                    batch.column(position).clone(),
                ),
                false => (
                    current.schema_ref().field(position),
                    arrow::compute::take(current.column(position), &order, None)?,
                ),
            };
            fields.push(Arc::new(field.clone()));
            columns.push(column);
        }
        let key_and_changed = RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns)?;
        whole.push((key_and_changed, rows));
    }
    Ok(whole)
}
