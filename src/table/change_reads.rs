//! Change reads ([`Table::changes`]): the rows that changed between two versions, each named
//! by its row id, at the cost of the change.
//!
//! Each version in the range is diffed with the one before it, in id space: the offsets it
//! newly deleted and the fragments it dropped say which ids *left* their place, the
//! fragments it added (and offsets a restore undeleted) which ids *arrived*. An id that
//! leaves and arrives in one version was rewritten (an update); one that only leaves was
//! deleted; one that only arrives was inserted. Versions that move rows without changing
//! them (compaction, tiered merges) or change no rows (checkpoints, indexes, schema changes)
//! are not diffed. Only manifests, the deletion files a version added and the row ids of
//! the fragments it added are read — never an unchanged fragment — and then the values of
//! the changed rows alone, by id, from the two ends of the range.
//!
//! The report is the **net** change of each row over the range (what Lance's `delta` and a
//! diff of the two versions give): a row inserted and deleted inside the range reports
//! nothing; one updated several times reports one preimage (its values at `from`) and one
//! postimage (its values at `to`); `_commit_version` is the version of its last change.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::array::{
    Array, ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array,
};
use arrow::compute::{filter_record_batch, interleave};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef, TimeUnit};
use arrow::row::{RowConverter, SortField};
use futures::StreamExt;
use roaring::{RoaringBitmap, RoaringTreemap};

use super::scan_request::{ScanRequest, ROW_ID};
use super::{Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::{Fragment, Manifest, Operation, Schema};
use crate::rowid::{RowAddress, RowId};

/// The column naming what happened to a row: `insert`, `update_preimage`,
/// `update_postimage` or `delete` (Delta's change data feed names).
pub const CHANGE_TYPE: &str = "_change_type";
/// The column holding the version of a row's last change in the range.
pub const COMMIT_VERSION: &str = "_commit_version";
/// The column holding when that version was committed (UTC, microseconds).
pub const COMMIT_TIMESTAMP: &str = "_commit_timestamp";

/// Manifests read at once.
const CONCURRENT_MANIFEST_READS: usize = 8;
/// Changed rows read and reported per batch.
const ROWS_PER_BATCH: usize = 64 * 1024;

/// What happened to a row between two versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeType {
    /// The row was deleted; its values are those it had at `from`.
    Delete,
    /// The row's values at `from`, before the range's updates.
    UpdatePreimage,
    /// The row's values at `to`, after them.
    UpdatePostimage,
    /// The row was inserted; its values are those it has at `to`.
    Insert,
}

impl ChangeType {
    /// The name `_change_type` holds.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Delete => "delete",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
            ChangeType::Insert => "insert",
        }
    }
}

/// The rows that changed between two versions ([`Table::changes`]).
#[derive(Debug, Clone)]
pub struct ChangedRows {
    /// The version compared against.
    pub from: u64,
    /// The version compared.
    pub to: u64,
    /// The columns: `to`'s user columns, then `_rowid`, `_change_type`, `_commit_version`
    /// and `_commit_timestamp`.
    pub schema: SchemaRef,
    /// The changes in order of `_commit_version`, then `_rowid`, a preimage before its
    /// postimage.
    pub batches: Vec<RecordBatch>,
    /// Rows inserted.
    pub inserted: u64,
    /// Rows updated (each reported twice, as a preimage and a postimage).
    pub updated: u64,
    /// Rows deleted.
    pub deleted: u64,
    /// Versions whose rows were diffed (the others change no row's values).
    pub versions_diffed: u64,
}

/// One id's changes over the range so far.
#[derive(Debug, Clone, Copy)]
struct Track {
    /// Live at `from`: its first change in the range was a delete or an update.
    existed: bool,
    /// Live after its latest change.
    live: bool,
    /// The version of its latest change.
    version: u64,
}

/// Every changed id's track.
#[derive(Debug, Default)]
struct NetChanges(HashMap<u64, Track>);

impl NetChanges {
    /// Records that `left` ids left their places in `version` and `arrived` ids appeared.
    fn record(&mut self, version: u64, left: &RoaringTreemap, arrived: &RoaringTreemap) {
        for id in left.iter() {
            let live = arrived.contains(id);
            let track = self.0.entry(id).or_insert(Track {
                existed: true,
                live: true,
                version,
            });
            track.live = live;
            track.version = version;
        }
        for id in (arrived - left).iter() {
            let track = self.0.entry(id).or_insert(Track {
                existed: false,
                live: false,
                version,
            });
            track.live = true;
            track.version = version;
        }
    }

