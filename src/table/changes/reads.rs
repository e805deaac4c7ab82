//! Change reads ([`Table::changes`]): the rows that changed between two versions, each named
//! by its row id, at the cost of the change.
//!
//! The change is found from the range's two ends by row lineage (`change_ends`), reading
//! the deletion files added to the fragments both ends hold and the fragments only one
//! holds; the deletes are then dated, when asked, from each version's deletion files.
//! Where the ends cannot tell (a restore undeleted rows, or a fragment was added without
//! lineage), each version in the range is diffed with the one before it, in id space: the
//! offsets it newly deleted and the fragments it dropped say which ids *left* their place,
//! the fragments it added (and offsets a restore undeleted) which ids *arrived*. An id that
//! leaves and arrives in one version was rewritten (an update); one that only leaves was
//! deleted; one that only arrives was inserted. Versions that move rows without changing
//! them (compaction, tiered merges) or change no rows (checkpoints, indexes, schema changes)
//! are not diffed. Either way only manifests, deletion files and row ids are read — never
//! an unchanged fragment — and then the values of the changed rows alone, from the two
//! ends of the range (at the places found, or by id).
//!
//! The report is the **net** change of each row over the range (what Lance's `delta` and a
//! diff of the two versions give): a row inserted and deleted inside the range reports
//! nothing; one updated several times reports one preimage (its values at `from`) and one
//! postimage (its values at `to`); `_commit_version` is the version of its last change.
//! It comes in row-id order, a row's preimage just before its postimage, and its values are
//! read a chunk at a time: rows of nearby ids sit on nearby pages, so each page is read for
//! one chunk.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;

use super::captured::{captured_old_side, changes_rows};
use super::ends::{fragment_parts, ids_at, live_offsets, patched_between, Part};
use super::values::{
    change_schema, columns_in_both, drop_equal_pairs, equal_rows, pair_chunks, read_chunk, Change,
    ChangeType, Counts, OldValues, Rows, CHANGE_COLUMNS, CHANGE_TYPE,
};
use crate::error::{Error, Result};
use crate::format::{Fragment, Manifest, Operation};
use crate::rowid::RowId;
use crate::table::scan_request::ScanRequest;
use crate::table::{Snapshot, Table};

/// Manifests read at once.
const CONCURRENT_MANIFEST_READS: usize = 8;
/// Versions diffed at once.
const CONCURRENT_DIFFS: usize = 4;
/// Fragments' deletions or row ids read at once within one version's diff.
const CONCURRENT_FRAGMENT_READS: usize = 8;
/// Changed rows read and reported per batch.
const ROWS_PER_BATCH: usize = 64 * 1024;

/// What a change read returns ([`Table::changes_with`]); everything by default.
#[derive(Debug, Clone, Default)]
pub struct ChangeRequest {
    /// User columns, by name; `None`: every column of `to`. Without any, no value is read.
    pub columns: Option<Vec<String>>,
    /// Only these kinds of change; `None`: every kind.
    pub kinds: Option<Vec<ChangeType>>,
    /// Deletes need not say which version deleted them: their `_commit_version` is then
    /// `to` (the version they are known gone by), and the deletion files of every version
    /// in between, which date them, are not read. For reads that show neither
    /// `_commit_version` nor `_commit_timestamp`.
    pub undated_deletes: bool,
}

impl ChangeRequest {
    fn wants(&self, kind: ChangeType) -> bool {
        self.kinds
            .as_ref()
            .is_none_or(|kinds| kinds.contains(&kind))
    }

