//! Row writes: append, overwrite, delete and update (upserts are `upsert.rs`'s). Each reads the latest version,
//! writes its data files, and commits one action.

use std::ops::RangeInclusive;
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::UInt64Type;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

pub(crate) use super::commit::{delete_files, surely_unpublished};
use super::commit::{Action, CarriedRow, NewFragment, THIS_COMMIT};
use super::filter::{RowPredicate, WholeRowPredicate};
use super::progress::{ProgressHandle, ScanProgress};
use super::scan_request::{ScanRequest, ROW_ADDR, ROW_ID};
use super::{Committed, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::{DataFile, Schema};
use crate::io::{BlobReferences, DataFileWriter, RepackSidecars, TableStore};
use crate::rowid::{RowAddress, RowId, RowIdSet};

/// Computes new values: given matched rows (every user column, then `_rowid` and
/// `_rowaddr`, as a predicate sees them), returns their user columns' new values, as many
/// rows, in the table's schema.
pub type BatchUpdate<'a> = &'a (dyn Fn(&RecordBatch) -> Result<RecordBatch> + Send + Sync);

/// The rows a DELETE or UPDATE names, found by a scan: those passing `filter` (evaluated as
/// the scan reads, with page pruning), among the ids in `row_ids` and `row_id_range` (masks,
/// as a SELECT's). Nothing set names every live row.
#[derive(Debug, Clone, Default)]
pub struct RowMatch {
    /// Rows passing this predicate.
    pub filter: Option<Arc<dyn RowPredicate>>,
    /// Among these ids.
    pub row_ids: Option<RowIdSet>,
    /// Among the ids in this range.
    pub row_id_range: Option<RangeInclusive<u64>>,
    /// The rows' blob values read as references ([`ScanRequest::blob_references`]), for an
    /// update whose filter and new values do not read blob columns: those values are
    /// rewritten as the references they are ([`crate::io::BlobReferences::Stored`]: external
    /// objects never fetched, stored values never copied).
    pub blob_references: crate::io::BlobReferences,
}

impl RowMatch {
    /// The scan that finds the rows: `columns` (`None`: every user column) and both system
    /// columns.
    pub(super) fn scan(self, columns: Option<Vec<String>>) -> ScanRequest {
        ScanRequest {
            columns,
            with_row_id: true,
            with_row_addr: true,
            row_ids: self.row_ids,
            row_id_range: self.row_id_range,
            filter: self.filter,
            blob_references: self.blob_references,
            ..Default::default()
        }
    }
}

/// Cuts a stream of rows into fragments of at most `max_rows`, writing each as it fills.
/// Rows go to their data file as they come ([`DataFileWriter`]): blob payloads are written
/// out at once, not held until the fragment is full.
pub(crate) struct FragmentWriter<'a> {
    store: &'a TableStore,
    schema: &'a Schema,
    max_rows: usize,
    /// The fragment's data file being written, once it has a row.
    pending: Option<DataFileWriter<'a>>,
    pending_ids: Vec<Option<RowId>>,
    /// Per pending row: (created, last updated) versions.
    pending_lineage: Vec<(u64, u64)>,
    carries_ids: bool,
    done: Vec<NewFragment>,
}

impl<'a> FragmentWriter<'a> {
    pub(crate) fn new(
        store: &'a TableStore,
        schema: &'a Schema,
        max_rows: u64,
        carries_ids: bool,
    ) -> Self {
        Self {
            store,
            schema,
            max_rows: max_rows as usize,
            pending: None,
            pending_ids: Vec::new(),
            pending_lineage: Vec::new(),
            carries_ids,
            done: Vec::new(),
        }
    }

    /// Adds rows; `ids[i]` is the row i carried from elsewhere (`None`: a new row).
    pub(crate) async fn push(
        &mut self,
        batch: RecordBatch,
        ids: Vec<Option<CarriedRow>>,
    ) -> Result<()> {
        self.schema.check_input(&batch.schema())?;
        self.push_rows(batch, ids, None).await
    }

