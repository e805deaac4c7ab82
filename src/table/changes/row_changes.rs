//! A set of row changes committed as one version: rows deleted, rows given new values
//! (keeping their ids, as an update's), rows inserted (native). What a MERGE makes, and what
//! an embedder that computes its own changes commits.

use std::collections::HashSet;

use arrow::array::{RecordBatch, UInt64Array};

use crate::error::{Error, Result};
use crate::rowid::{RowAddress, RowId};
use crate::table::commit::{Action, CarriedRow};
use crate::table::write::FragmentWriter;
use crate::table::{Committed, Table};

/// Rows to change in one commit ([`Table::commit_changes`]); ids and addresses as read
/// from the version the handle plans against.
#[derive(Debug, Default, Clone)]
pub struct RowChangeSet {
    /// Rows to delete.
    pub deleted: Vec<(RowId, RowAddress)>,
    /// New values of rows, in the table's schema, each row keeping its id: per batch, the
    /// id and address of each of its rows.
    pub updated: Vec<(RecordBatch, Vec<(RowId, RowAddress)>)>,
    /// New rows, in the table's schema.
    pub inserted: Vec<RecordBatch>,
}

impl RowChangeSet {
    /// True when it changes no row.
    pub fn is_empty(&self) -> bool {
        self.deleted.is_empty()
            && self.updated.iter().all(|(b, _)| b.num_rows() == 0)
            && self.inserted.iter().all(|b| b.num_rows() == 0)
    }

    /// The rows it deletes, then those it updates, each with its address; an error when an
    /// updated batch and its ids differ in length or a row is named twice (deleted and
    /// updated, or updated twice).
    pub(in crate::table) fn changed_rows(&self) -> Result<Vec<(RowId, RowAddress)>> {
        let mut rows = self.deleted.clone();
        for (batch, ids) in &self.updated {
            if batch.num_rows() != ids.len() {
                return Err(Error::invalid(format!(
                    "{} updated rows with {} ids",
                    batch.num_rows(),
                    ids.len()
                )));
            }
            rows.extend(ids.iter().copied());
        }
        let mut named: HashSet<RowId> = HashSet::with_capacity(rows.len());
        if let Some((id, _)) = rows.iter().find(|(id, _)| !named.insert(*id)) {
            return Err(Error::invalid(format!("row {id} is changed twice")));
        }
        Ok(rows)
    }
}

/// Rows given new values, with each row's id and address as read.
type UpdatedRows = (RecordBatch, Vec<(RowId, RowAddress)>);

/// The updated rows as one batch in id order, with their ids: rows carried in id order
/// keep their fragment's row-id sequence a few runs, where join order would make it one
/// entry per row.
fn in_id_order(updated: Vec<UpdatedRows>) -> Result<Option<UpdatedRows>> {
    let Some(schema) = updated.first().map(|(b, _)| b.schema()) else {
        return Ok(None);
    };
    let rows: Vec<(RowId, RowAddress)> = updated
        .iter()
        .flat_map(|(_, rows)| rows.iter().copied())
        .collect();
    let ids = UInt64Array::from_iter_values(rows.iter().map(|(id, _)| id.as_u64()));
    let batches: Vec<RecordBatch> = updated.into_iter().map(|(b, _)| b).collect();
    let all = arrow::compute::concat_batches(&schema, &batches)?;
    let order = arrow::compute::sort_to_indices(&ids, None, None)?;
    let sorted = arrow::compute::take_record_batch(&all, &order)?;
    let rows = order.values().iter().map(|&i| rows[i as usize]).collect();
    Ok(Some((sorted, rows)))
}

impl Table {
    /// Commits `changes` as one version: deleted rows become tombstones, updated rows move
    /// to new fragments keeping their ids (point entries), inserted rows are native. It
    /// rebases as an update does: a row deleted or updated meanwhile is a conflict. A row
    /// named twice (deleted and updated, or updated twice) is an error; nothing is written.
    pub async fn commit_changes(&self, changes: RowChangeSet) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        read.manifest().check_writable(&self.store.display())?;
        let rows = changes.changed_rows()?;
        let schema = read.schema().clone();
        let target = read.manifest().fragment_row_target();
        let mut writer = FragmentWriter::new(&self.store, &schema, target, true);
        let written = async {
            if let Some((batch, rows)) = in_id_order(changes.updated)? {
                let carried = (rows.into_iter())
                    .map(|(id, addr)| Some(CarriedRow::updated_at(read.manifest(), id, addr)))
                    .collect();
                writer.push(batch, carried).await?;
            }
            for batch in changes.inserted {
                writer.push_new(batch).await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        let fragments = writer.finish_after(written).await?;
        // A commit that fails deletes what it wrote (`Table::commit_manifest`).
        self.commit_write_then_merge(&read, Action::Update { rows, fragments }, None)
            .await
    }
}