    /// Each reported change in report order: (version, id, kind).
    fn report(&self) -> Vec<(u64, u64, ChangeType)> {
        let mut out = Vec::new();
        for (&id, track) in &self.0 {
            match (track.existed, track.live) {
                (true, false) => out.push((track.version, id, ChangeType::Delete)),
                (false, true) => out.push((track.version, id, ChangeType::Insert)),
                (true, true) => {
                    out.push((track.version, id, ChangeType::UpdatePreimage));
                    out.push((track.version, id, ChangeType::UpdatePostimage));
                }
                (false, false) => {}
            }
        }
        out.sort_unstable();
        out
    }
}

/// Whether a version of this operation can change rows' values or existence. Compaction
/// moves rows unchanged; the others touch no row.
fn changes_rows(operation: Operation) -> bool {
    !matches!(
        operation,
        Operation::Compact
            | Operation::Checkpoint
            | Operation::CreateIndex
            | Operation::DropIndex
            | Operation::AlterSchema
    )
}

/// The id of the row at `offset` of `fragment`.
fn id_at(fragment: &Fragment, offset: u32) -> Result<u64> {
    match fragment.row_ids.sequence() {
        None => Ok(RowAddress::new(fragment.id, offset).as_u64()),
        Some(sequence) => sequence
            .get(offset as usize)
            .map(RowId::as_u64)
            .ok_or_else(|| {
                Error::internal(format!(
                    "offset {offset} is past fragment {}'s row ids",
                    fragment.id
                ))
            }),
    }
}

fn ids_at(fragment: &Fragment, offsets: &RoaringBitmap, into: &mut RoaringTreemap) -> Result<()> {
    if fragment.row_ids.is_native() {
        let base = RowAddress::new(fragment.id, 0).as_u64();
        into.extend(offsets.iter().map(|o| base + o as u64));
        return Ok(());
    }
    for offset in offsets {
        into.insert(id_at(fragment, offset)?);
    }
    Ok(())
}