    /// Adds new rows (none carried from elsewhere: each gets its birth address as its id).
    pub(crate) async fn push_new(&mut self, batch: RecordBatch) -> Result<()> {
        let carried = vec![None; batch.num_rows()];
        self.push(batch, carried).await
    }

    /// Adds rows whose blob columns come as the descriptors the data files `sources` (one
    /// per blob column) hold: their payloads stay where they are
    /// ([`DataFileWriter::push_described`]).
    pub(crate) async fn push_described(
        &mut self,
        batch: RecordBatch,
        ids: Vec<Option<CarriedRow>>,
        sources: &[Option<DataFile>],
        repack: &RepackSidecars,
    ) -> Result<()> {
        self.push_rows(batch, ids, Some((sources, repack))).await
    }

    async fn push_rows(
        &mut self,
        mut batch: RecordBatch,
        mut ids: Vec<Option<CarriedRow>>,
        described: Option<(&[Option<DataFile>], &RepackSidecars)>,
    ) -> Result<()> {
        if self.schema.fields.is_empty() && batch.num_rows() > 0 {
            // A data file of no columns cannot say how many rows it holds.
            return Err(Error::invalid(
                "a table without columns holds no rows: add a column first",
            ));
        }
        while batch.num_rows() > 0 {
            let file = match &mut self.pending {
                Some(file) => file,
                None => self
                    .pending
                    .insert(DataFileWriter::new(self.store, self.schema)?),
            };
            let room = self.max_rows - file.rows() as usize;
            let take = room.min(batch.num_rows());
            let rows = batch.slice(0, take);
            match described {
                Some((sources, repack)) => file.push_described(&rows, sources, repack).await?,
                None => file.push(&rows).await?,
            }
            if self.carries_ids {
                for row in ids.drain(..take) {
                    self.pending_ids.push(row.map(|r| r.id));
                    self.pending_lineage.push(match row {
                        Some(r) => (r.created, r.updated),
                        None => (THIS_COMMIT, THIS_COMMIT),
                    });
                }
            }
            batch = batch.slice(take, batch.num_rows() - take);
            if file.rows() as usize == self.max_rows {
                self.flush().await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn flush(&mut self) -> Result<()> {
        let Some(file) = self.pending.take() else {
            return Ok(());
        };
        let rows = file.rows() as u32;
        let file = file.finish().await?;
        self.done.push(NewFragment {
            file,
            rows,
            carried_ids: self
                .carries_ids
                .then(|| std::mem::take(&mut self.pending_ids)),
            lineage: self
                .carries_ids
                .then(|| std::mem::take(&mut self.pending_lineage)),
        });
        Ok(())
    }

    /// Fragments written so far.
    pub(crate) fn written(&self) -> usize {
        self.done.len()
    }

    /// The fragments written, the last one flushed; if that fails, the files written so far
    /// are deleted.
    pub(crate) async fn finish(mut self) -> Result<Vec<NewFragment>> {
        if let Err(e) = self.flush().await {
            self.abandon().await;
            return Err(e);
        }
        Ok(self.done)
    }

    /// [`Self::finish`] once the rows were pushed (`pushed`), or, if pushing them failed,
    /// [`Self::abandon`] and that error.
    pub(crate) async fn finish_after(self, pushed: Result<()>) -> Result<Vec<NewFragment>> {
        match pushed {
            Ok(()) => self.finish().await,
            Err(e) => {
                self.abandon().await;
                Err(e)
            }
        }
    }

    /// Deletes the files written so far (and the sidecars of the one being written), for a
    /// write that failed before it committed.
    pub(crate) async fn abandon(self) {
        if let Some(file) = self.pending {
            file.abandon().await;
        }
        delete_written(self.store, self.schema, &self.done).await;
    }
}

/// An update's capture, written as its scan meets the rows it rewrites (their values before
/// it): no second read of rows the update reads anyway. Its rows come in scan order.
pub(super) struct ScannedCapture<'a> {
    writer: FragmentWriter<'a>,
}

impl Table {
    /// A capture of the rows an update's scan matches: when the table records change data
    /// and the scan's rows can be written back as they are read (no blob column, or blob
    /// values read as the references they are). `None` otherwise: the commit then reads the
    /// rows again (`Table::capture_change_data`).
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
        })
    }
}