    /// `batch` (every column, every kind) cut to what this asks.
    fn select(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let schema = batch.schema();
        let kinds = batch
            .column_by_name(CHANGE_TYPE)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| Error::internal("a change read lost its change types"))?;
        let keep: BooleanArray = (kinds.iter())
            .map(|k| Some(ChangeType::parse(k.unwrap_or_default()).is_some_and(|k| self.wants(k))))
            .collect();
        let batch = filter_record_batch(&batch, &keep)?;
        let Some(columns) = &self.columns else {
            return Ok(batch);
        };
        // The asked columns, then `_rowid` and the change's columns.
        let user = schema.fields().len() - CHANGE_COLUMNS;
        let mut positions = columns
            .iter()
            .map(|name| {
                (schema.fields()[..user].iter())
                    .position(|f| f.name() == name)
                    .ok_or_else(|| Error::invalid(format!("no column named '{name}'")))
            })
            .collect::<Result<Vec<usize>>>()?;
        positions.extend(user..schema.fields().len());
        Ok(batch.project(&positions)?)
    }
}

/// The rows that changed between two versions, read as they are asked for
/// ([`Table::change_stream`]).
pub struct ChangeStream {
    /// The version compared against.
    pub from: u64,
    /// The version compared.
    pub to: u64,
    /// The columns of the batches.
    pub schema: SchemaRef,
    /// The changes, in the order [`ChangedRows::batches`] gives them.
    pub batches: futures::stream::BoxStream<'static, Result<RecordBatch>>,
    /// Rows inserted.
    pub inserted: u64,
    /// Rows updated; over a range holding a restore, before the rows it put back as they
    /// were are dropped (as the batches are read).
    pub updated: u64,
    /// Rows deleted.
    pub deleted: u64,
    /// Versions whose rows were diffed.
    pub versions_diffed: u64,
    dropped_pairs: Arc<AtomicU64>,
}

impl std::fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStream")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("inserted", &self.inserted)
            .field("updated", &self.updated)
            .field("deleted", &self.deleted)
            .finish_non_exhaustive()
    }
}

/// What reading one chunk of a change needs.
struct ChunkReader {
    before: OldValues,
    after: Snapshot,
    read: ScanRequest,
    timestamps: HashMap<u64, i64>,
    /// The columns as read (every column and kind when the range holds a restore).
    schema: SchemaRef,
    compared: Vec<usize>,
    /// Over a range holding a restore: what was asked, kept after equal pairs are dropped.
    restored: Option<ChangeRequest>,
    dropped_pairs: Arc<AtomicU64>,
}

impl ChunkReader {
    async fn read(&self, chunk: &[Change]) -> Result<RecordBatch> {
        let (before, after) = (&self.before, &self.after);
        let columns = read_chunk(chunk, (before, after), &self.read, &self.timestamps).await?;
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        let Some(asked) = &self.restored else {
            return Ok(batch);
        };
        let mut dropped = 0;
        let batch = drop_equal_pairs(batch, chunk, &self.compared, &mut dropped)?;
        self.dropped_pairs.fetch_add(dropped, Ordering::Relaxed);
        asked.select(batch)
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
        for id in (left | arrived).iter() {
            // Seen first leaving, a row was live at `from`.
            let track = self.0.entry(id).or_insert(Track {
                existed: left.contains(id),
                live: false,
                version,
            });
            track.live = arrived.contains(id);
            track.version = version;
        }
    }

    /// Each reported change in report order.
    fn report(&self) -> Vec<Change> {
        let mut out = Vec::new();
        for (&id, track) in &self.0 {
            let change = |kind| Change::by_id(track.version, id, kind);
            match (track.existed, track.live) {
                (true, false) => out.push(change(ChangeType::Delete)),
                (false, true) => out.push(change(ChangeType::Insert)),
                (true, true) => {
                    out.push(change(ChangeType::UpdatePreimage));
                    out.push(change(ChangeType::UpdatePostimage));
                }
                (false, false) => {}
            }
        }
        in_report_order(&mut out);
        out
    }
}