impl Table {
    /// The rows that changed after version `from` up to version `to`: applied to `from`'s
    /// rows, they give `to`'s, ids included (see the module's notes for what is reported).
    /// Reads the manifests of the range, the deletion files and row ids its versions added,
    /// and the changed rows' values; nothing of the unchanged rows.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `from` is after `to`; [`Error::VersionNotFound`] for a
    /// version not yet written; [`Error::VersionRemoved`] (naming the oldest version still
    /// readable) when cleanup removed one the range needs.
    pub async fn changes(&self, from: u64, to: u64) -> Result<ChangedRows> {
        if from > to {
            return Err(Error::invalid(format!(
                "a change read from version {from} to version {to}: the first version must \
                 not be after the second"
            )));
        }
        let manifests = self.manifests_between(from, to).await?;
        let mut net = NetChanges::default();
        let mut versions_diffed = 0;
        let mut restored = false;
        for pair in manifests.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            if !changes_rows(after.transaction.operation) {
                continue;
            }
            let (mut left, mut arrived) = self.diff(before, after).await?;
            if after.transaction.operation == Operation::Restore {
                // A restore puts back older fragments: rows it moves back unchanged (those a
                // compaction had moved) are no change.
                let unchanged = self
                    .unchanged_moves(before, after, &left & &arrived)
                    .await?;
                left -= &unchanged;
                arrived -= &unchanged;
                restored = true;
            }
            net.record(after.version, &left, &arrived);
            versions_diffed += 1;
        }
        let (first, last) = match (manifests.first(), manifests.last()) {
            (Some(first), Some(last)) => (first.clone(), last.clone()),
            _ => return Err(Error::internal("a change read of no versions")),
        };
        let timestamps: HashMap<u64, i64> = manifests
            .iter()
            .map(|m| (m.version, m.timestamp_micros))
            .collect();
        // Old values are read with the new schema: a column added since reads NULL, one
        // renamed reads by its field id.
        let before = Snapshot::new(
            self.store.clone(),
            Manifest {
                schema: last.schema.clone(),
                ..first.as_ref().clone()
            },
        );
        let after = Snapshot::shared(self.store.clone(), last.clone());
        let report = net.report();
        let compared = columns_in_both(&first.schema, &last.schema);
        let request = ScanRequest {
            with_row_id: true,
            ..Default::default()
        };
        let read_schema = after.scan_schema(&request)?;
        let schema = change_schema(&read_schema);
        let mut changed = ChangedRows {
            from,
            to,
            schema: schema.clone(),
            batches: Vec::new(),
            inserted: 0,
            updated: 0,
            deleted: 0,
            versions_diffed,
        };
        for chunk in pair_chunks(&report, ROWS_PER_BATCH) {
            for (_, _, kind) in chunk {
                match kind {
                    ChangeType::Insert => changed.inserted += 1,
                    ChangeType::Delete => changed.deleted += 1,
                    ChangeType::UpdatePostimage => changed.updated += 1,
                    ChangeType::UpdatePreimage => {}
                }
            }
            let columns = read_chunk(chunk, (&before, &after), &request, &timestamps).await?;
            let mut batch = RecordBatch::try_new(schema.clone(), columns)?;
            if restored {
                batch = drop_equal_pairs(batch, chunk, &compared, &mut changed.updated)?;
            }
            changed.batches.push(batch);
        }
        Ok(changed)
    }

    /// Of `moved` (ids that left a place and arrived at another in `after`), those whose
    /// values are equal in `before` and `after`.
    async fn unchanged_moves(
        &self,
        before: &Arc<Manifest>,
        after: &Arc<Manifest>,
        moved: RoaringTreemap,
    ) -> Result<RoaringTreemap> {
        let ids: Vec<RowId> = moved.iter().map(RowId::from_u64).collect();
        let request = ScanRequest {
            with_row_id: true,
            ..Default::default()
        };
        let read_before = Snapshot::new(
            self.store.clone(),
            Manifest {
                schema: after.schema.clone(),
                ..before.as_ref().clone()
            },
        );
        let read_after = Snapshot::shared(self.store.clone(), after.clone());
        let (old, new) = futures::future::try_join(
            read_before.take(&ids, request.clone()),
            read_after.take(&ids, request),
        )
        .await?;
        if old.num_rows() != ids.len() || new.num_rows() != ids.len() {
            return Err(Error::internal("a restore's moved rows were not all found"));
        }
        let compared = columns_in_both(&before.schema, &after.schema);
        let equal = equal_rows(&old.project(&compared)?, &new.project(&compared)?)?;
        Ok(ids
            .iter()
            .zip(equal)
            .filter_map(|(id, equal)| equal.then_some(id.as_u64()))
            .collect())
    }

    /// The manifests of versions `from..=to`, in order, or the error saying which is
    /// missing: one not yet written, or one cleanup removed.
    async fn manifests_between(&self, from: u64, to: u64) -> Result<Vec<Arc<Manifest>>> {
        // The ends first: a range past the latest or before the oldest fails after a GET
        // or two, not after reading the whole range.
        let last = self.store.read_manifest(to).await;
        let first = match from == to {
            true => None,
            false => Some(self.store.read_manifest(from).await),
        };
        let missing = |e: Error| async move {
            let Error::VersionNotFound { version, .. } = e else {
                return e;
            };
            match self.store.list_versions().await {
                Ok(listed) => match listed.first() {
                    Some(&(oldest, _)) if version < listed.last().map_or(0, |l| l.0) => {
                        Error::VersionRemoved {
                            table: self.store.display(),
                            version,
                            oldest,
                        }
                    }
                    _ => Error::VersionNotFound {
                        table: self.store.display(),
                        version,
                    },
                },
                Err(listing) => listing,
            }
        };
        let last = match last {
            Ok(last) => Arc::new(last),
            Err(e) => return Err(missing(e).await),
        };
        let first = match first {
            None => return Ok(vec![last]),
            Some(Ok(first)) => Arc::new(first),
            Some(Err(e)) => return Err(missing(e).await),
        };
        let middle: Vec<Result<Manifest>> = futures::stream::iter(from + 1..to)
            .map(|version| self.store.read_manifest(version))
            .buffered(CONCURRENT_MANIFEST_READS)
            .collect()
            .await;
        let mut manifests = vec![first];
        for read in middle {
            match read {
                Ok(manifest) => manifests.push(Arc::new(manifest)),
                Err(e) => return Err(missing(e).await),
            }
        }
        manifests.push(last);
        Ok(manifests)
    }

    /// The ids that left their places from `before` to `after` (deleted, or their fragment
    /// dropped) and those that arrived (in added fragments, or undeleted).
    async fn diff(
        &self,
        before: &Manifest,
        after: &Manifest,
    ) -> Result<(RoaringTreemap, RoaringTreemap)> {
        let (mut left, mut arrived) = (RoaringTreemap::new(), RoaringTreemap::new());
        let (mut old, mut new) = (
            before.fragments.iter().peekable(),
            after.fragments.iter().peekable(),
        );
        loop {
            let (o, n) = (old.peek().copied(), new.peek().copied());
            match (o, n) {
                (None, None) => break,
                (Some(o), n) if n.is_none_or(|n| o.id < n.id) => {
                    left |= self.live_ids(o).await?;
                    old.next();
                }
                (o, Some(n)) if o.is_none_or(|o| n.id < o.id) => {
                    arrived |= self.live_ids(n).await?;
                    new.next();
                }
                (Some(o), Some(n)) => {
                    if o.deletion != n.deletion {
                        let (deleted, undeleted) = self
                            .store
                            .deletion_change(
                                o.deletion.as_ref(),
                                n.deletion.as_ref(),
                                o.physical_rows,
                            )
                            .await?;
                        ids_at(o, &deleted, &mut left)?;
                        ids_at(n, &undeleted, &mut arrived)?;
                    }
                    old.next();
                    new.next();
                }
                _ => return Err(Error::internal("fragment lists out of order")),
            }
        }
        Ok((left, arrived))
    }

    /// The ids of a fragment's live rows.
    async fn live_ids(&self, fragment: &Fragment) -> Result<RoaringTreemap> {
        let mut offsets = RoaringBitmap::new();
        offsets.insert_range(0..fragment.physical_rows);
        if let Some(deleted) = self.store.fragment_deletions(fragment).await? {
            offsets -= deleted.as_ref();
        }
        let mut ids = RoaringTreemap::new();
        ids_at(fragment, &offsets, &mut ids)?;
        Ok(ids)
    }
}