impl ScannedCapture<'_> {
    /// Captures `matched` (every user column, then the system columns), the rows `ids`.
    pub(super) async fn push(&mut self, matched: &RecordBatch, ids: &[RowId]) -> Result<()> {
        let user: Vec<usize> = (0..matched.num_columns())
            .filter(|&i| ![ROW_ID, ROW_ADDR].contains(&matched.schema().field(i).name().as_str()))
            .collect();
        let carried = ids
            .iter()
            .map(|&id| Some(CarriedRow::captured(id)))
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
    let (store, schema) = (writer.store, writer.schema);
    let captured = match capture.writer.finish_after(pushed).await {
        Ok(captured) => captured,
        Err(e) => {
            writer.abandon().await;
            return Err(e);
        }
    };
    match writer.finish().await {
        Ok(fragments) => Ok((fragments, Some(captured))),
        Err(e) => {
            delete_written(store, schema, &captured).await;
            Err(e)
        }
    }
}

/// Deletes the data files of `fragments` (of `schema`), written by a write that will not
/// commit them.
pub(crate) async fn delete_written(store: &TableStore, schema: &Schema, fragments: &[NewFragment]) {
    delete_files(store, schema, fragments.iter().map(|f| &f.file)).await;
}

/// Writes `batches` as native fragments of at most `max_rows` rows. On an error (from the
/// input, the schema or the store) the files written so far are deleted.
pub(crate) async fn write_native_fragments(
    store: &TableStore,
    schema: &Schema,
    max_rows: u64,
    mut batches: BoxStream<'_, Result<RecordBatch>>,
    progress: (&ProgressHandle, &'static str),
) -> Result<Vec<NewFragment>> {
    let (progress, operation) = progress;
    let mut writer = FragmentWriter::new(store, schema, max_rows, false);
    let mut written = 0u64;
    while let Some(next) = batches.next().await {
        let pushed = match next {
            Ok(batch) => {
                written += batch.num_rows() as u64;
                writer.push(batch, Vec::new()).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = pushed {
            progress.finish(operation);
            writer.abandon().await;
            return Err(e);
        }
        progress.update(operation, written, None);
    }
    progress.finish(operation);
    writer.finish().await
}

/// `update`'s new values of the `matched` rows, as many as they are.
pub(super) fn updated_rows(update: BatchUpdate<'_>, matched: &RecordBatch) -> Result<RecordBatch> {
    let updated = update(matched)?;
    if updated.num_rows() != matched.num_rows() {
        return Err(Error::invalid(format!(
            "update returned {} rows for {} matched rows",
            updated.num_rows(),
            matched.num_rows()
        )));
    }
    Ok(updated)
}

pub(super) fn system_columns(batch: &RecordBatch) -> Result<(Vec<RowId>, Vec<RowAddress>)> {
    let column = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<UInt64Type>())
            .ok_or_else(|| Error::internal(format!("scan lost {name}")))
    };
    let ids = column(ROW_ID)?
        .values()
        .iter()
        .map(|&v| RowId::from_u64(v))
        .collect();
    let addrs = column(ROW_ADDR)?
        .values()
        .iter()
        .map(|&v| RowAddress::from_u64(v))
        .collect();
    Ok((ids, addrs))
}

impl Table {
    /// Appends rows as new native fragments; their ids are their addresses.
    pub async fn append(&self, batches: Vec<RecordBatch>) -> Result<Committed> {
        self.append_stream(futures::stream::iter(batches.into_iter().map(Ok)).boxed())
            .await
    }

    /// Appends a stream of rows, writing each fragment as it fills.
    pub async fn append_stream(
        &self,
        batches: BoxStream<'_, Result<RecordBatch>>,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let fragments = self.write_native(&read, batches).await?;
        self.commit_write_then_merge(&read, Action::Append { fragments }, None)
            .await
    }

    /// Replaces every row. New rows get new ids; the fragment-id high-water mark is kept,
    /// so no id is ever reused.
    pub async fn overwrite(&self, batches: Vec<RecordBatch>) -> Result<Committed> {
        self.overwrite_stream(futures::stream::iter(batches.into_iter().map(Ok)).boxed())
            .await
    }

    /// Replaces every row with a stream of rows.
    pub async fn overwrite_stream(
        &self,
        batches: BoxStream<'_, Result<RecordBatch>>,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let fragments = self.write_native(&read, batches).await?;
        self.commit_write_then_merge(&read, Action::Overwrite { fragments }, None)
            .await
    }

    async fn write_native(
        &self,
        read: &Snapshot,
        batches: BoxStream<'_, Result<RecordBatch>>,
    ) -> Result<Vec<NewFragment>> {
        read.manifest().check_writable(&self.store.display())?;
        let target = read.manifest().fragment_row_target();
        let progress = (&self.options.progress, "writing");
        write_native_fragments(&self.store, read.schema(), target, batches, progress).await
    }

    /// Deletes the rows `predicate` matches. It is handed batches of every user column,
    /// then `_rowid` and `_rowaddr`, and answers which rows match (a null: no match); a
    /// [`RowPredicate`] in [`Self::delete_matching`] reads only the columns it names.
    pub async fn delete_where(
        &self,
        predicate: impl Fn(&RecordBatch) -> Result<BooleanArray> + Send + Sync + 'static,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let rows = whole_rows_matching(&read, predicate);
        self.delete_matched(&read, rows).await
    }

    /// Deletes the rows `rows` names, reading only what naming them needs: the filter's
    /// columns (pages its page index rules out not at all), or no column for a mask by id.
    pub async fn delete_matching(&self, rows: RowMatch) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        self.delete_matched(&read, rows).await
    }

    async fn delete_matched(&self, read: &Snapshot, rows: RowMatch) -> Result<Committed> {
        let mut found = Vec::new();
        let mut progress = ScanProgress::new(&self.options.progress, "deleting", read);
        let mut scan = read
            .scan(progress.counting(rows.scan(Some(Vec::new()))))
            .await?;
        while let Some(batch) = scan.try_next().await? {
            let (ids, addrs) = system_columns(&batch)?;
            found.extend(ids.into_iter().zip(addrs));
            progress.matched(batch.num_rows());
        }
        drop(progress);
        self.commit(read, Action::Delete { rows: found }).await
    }

    /// Updates the rows `rows` names with the values `update` computes, as
    /// [`Self::update_where`] does, reading only the rows the filter and masks pass.
    pub async fn update_matching(
        &self,
        rows: RowMatch,
        update: BatchUpdate<'_>,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let most = read.patch_max_share();
        self.update_scanned(&read, rows, update, most).await
    }

    /// Rewrites the rows `rows` names with the values `update` computes (an SQL `UPDATE`
    /// that chose not to write row patches).
    pub(crate) async fn rewrite_matching(
        &self,
        rows: RowMatch,
        update: BatchUpdate<'_>,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        self.update_scanned(&read, rows, update, 0.0).await
    }

    /// Deletes rows by id.
    ///
    /// # Errors
    /// [`Error::RowNotFound`] if an id names no live row; nothing is deleted then.
    pub async fn delete_rows(&self, ids: &[RowId]) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let mut rows = Vec::with_capacity(ids.len());
        for &id in ids {
            let addr = read.resolve(id).await?.ok_or(Error::RowNotFound(id))?;
            rows.push((id, addr));
        }
        rows.sort_unstable();
        rows.dedup();
        self.commit(&read, Action::Delete { rows }).await
    }

    /// Updates the rows `predicate` matches (it sees what [`Self::delete_where`]'s does)
    /// with the values `update` computes; updated rows keep their ids. The columns whose
    /// values changed are written as row patches, the rows staying where they are, while
    /// they hold at most the table's patch share of its bytes
    /// ([`Self::set_patch_max_share`]); otherwise the rows move to a new fragment.
    pub async fn update_where(
        &self,
        predicate: impl Fn(&RecordBatch) -> Result<BooleanArray> + Send + Sync + 'static,
        update: BatchUpdate<'_>,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let rows = whole_rows_matching(&read, predicate);
        let most = read.patch_max_share();
        self.update_scanned(&read, rows, update, most).await
    }

    /// Writes the rows `rows` names again with the values `update` computes, and commits
    /// the update: as row patches of the changed columns while those hold at most `most` of
    /// the table's bytes, else as rewritten rows (those patched until then taken again).
    async fn update_scanned(
        &self,
        read: &Snapshot,
        rows: RowMatch,
        update: BatchUpdate<'_>,
        most: f64,
    ) -> Result<Committed> {
        // Every user column, then both system columns, of only the named rows.
        let blob_references = rows.blob_references;
        let mut progress = ScanProgress::new(&self.options.progress, "updating", read);
        let capture = self.scanned_capture(read, rows.blob_references);
        let mut scan = read.scan(progress.counting(rows.scan(None))).await?;
        let schema = read.schema().clone();
        let writer = FragmentWriter::new(
            &self.store,
            &schema,
            read.manifest().fragment_row_target(),
            true,
        );
        let mut out = Rewritten {
            writer,
            capture,
            rows: Vec::new(),
        };
        let mut patching = super::patching::Patching::new(most);
        let written = async {
            while let Some(matched) = scan.try_next().await? {
                if matched.num_rows() == 0 {
                    continue;
                }
                let (ids, addrs) = system_columns(&matched)?;
                let updated = updated_rows(update, &matched)?;
                progress.matched(matched.num_rows());
                if let Some(taken) = &mut patching {
                    if taken.take(read, (&matched, &updated), (&ids, &addrs))? {
                        continue;
                    }
                    // Too wide for patches now: the rows taken so far are rewritten too.
                    let again = taken.ids().to_vec();
                    patching = None;
                    (out.push_again(read, &again, blob_references, update)).await?;
                }
                out.push(read, (&matched, &ids, &addrs), updated).await?;
            }
            Ok(())
        }
        .await;
        drop(progress);
        let Rewritten {
            writer,
            capture,
            rows,
        } = out;
        if let Some(patched) = patching.filter(|_| written.is_ok()) {
            writer.abandon().await;
            if let Some(capture) = capture {
                capture.writer.abandon().await;
            }
            return patched.commit(self, read).await;
        }
        let (fragments, captured) = finish_both(writer, capture, written).await?;
        self.commit_write_then_merge(read, Action::Update { rows, fragments }, captured)
            .await
    }

    /// Updates the rows with the given ids with the values `update` computes from them.
    /// Reads only those rows (through the relocation view); each keeps its id. When the
    /// columns whose values changed are a small share of the table's bytes (its patch share,
    /// [`Self::set_patch_max_share`]), they are written as row patches and the rows stay
    /// where they are; otherwise the rows are rewritten into a new fragment.
    ///
    /// # Errors
    /// [`Error::RowNotFound`] if an id names no live row; nothing is written then.
    pub async fn update_rows(&self, ids: &[RowId], update: BatchUpdate<'_>) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let schema = read.schema().clone();
        let mut unique = ids.to_vec();
        unique.sort_unstable();
        unique.dedup();
        let found = read.take(&unique, scan_all()).await?;
        let (found_ids, addrs) = system_columns(&found)?;
        if found_ids.len() != unique.len() {
            let live: std::collections::HashSet<RowId> = found_ids.iter().copied().collect();
            let missing = unique.iter().find(|id| !live.contains(id)).copied();
            return Err(Error::RowNotFound(missing.unwrap_or(unique[0])));
        }
        let updated = update(&found)?;
        if updated.num_rows() != found.num_rows() {
            return Err(Error::invalid(format!(
                "update returned {} rows for {} rows",
                updated.num_rows(),
                found.num_rows()
            )));
        }
        let (values, rows) = ((&found, &updated), (&found_ids[..], &addrs[..]));
        if let Some(patched) = self.patch_if_narrow(&read, values, rows).await? {
            return Ok(patched);
        }
        let mut writer = FragmentWriter::new(
            &self.store,
            &schema,
            read.manifest().fragment_row_target(),
            true,
        );
        writer
            .push(updated, carried_rows(&read, &found_ids, &addrs))
            .await?;
        let fragments = writer.finish().await?;
        let rows = found_ids.into_iter().zip(addrs).collect();
        self.commit_write_then_merge(&read, Action::Update { rows, fragments }, None)
            .await
    }
}

