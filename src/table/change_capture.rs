//! Change data capture: on a table that records change data
//! ([`Manifest::change_data_feed`](crate::format::Manifest::change_data_feed)), a commit that
//! deletes or rewrites rows also writes the values those rows had to fragments of their own
//! that its version lists (Delta's `_change_data` files).
//!
//! An update captures the rows as its scan meets them; a delete (which reads no value) and
//! the other row-removing writes read them again at the commit.
//!
//! A change read then takes a row's preimage (or a deleted row's values) from the first
//! version in its range that captured the row: a few dense pages per commit, where the rows'
//! old places are scattered over every page of the table. Captured rows hold the values of
//! the version the commit read, and a row's values only change by a commit that captures
//! it, so the first capture of a row in a range holds its values at the range's start.

use arrow::array::RecordBatch;

use super::commit::{Action, CarriedRow, NewFragment};
use super::scan_request::{ScanRequest, ROW_ADDR, ROW_ID};
use super::write::FragmentWriter;
use super::{Committed, Snapshot, Table};
use crate::error::{Error, Result};
use crate::io::BlobReferences;
use crate::rowid::{RowAddress, RowId};

/// Rows captured per read: a bounded batch however many rows a commit removes.
const ROWS_PER_READ: usize = 64 * 1024;

impl Table {
    /// Starts (`true`) or stops recording change data. From the version this publishes on,
    /// every delete, update and merge also writes the values of the rows it removes, and
    /// change reads over those versions read them there (see the module's notes). Publishes
    /// nothing when the table already does as asked.
    pub async fn set_change_data_feed(&self, enabled: bool) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        if read.manifest().change_data_feed == enabled {
            return Ok(Committed::unchanged(&read, Default::default()));
        }
        self.commit(&read, Action::SetChangeDataFeed { enabled })
            .await
    }

    /// The change data of `action` planned on `read`: `None` when the table does not record
    /// change data or the action removes no row's values (an append, a compaction); else
    /// the captured rows' fragments, not yet committed (a failed commit deletes them).
    pub(super) async fn capture_change_data(
        &self,
        read: &Snapshot,
        action: &Action,
    ) -> Result<Option<Vec<NewFragment>>> {
        let rows = match action {
            Action::Delete { rows } | Action::Update { rows, .. } => rows,
            _ => return Ok(None),
        };
        if !read.manifest().change_data_feed {
            return Ok(None);
        }
        let mut rows: Vec<(RowId, RowAddress)> = rows.clone();
        // In id order: a change read's chunks of nearby ids then read nearby pages here too.
        rows.sort_unstable_by_key(|&(id, _)| id);
        rows.dedup_by_key(|&mut (id, _)| id);
        let schema = read.schema();
        let mut writer = FragmentWriter::new(
            &self.store,
            schema,
            read.manifest().fragment_row_target(),
            true,
        );
        let written = async {
            for chunk in rows.chunks(ROWS_PER_READ) {
                let batch = captured_rows(read, chunk).await?;
                let carried = (chunk.iter())
                    .map(|&(id, at)| Some(CarriedRow::read_at(read.manifest(), id, at, false)))
                    .collect();
                writer.push(batch, carried).await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        Ok(Some(writer.finish_after(written).await?))
    }
}

/// An update's capture, written as its scan meets the rows it rewrites (their values before
/// it): no second read of rows the update reads anyway. Its rows come in scan order.
pub(super) struct ScannedCapture<'a> {
    writer: FragmentWriter<'a>,
    read: &'a Snapshot,
}

impl Table {
    /// A capture of the rows an update's scan matches: when the table records change data
    /// and the scan's rows can be written back as they are read (no blob column, or blob
    /// values read as the references they are). `None` otherwise: the commit then reads the
    /// rows again ([`Self::capture_change_data`]).
    pub(super) fn scanned_capture<'a>(
        &'a self,
        read: &'a Snapshot,
        blob_references: BlobReferences,
    ) -> Option<ScannedCapture<'a>> {
        let readable =
            !read.schema().has_blob_columns() || blob_references == BlobReferences::Stored;
        (read.manifest().change_data_feed && readable).then(|| ScannedCapture {
            writer: FragmentWriter::new(
                &self.store,
                read.schema(),
                read.manifest().fragment_row_target(),
                true,
            ),
            read,
        })
    }
}

impl ScannedCapture<'_> {
    /// Captures `matched` (every user column, then the system columns), the rows `ids` at
    /// `addrs`.
    pub(super) async fn push(
        &mut self,
        matched: &RecordBatch,
        ids: &[RowId],
        addrs: &[RowAddress],
    ) -> Result<()> {
        let user: Vec<usize> = (0..matched.num_columns())
            .filter(|&i| ![ROW_ID, ROW_ADDR].contains(&matched.schema().field(i).name().as_str()))
            .collect();
        let carried = (ids.iter().zip(addrs))
            .map(|(&id, &at)| Some(CarriedRow::read_at(self.read.manifest(), id, at, false)))
            .collect();
        self.writer.push(matched.project(&user)?, carried).await
    }
}

/// The update's fragments and its capture, once its rows were pushed (`pushed`); if pushing
/// or finishing either failed, neither's files are left.
pub(super) async fn finish_both(
    writer: FragmentWriter<'_>,
    capture: Option<ScannedCapture<'_>>,
    pushed: Result<()>,
) -> Result<(Vec<NewFragment>, Option<Vec<NewFragment>>)> {
    let Some(capture) = capture else {
        return Ok((writer.finish_after(pushed).await?, None));
    };
    let (store, schema) = (writer.store(), writer.schema());
    let captured = match pushed {
        Ok(()) => capture.writer.finish().await,
        Err(e) => {
            capture.writer.abandon().await;
            Err(e)
        }
    };
    let captured = match captured {
        Ok(captured) => captured,
        Err(e) => {
            writer.abandon().await;
            return Err(e);
        }
    };
    match writer.finish().await {
        Ok(fragments) => Ok((fragments, Some(captured))),
        Err(e) => {
            super::write::delete_written(store, schema, &captured).await;
            Err(e)
        }
    }
}

/// The user columns of the rows at `rows`' addresses in `read`, in that order; blob values
/// as references to where they are stored (the capture's files keep them there).
async fn captured_rows(read: &Snapshot, rows: &[(RowId, RowAddress)]) -> Result<RecordBatch> {
    let addresses: Vec<RowAddress> = rows.iter().map(|&(_, at)| at).collect();
    let request = ScanRequest {
        with_row_id: true,
        blob_references: BlobReferences::Stored,
        ..Default::default()
    };
    let batch = read.take_at(&addresses, request).await?;
    let ids = batch
        .column_by_name(ROW_ID)
        .and_then(|c| c.as_any().downcast_ref::<arrow::array::UInt64Array>());
    let found = ids.is_some_and(|ids| {
        ids.len() == rows.len()
            && (ids.values().iter().copied()).eq(rows.iter().map(|(id, _)| id.as_u64()))
    });
    if !found {
        return Err(Error::internal(
            "a commit's change data did not find the rows it removes where it read them",
        ));
    }
    let user: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| batch.schema().field(i).name() != ROW_ID)
        .collect();
    Ok(batch.project(&user)?)
}