/// `report` in chunks of about `size` changes, never parting a preimage from its postimage.
fn pair_chunks(
    report: &[(u64, u64, ChangeType)],
    size: usize,
) -> impl Iterator<Item = &[(u64, u64, ChangeType)]> {
    let mut rest = report;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = size.min(rest.len());
        if end < rest.len() && rest[end].2 == ChangeType::UpdatePostimage {
            end += 1;
        }
        let (chunk, after) = rest.split_at(end);
        rest = after;
        Some(chunk)
    })
}

/// Per row, whether `a` and `b` hold equal values in every column. Values of a type rows
/// cannot be compared count as different.
fn equal_rows(a: &RecordBatch, b: &RecordBatch) -> Result<Vec<bool>> {
    let fields = a
        .schema()
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    let Ok(converter) = RowConverter::new(fields) else {
        return Ok(vec![false; a.num_rows()]);
    };
    let (a, b) = (
        converter.convert_columns(a.columns())?,
        converter.convert_columns(b.columns())?,
    );
    Ok((0..a.num_rows()).map(|i| a.row(i) == b.row(i)).collect())
}

/// The positions, among `new`'s columns as read, of those `old` has too (by field id):
/// the values a change is judged by. A column added in between reads NULL in old rows,
/// and adding it changed no row.
fn columns_in_both(old: &Schema, new: &Schema) -> Vec<usize> {
    (new.fields.iter().enumerate())
        .filter(|(_, f)| old.field_by_id(f.id).is_some())
        .map(|(i, _)| i)
        .collect()
}

/// `batch` without the update pairs whose preimage and postimage are equal in the
/// `compared` columns: after a restore put a row back as it was, it did not change over
/// the range.
fn drop_equal_pairs(
    batch: RecordBatch,
    chunk: &[(u64, u64, ChangeType)],
    compared: &[usize],
    updated: &mut u64,
) -> Result<RecordBatch> {
    let values = batch.project(compared)?;
    let mut keep = vec![true; chunk.len()];
    for i in 0..chunk.len().saturating_sub(1) {
        if chunk[i].2 == ChangeType::UpdatePreimage {
            let (pre, post) = (values.slice(i, 1), values.slice(i + 1, 1));
            if equal_rows(&pre, &post)?[0] {
                (keep[i], keep[i + 1]) = (false, false);
                *updated -= 1;
            }
        }
    }
    Ok(filter_record_batch(&batch, &BooleanArray::from(keep))?)
}

/// The schema of a change read: the read's columns, then the change's.
pub(crate) fn change_schema(read: &ArrowSchema) -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = read.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(CHANGE_TYPE, DataType::Utf8, false)));
    fields.push(Arc::new(Field::new(
        COMMIT_VERSION,
        DataType::UInt64,
        false,
    )));
    fields.push(Arc::new(Field::new(
        COMMIT_TIMESTAMP,
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        false,
    )));
    Arc::new(ArrowSchema::new_with_metadata(
        fields,
        read.metadata().clone(),
    ))
}