/// The rows a closure over whole rows matches, found as a [`RowPredicate`] is.
fn whole_rows_matching(
    read: &Snapshot,
    predicate: impl Fn(&RecordBatch) -> Result<BooleanArray> + Send + Sync + 'static,
) -> RowMatch {
    RowMatch {
        filter: Some(Arc::new(WholeRowPredicate::new(read.schema(), predicate))),
        ..Default::default()
    }
}

/// What an update rewriting rows has written so far: their new values, their capture
/// (on a table recording change data) and the rows.
struct Rewritten<'a> {
    writer: FragmentWriter<'a>,
    capture: Option<ScannedCapture<'a>>,
    rows: Vec<(RowId, RowAddress)>,
}

impl Rewritten<'_> {
    /// Writes `updated`, the new values of the `matched` rows `ids` at `addrs` of `read`.
    async fn push(
        &mut self,
        read: &Snapshot,
        (matched, ids, addrs): (&RecordBatch, &[RowId], &[RowAddress]),
        updated: RecordBatch,
    ) -> Result<()> {
        self.writer
            .push(updated, carried_rows(read, ids, addrs))
            .await?;
        if let Some(capture) = &mut self.capture {
            capture.push(matched, ids).await?;
        }
        self.rows
            .extend(ids.iter().copied().zip(addrs.iter().copied()));
        Ok(())
    }

    /// Rewrites the rows `ids` of `read` (an update took them as row patches before it
    /// turned to rewriting), read again and given `update`'s values again.
    async fn push_again(
        &mut self,
        read: &Snapshot,
        ids: &[RowId],
        blob_references: BlobReferences,
        update: BatchUpdate<'_>,
    ) -> Result<()> {
        let found = read.take(ids, whole_rows(blob_references)).await?;
        if found.num_rows() == 0 {
            return Ok(());
        }
        let (found_ids, found_addrs) = system_columns(&found)?;
        let updated = updated_rows(update, &found)?;
        self.push(read, (&found, &found_ids, &found_addrs), updated)
            .await
    }
}

fn scan_all() -> ScanRequest {
    whole_rows(BlobReferences::default())
}

/// Every user column, then `_rowid` and `_rowaddr`, blob values read as `blob_references`.
fn whole_rows(blob_references: BlobReferences) -> ScanRequest {
    ScanRequest {
        columns: None,
        with_row_id: true,
        with_row_addr: true,
        blob_references,
        ..Default::default()
    }
}

/// Rows `ids` at `addrs` of `read`, rewritten by an update keeping their ids.
fn carried_rows(read: &Snapshot, ids: &[RowId], addrs: &[RowAddress]) -> Vec<Option<CarriedRow>> {
    (ids.iter().zip(addrs))
        .map(|(&id, &addr)| Some(CarriedRow::updated_at(read.manifest(), id, addr)))
        .collect()
}
