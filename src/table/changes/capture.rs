//! Change data capture: on a table that records change data
//! ([`Manifest::change_data_feed`](crate::format::Manifest::change_data_feed)), a commit that
//! deletes or rewrites rows also writes the values those rows had to fragments of their own
//! that its version lists (Delta's `_change_data` files).
//!
//! An update captures the rows as its scan meets them (`write.rs`); a delete (which reads
//! no value), a row patch (which reads only what its new values need) and the other
//! row-removing writes read them again at the commit (here).
//!
//! A change read then takes a row's preimage (or a deleted row's values) from the first
//! version in its range that captured the row: a few dense pages per commit, where the rows'
//! old places are scattered over every page of the table. Captured rows hold the values of
//! the version the commit read, and a row's values only change by a commit that captures
//! it, so the first capture of a row in a range holds its values at the range's start.

use arrow::array::RecordBatch;

use crate::error::{Error, Result};
use crate::format::Manifest;
use crate::io::BlobReferences;
use crate::rowid::{RowAddress, RowId};
use crate::table::commit::{Action, CarriedRow, NewFragment, NewPatch};
use crate::table::scan_request::{ScanRequest, ROW_ID};
use crate::table::write::FragmentWriter;
use crate::table::{Committed, Snapshot, Table};

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
    pub(in crate::table) async fn capture_change_data(
        &self,
        read: &Snapshot,
        action: &Action,
    ) -> Result<Option<Vec<NewFragment>>> {
        if !read.manifest().change_data_feed {
            return Ok(None);
        }
        let mut rows: Vec<(RowId, RowAddress)> = match action {
            Action::Delete { rows } | Action::Update { rows, .. } => rows.clone(),
            // A patch changes its rows in place: their values before it are captured.
            // (A MERGE's deletes beside them, too.)
            Action::Patch {
                patches, deleted, ..
            } => {
                let mut rows = patched_rows(read.manifest(), patches)?;
                rows.extend_from_slice(deleted);
                rows
            }
            _ => return Ok(None),
        };
        // In id order: a change read's chunks of nearby ids then read nearby pages here too.
        rows.sort_unstable_by_key(|&(id, _)| id);
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
                    .map(|&(id, _)| Some(CarriedRow::captured(id)))
                    .collect();
                writer.push(batch, carried).await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        Ok(Some(writer.finish_after(written).await?))
    }
}

/// The ids and addresses of the rows `patches` (planned on `manifest`) change.
fn patched_rows(manifest: &Manifest, patches: &[NewPatch]) -> Result<Vec<(RowId, RowAddress)>> {
    let mut rows = Vec::new();
    for patch in patches {
        let fragment = (manifest.fragment(patch.fragment))
            .ok_or_else(|| Error::internal("a patch names a fragment its version lacks"))?;
        for offset in patch.offsets.iter() {
            let id = (fragment.row_id_at(offset))
                .ok_or_else(|| Error::internal("a patch names an offset past its fragment"))?;
            rows.push((id, RowAddress::new(fragment.id, offset)));
        }
    }
    Ok(rows)
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