/// `report` in report order: by row id, a row's preimage just before its postimage. A chunk
/// of the report then holds rows of nearby ids, which sit on nearby pages at both ends of
/// the range: each page is read for one chunk, where an order by version had every chunk
/// reach across every page the range's updates touched.
fn in_report_order(report: &mut [Change]) {
    report.sort_unstable_by_key(|c| (c.id, c.kind));
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
        self.changes_with(from, to, ChangeRequest::default()).await
    }

    /// [`Self::changes`], reading only what `request` asks: with no user column, no value
    /// at all (ids, kinds and versions come from the diff); with some kinds, only the
    /// values those need (postimages and inserts alone read nothing at `from`).
    ///
    /// # Errors
    /// As [`Self::changes`]; and a column `to` does not have.
    pub async fn changes_with(
        &self,
        from: u64,
        to: u64,
        request: ChangeRequest,
    ) -> Result<ChangedRows> {
        let stream = self.change_stream(from, to, request).await?;
        let batches: Vec<RecordBatch> = stream.batches.try_collect().await?;
        Ok(ChangedRows {
            from,
            to,
            schema: stream.schema,
            batches,
            inserted: stream.inserted,
            updated: stream.updated - stream.dropped_pairs.load(Ordering::Relaxed),
            deleted: stream.deleted,
            versions_diffed: stream.versions_diffed,
        })
    }

    /// [`Self::changes_with`] as a stream: the versions are diffed now, and the changed rows'
    /// values read chunk by chunk as the batches are asked for, so a large change is never
    /// held whole.
    ///
    /// # Errors
    /// As [`Self::changes_with`]; errors reading values come in the stream.
    pub async fn change_stream(
        &self,
        from: u64,
        to: u64,
        request: ChangeRequest,
    ) -> Result<ChangeStream> {
        self.change_stream_ending(from, (to, None), request).await
    }

    /// [`Self::change_stream`] up to `to`, a snapshot already read (a statement that
    /// pinned it when planning): its manifest is not read again.
    pub(crate) async fn change_stream_to(
        &self,
        from: u64,
        to: &Snapshot,
        request: ChangeRequest,
    ) -> Result<ChangeStream> {
        let last = Some(to.manifest().clone());
        self.change_stream_ending(from, (to.version(), last), request)
            .await
    }

    /// The change stream up to version `to.0`, whose manifest is `to.1` if already read.
    async fn change_stream_ending(
        &self,
        from: u64,
        (to, last): (u64, Option<Arc<Manifest>>),
        request: ChangeRequest,
    ) -> Result<ChangeStream> {
        if from > to {
            return Err(Error::invalid(format!(
                "a change read from version {from} to version {to}: the first version must \
                 not be after the second"
            )));
        }
        let manifests = self.manifests_between(from, (to, last)).await?;
        let pairs: Vec<(&Arc<Manifest>, &Arc<Manifest>)> = manifests
            .windows(2)
            .map(|pair| (&pair[0], &pair[1]))
            .filter(|(_, after)| changes_rows(after.transaction.operation))
            .collect();
        let (first, last) = match (manifests.first(), manifests.last()) {
            (Some(first), Some(last)) => (first.clone(), last.clone()),
            _ => return Err(Error::internal("a change read of no versions")),
        };
        let timestamps: HashMap<u64, i64> = manifests
            .iter()
            .map(|m| (m.version, m.timestamp_micros))
            .collect();
        // A restore may put rows back as they were: such pairs are found by comparing
        // every column of both sides, so all of them are read, then what was asked kept.
        let restored =
            (manifests.iter().skip(1)).any(|m| m.transaction.operation == Operation::Restore);
        let asked = request.clone();
        let request = match restored {
            true => ChangeRequest::default(),
            false => request,
        };
        let after = Snapshot::shared(self.store.clone(), last.clone());
        let (mut report, counts) = match pairs.is_empty() {
            true => (Vec::new(), Counts::default()),
            false => {
                self.net_change(&pairs, (&first, &last), restored, &asked)
                    .await?
            }
        };
        // Old values come from the range's change data where it holds them, else from
        // `from`; either way they show as the new schema's columns: a column added since
        // reads NULL, one renamed reads by its field id.
        // A read of no value (ids and kinds only) reads neither side.
        let no_values = request.columns.as_ref().is_some_and(Vec::is_empty);
        let old_side = match restored || no_values {
            true => None,
            false => captured_old_side(&manifests, &mut report).map(Arc::new),
        };
        let before = OldValues {
            snapshot: Snapshot::shared(self.store.clone(), old_side.unwrap_or(first.clone())),
            shown_as: last.schema.clone(),
        };
        let read = ScanRequest {
            columns: request.columns.clone(),
            with_row_id: true,
            ..Default::default()
        };
        let read_schema = change_schema(after.scan_schema(&read)?.as_ref());
        let schema = match restored {
            true => asked
                .select(RecordBatch::new_empty(read_schema.clone()))?
                .schema(),
            false => read_schema.clone(),
        };
        let dropped_pairs = Arc::new(AtomicU64::new(0));
        let reader = Arc::new(ChunkReader {
            before,
            after,
            read,
            timestamps,
            schema: read_schema,
            compared: columns_in_both(&first.schema, &last.schema),
            restored: restored.then_some(asked),
            dropped_pairs: dropped_pairs.clone(),
        });
        let chunks: Vec<Vec<Change>> = pair_chunks(&report, ROWS_PER_BATCH)
            .map(<[_]>::to_vec)
            .collect();
        let batches = futures::stream::iter(chunks)
            .then(move |chunk| {
                let reader = reader.clone();
                async move { reader.read(&chunk).await }
            })
            .boxed();
        Ok(ChangeStream {
            from,
            to,
            schema,
            batches,
            inserted: counts.inserted,
            updated: counts.updated,
            deleted: counts.deleted,
            versions_diffed: pairs.len() as u64,
            dropped_pairs,
        })
    }

    /// The net change of each row over `pairs` (the range's versions that change rows, each
    /// with the one before it), in report order, and the count of each kind: from the ends of
    /// the range when they can tell it (see `change_ends`), otherwise from the diff of each
    /// version; deletes dated unless `request` leaves them undated (then they carry `to`,
    /// whichever way was taken). The report holds the kinds `request` wants, or all of them
    /// over a range holding a restore (its pairs are compared first).
    async fn net_change(
        &self,
        pairs: &[(&Arc<Manifest>, &Arc<Manifest>)],
        (first, last): (&Manifest, &Manifest),
        restored: bool,
        request: &ChangeRequest,
    ) -> Result<(Vec<Change>, Counts)> {
        let wanted = |kind| request.wants(kind);
        let from_ends = match restored {
            true => None,
            false => super::ends::net_change(&self.store, (first, last), &wanted).await?,
        };
        let Some((mut report, counts)) = from_ends else {
            // Versions are diffed a few at once (each diff's reads are independent), then
            // recorded in order.
            let steps: Vec<_> = (pairs.iter())
                .map(|&(before, after)| self.step(before, after))
                .collect();
            let diffs: Vec<(u64, RoaringTreemap, RoaringTreemap)> = futures::stream::iter(steps)
                .buffered(CONCURRENT_DIFFS)
                .try_collect()
                .await?;
            let mut net = NetChanges::default();
            for (version, left, arrived) in &diffs {
                net.record(*version, left, arrived);
            }
            let mut report = net.report();
            let mut counts = Counts::default();
            report.iter().for_each(|c| counts.add(c.kind));
            if !restored {
                report.retain(|c| request.wants(c.kind));
            }
            if request.undated_deletes {
                for change in report.iter_mut().filter(|c| c.kind == ChangeType::Delete) {
                    change.version = last.version;
                }
            }
            return Ok((report, counts));
        };
        let is_delete = |c: &Change| c.kind == ChangeType::Delete;
        if !request.undated_deletes && report.iter().any(is_delete) {
            // A deleted row's version is the last in which it left its place.
            let deleted: RoaringTreemap = report
                .iter()
                .filter(|c| is_delete(c))
                .map(|c| c.id)
                .collect();
            let lefts: Vec<_> = (pairs.iter())
                .map(|&(before, after)| {
                    let deleted = &deleted;
                    async move {
                        let (left, _) = self.diff(before, after, false).await?;
                        Ok::<_, Error>((after.version, left & deleted))
                    }
                })
                .collect();
            let lefts: Vec<(u64, RoaringTreemap)> = futures::stream::iter(lefts)
                .buffered(CONCURRENT_DIFFS)
                .try_collect()
                .await?;
            let mut versions: HashMap<u64, u64> = HashMap::new();
            for (version, left) in lefts {
                versions.extend(left.iter().map(|id| (id, version)));
            }
            for change in report.iter_mut().filter(|c| is_delete(c)) {
                change.version = *versions.get(&change.id).ok_or_else(|| {
                    Error::internal(format!("deleted row {} left in no version", change.id))
                })?;
            }
        }
        Ok((report, counts))
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
        let read_before = OldValues {
            snapshot: Snapshot::shared(self.store.clone(), before.clone()),
            shown_as: after.schema.clone(),
        };
        let read_after = Snapshot::shared(self.store.clone(), after.clone());
        let output = read_after.scan_schema(&request)?;
        let (old, new) = futures::future::try_join(
            read_before.take(Rows::Ids(&ids), &request, &output),
            read_after.take(&ids, request.clone()),
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

    /// The manifests of versions `from..=to`, in order (`to`'s is `last` if already read),
    /// or the error saying which is missing: one not yet written, or one cleanup removed.
    async fn manifests_between(
        &self,
        from: u64,
        (to, last): (u64, Option<Arc<Manifest>>),
    ) -> Result<Vec<Arc<Manifest>>> {
        // The ends first: a range past the latest or before the oldest fails after a GET
        // or two, not after reading the whole range.
        let last = match last {
            Some(last) => Ok(last),
            None => self.store.read_manifest(to).await.map(Arc::new),
        };
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
            Ok(last) => last,
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
    /// dropped) and, `with_arrived`, those that arrived (in added fragments, or undeleted).
    async fn diff(
        &self,
        before: &Manifest,
        after: &Manifest,
        with_arrived: bool,
    ) -> Result<(RoaringTreemap, RoaringTreemap)> {
        let parts = fragment_parts(before, after)?;
        let parts = (parts.into_iter()).filter(|p| with_arrived || !matches!(p, Part::Added(_)));
        let reads: Vec<_> = parts.map(|part| self.diff_part(part)).collect();
        let mut diffs = futures::stream::iter(reads).buffer_unordered(CONCURRENT_FRAGMENT_READS);
        let (mut left, mut arrived) = (RoaringTreemap::new(), RoaringTreemap::new());
        while let Some((l, a)) = diffs.try_next().await? {
            left |= l;
            arrived |= a;
        }
        Ok((left, arrived))
    }

    /// Version `after`'s change to the rows of `before`: the ids that left their places
    /// and those that arrived, rows a restore moved back unchanged left out.
    async fn step(
        &self,
        before: &Arc<Manifest>,
        after: &Arc<Manifest>,
    ) -> Result<(u64, RoaringTreemap, RoaringTreemap)> {
        let (mut left, mut arrived) = self.diff(before, after, true).await?;
        if after.transaction.operation == Operation::Restore {
            // A restore puts back older fragments: rows it moves back unchanged (those a
            // compaction had moved) are no change.
            let unchanged = (self.unchanged_moves(before, after, &left & &arrived)).await?;
            left -= &unchanged;
            arrived -= &unchanged;
        }
        Ok((after.version, left, arrived))
    }

    /// One fragment's part of a diff: (left, arrived).
    async fn diff_part(&self, part: Part<'_>) -> Result<(RoaringTreemap, RoaringTreemap)> {
        let (mut left, mut arrived) = (RoaringTreemap::new(), RoaringTreemap::new());
        match part {
            Part::Dropped(o) => left = self.live_ids(o).await?,
            Part::Added(n) => arrived = self.live_ids(n).await?,
            Part::Deletions(o, n) => {
                let (deleted, undeleted) = self
                    .store
                    .deletion_change(o.deletion.as_ref(), n.deletion.as_ref(), o.physical_rows)
                    .await?;
                left.extend(ids_at(o, &deleted)?.into_iter().map(|(id, _)| id));
                arrived.extend(ids_at(n, &undeleted)?.into_iter().map(|(id, _)| id));
                // Rows whose values a patch changed (or a restore took back) left their
                // values and arrived with others where they are: those live at both.
                if o.patches != n.patches {
                    let (mut patched, _) = patched_between(o, n);
                    for version in [o, n] {
                        if let Some(gone) = self.store.fragment_deletions(version).await? {
                            patched -= gone.as_ref();
                        }
                    }
                    let ids = ids_at(n, &patched)?.into_iter().map(|(id, _)| id);
                    let ids: Vec<u64> = ids.collect();
                    left.extend(ids.iter().copied());
                    arrived.extend(ids);
                }
            }
        }
        Ok((left, arrived))
    }

    /// The ids of a fragment's live rows.
    async fn live_ids(&self, fragment: &Fragment) -> Result<RoaringTreemap> {
        let offsets = live_offsets(&self.store, fragment).await?;
        Ok(ids_at(fragment, &offsets)?
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(values: &[u64]) -> RoaringTreemap {
        values.iter().copied().collect()
    }

    #[test]
    fn net_changes_report_each_row_once_by_its_first_and_last_state_in_id_order() {
        let mut net = NetChanges::default();
        // v2: 1 updated, 2 deleted, 10 and 11 inserted.
        net.record(2, &ids(&[1, 2]), &ids(&[1, 10, 11]));
        // v3: 10 updated, 11 deleted (inserted and deleted inside the range), 1 updated again.
        net.record(3, &ids(&[1, 10, 11]), &ids(&[1, 10]));
        // v4: 3 deleted, then brought back by a restore in v5.
        net.record(4, &ids(&[3]), &ids(&[]));
        net.record(5, &ids(&[]), &ids(&[3]));
        let report: Vec<(u64, u64, ChangeType)> = (net.report().into_iter())
            .map(|c| (c.version, c.id, c.kind))
            .collect();
        assert_eq!(
            report,
            vec![
                (3, 1, ChangeType::UpdatePreimage),
                (3, 1, ChangeType::UpdatePostimage),
                (2, 2, ChangeType::Delete),
                (5, 3, ChangeType::UpdatePreimage),
                (5, 3, ChangeType::UpdatePostimage),
                (3, 10, ChangeType::Insert),
            ]
        );
    }

    /// A change read up to a snapshot already held (a statement pinned it when planning)
    /// reads that version's manifest no second time, and reads the same change.
    #[tokio::test]
    async fn a_read_up_to_a_snapshot_held_reads_its_manifest_once() {
        use arrow::array::Int64Array;
        use arrow::datatypes::{DataType, Field, Schema};

        let memory = Arc::new(object_store::memory::InMemory::new());
        let counted = Arc::new(crate::io::InstrumentedStore::new(memory));
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let table = Table::create(counted.clone(), "t".into(), &schema, Default::default())
            .await
            .unwrap();
        for start in [0_i64, 10] {
            let keys = Arc::new(Int64Array::from_iter_values(start..start + 10));
            let batch = RecordBatch::try_new(schema.clone(), vec![keys]).unwrap();
            table.append(vec![batch]).await.unwrap();
        }
        let to = table.latest().await.unwrap();
        let ids_only = || ChangeRequest {
            columns: Some(vec![]),
            ..Default::default()
        };
        counted.reset();
        let stream = table.change_stream(1, to.version(), ids_only()).await;
        let read: Vec<RecordBatch> = stream.unwrap().batches.try_collect().await.unwrap();
        let gets = counted.tally().get;
        counted.reset();
        let stream = table.change_stream_to(1, &to, ids_only()).await;
        let held: Vec<RecordBatch> = stream.unwrap().batches.try_collect().await.unwrap();
        assert_eq!(counted.tally().get, gets - 1);
        assert_eq!(held, read);
        assert_eq!(held.iter().map(|b| b.num_rows()).sum::<usize>(), 20);
    }
}