/// The columns of one chunk of the report: old values taken from `before`, new ones from
/// `after`, interleaved into report order.
async fn read_chunk(
    chunk: &[(u64, u64, ChangeType)],
    (before, after): (&Snapshot, &Snapshot),
    request: &ScanRequest,
    timestamps: &HashMap<u64, i64>,
) -> Result<Vec<ArrayRef>> {
    let old_values =
        |kind: ChangeType| matches!(kind, ChangeType::Delete | ChangeType::UpdatePreimage);
    let (mut old_ids, mut new_ids) = (Vec::new(), Vec::new());
    // Per reported row: which side it comes from and its row there.
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(chunk.len());
    for &(_, id, kind) in chunk {
        let side = if old_values(kind) {
            &mut old_ids
        } else {
            &mut new_ids
        };
        picks.push((usize::from(!old_values(kind)), side.len()));
        side.push(RowId::from_u64(id));
    }
    let (old, new) = futures::future::try_join(
        before.take(&old_ids, request.clone()),
        after.take(&new_ids, request.clone()),
    )
    .await?;
    for (batch, asked, side) in [(&old, old_ids.len(), "old"), (&new, new_ids.len(), "new")] {
        if batch.num_rows() != asked {
            return Err(Error::internal(format!(
                "a change read found {} of the {asked} rows it reads {side} values of",
                batch.num_rows()
            )));
        }
    }
    let mut columns = (0..old.num_columns())
        .map(|i| {
            let sides: [&dyn Array; 2] = [old.column(i).as_ref(), new.column(i).as_ref()];
            Ok(interleave(&sides, &picks)?)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let ids = old
        .schema()
        .index_of(ROW_ID)
        .ok()
        .and_then(|i| columns[i].as_any().downcast_ref::<UInt64Array>());
    if !ids.is_some_and(|ids| ids.values().iter().eq(chunk.iter().map(|c| &c.1))) {
        return Err(Error::internal(
            "a change read's rows came back out of order",
        ));
    }
    columns.push(Arc::new(StringArray::from_iter_values(
        chunk.iter().map(|c| c.2.as_str()),
    )));
    columns.push(Arc::new(UInt64Array::from_iter_values(
        chunk.iter().map(|c| c.0),
    )));
    let stamps: Vec<i64> = chunk
        .iter()
        .map(|c| timestamps.get(&c.0).copied().unwrap_or_default())
        .collect();
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(stamps).with_timezone("UTC"),
    ));
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(values: &[u64]) -> RoaringTreemap {
        values.iter().copied().collect()
    }

    #[test]
    fn net_changes_report_each_row_once_by_its_first_and_last_state() {
        let mut net = NetChanges::default();
        // v2: 1 updated, 2 deleted, 10 and 11 inserted.
        net.record(2, &ids(&[1, 2]), &ids(&[1, 10, 11]));
        // v3: 10 updated, 11 deleted (inserted and deleted inside the range), 1 updated again.
        net.record(3, &ids(&[1, 10, 11]), &ids(&[1, 10]));
        // v4: 3 deleted, then brought back by a restore in v5.
        net.record(4, &ids(&[3]), &ids(&[]));
        net.record(5, &ids(&[]), &ids(&[3]));
        assert_eq!(
            net.report(),
            vec![
                (2, 2, ChangeType::Delete),
                (3, 1, ChangeType::UpdatePreimage),
                (3, 1, ChangeType::UpdatePostimage),
                (3, 10, ChangeType::Insert),
                (5, 3, ChangeType::UpdatePreimage),
                (5, 3, ChangeType::UpdatePostimage),
            ]
        );
    }

    #[test]
    fn chunks_keep_a_preimage_with_its_postimage() {
        let report: Vec<(u64, u64, ChangeType)> = [
            (2, 1, ChangeType::Insert),
            (2, 2, ChangeType::UpdatePreimage),
            (2, 2, ChangeType::UpdatePostimage),
            (3, 3, ChangeType::Delete),
        ]
        .into();
        let sizes: Vec<usize> = pair_chunks(&report, 2).map(<[_]>::len).collect();
        assert_eq!(sizes, vec![3, 1]);
        let sizes: Vec<usize> = pair_chunks(&report, 1).map(<[_]>::len).collect();
        assert_eq!(sizes, vec![1, 2, 1]);
    }
}
