//! [`Snapshot`]: one version of a table, read-only. Scans, takes, `resolve`, and the lazily
//! built relocation view live here.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions, UInt64Array};
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{DataType, Field as ArrowField, Schema as ArrowSchema, SchemaRef};
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use roaring::{RoaringBitmap, RoaringTreemap};
use tokio::sync::OnceCell;

use super::blobs::deferred::DeferredBlobs;
use super::filter::predicate_layout;
use super::fragment_reads::{at_most, FragmentReads, ReadFilter};
use super::late_read::LateRead;
use super::scan_request::{
    ScanRequest, ROW_ADDR, ROW_CREATED_VERSION, ROW_ID, ROW_UPDATED_VERSION,
};
use crate::error::{Error, Result};
use crate::format::{Fragment, Manifest, Schema};
use crate::io::{view_type, FileColumns, PagePruning, SelectPages, TableStore};
use crate::rowid::{
    candidate_offsets, gallop, CarriedFragment, FragmentId, FragmentLayout, IdSet, RelocationView,
    RowAddress, RowId, RowIdSet,
};

/// A partial view is built while the wanted ids number at most 1 per this many carried rows.
const FEW_IDS_PER_CARRIED_ROW: u64 = 16;
/// Partial views stop once they have passed over this many times the carried rows.
const PARTIAL_VIEW_BUILDS: u64 = 4;

/// An index answer of at most this many rows is read fragment by fragment in tasks (held
/// until yielded); a larger one streams.
const MAX_ROWS_READ_IN_TASKS: u64 = 64 * 1024;

/// Fragments a take reads at once.
const CONCURRENT_FRAGMENT_READS: usize = 8;

/// A read-only view of one table version.
#[derive(Debug)]
pub struct Snapshot {
    store: TableStore,
    manifest: Arc<Manifest>,
    view: OnceCell<Arc<RelocationView>>,
    /// Carried rows passed over by partial views so far (see `view_for`).
    partial_view_rows: AtomicU64,
}

impl Snapshot {
    pub(crate) fn new(store: TableStore, manifest: Manifest) -> Self {
        Self::shared(store, Arc::new(manifest))
    }

    pub(crate) fn shared(store: TableStore, manifest: Arc<Manifest>) -> Self {
        store.note_bases(&manifest);
        Self {
            store,
            manifest,
            view: OnceCell::new(),
            partial_view_rows: AtomicU64::new(0),
        }
    }

    /// The version this snapshot reads.
    pub fn version(&self) -> u64 {
        self.manifest.version
    }

    /// The version's manifest (internals: its fragments, files, statistics and flags).
    pub fn manifest(&self) -> &Arc<Manifest> {
        &self.manifest
    }

    /// The version's schema, with field ids.
    pub fn schema(&self) -> &Schema {
        &self.manifest.schema
    }

    /// The table's store (internals).
    pub fn store(&self) -> &TableStore {
        &self.store
    }

    /// Live rows, from metadata alone.
    pub fn count_rows(&self) -> u64 {
        self.manifest.live_rows()
    }

    /// The deleted offsets of a fragment (one GET the first time, cached after).
    pub async fn deletions(&self, fragment: &Fragment) -> Result<Option<Arc<RoaringBitmap>>> {
        self.store.fragment_deletions(fragment).await
    }

    /// The deletions that can hide a row reached through the relocation view: none for a
    /// fragment whose deletions are all moves ([`TableStore::outright_deletions`]).
    pub async fn outright_deletions(
        &self,
        fragment: &Fragment,
    ) -> Result<Option<Arc<RoaringBitmap>>> {
        self.store.outright_deletions(fragment).await
    }

    /// The relocation view of this version, built on first use: the checkpoint (one GET) plus
    /// a transpose of the carried fragments newer than it.
    pub async fn relocation_view(&self) -> Result<Arc<RelocationView>> {
        self.view
            .get_or_try_init(|| async {
                let carried = self.carried();
                let view = match &self.manifest.relocation_checkpoint {
                    None => RelocationView::build(&carried, self.carried_sequences(None)),
                    Some(checkpoint) => {
                        let entries = self.store.read_checkpoint(checkpoint).await?;
                        RelocationView::merge(
                            &carried,
                            entries,
                            self.carried_sequences(Some(checkpoint.covers_fragments_through)),
                        )
                    }
                };
                Ok(Arc::new(view))
            })
            .await
            .cloned()
    }

    /// The view to resolve `ids` with: the whole view once it is built; before that, when
    /// the ids are few beside the rows of carried fragments, a view of just their entries —
    /// one pass over the sequences instead of sorting every moved row, which is most of a
    /// cold take's extra cost after many updates. Partial passes are tallied, and once they
    /// have cost a few whole builds the whole view is built and kept.
    async fn view_for(&self, ids: impl Iterator<Item = RowId>) -> Result<Arc<RelocationView>> {
        if let Some(view) = self.view.get() {
            return Ok(view.clone());
        }
        let carried = self.carried();
        let carried_rows: u64 = carried.iter().map(|c| c.physical_rows as u64).sum();
        let wanted = IdSet::new(ids);
        let few = (wanted.len() as u64).saturating_mul(FEW_IDS_PER_CARRIED_ROW) <= carried_rows;
        let spent = self.partial_view_rows.load(Ordering::Relaxed);
        // With a checkpoint too: loading one re-sorts every entry into a view, as much work
        // as a whole build (a cold take of 1,000 ids after 1M updates: 64 ms through the
        // checkpoint, 12 ms through a view of just them).
        if !few || spent >= PARTIAL_VIEW_BUILDS * carried_rows {
            return self.relocation_view().await;
        }
        self.partial_view_rows
            .fetch_add(carried_rows, Ordering::Relaxed);
        Ok(Arc::new(RelocationView::build_for(
            &carried,
            self.carried_sequences(None),
            &wanted,
        )))
    }

    /// Every carried fragment (one with a row-id sequence), as the view needs it.
    fn carried(&self) -> Vec<CarriedFragment> {
        self.manifest
            .fragments
            .iter()
            .filter(|f| !f.row_ids.is_native())
            .map(|f| CarriedFragment {
                id: f.id,
                physical_rows: f.physical_rows,
            })
            .collect()
    }

    fn carried_sequences(
        &self,
        newer_than: Option<FragmentId>,
    ) -> impl Iterator<Item = (FragmentId, &crate::rowid::RowIdSequence)> {
        self.manifest.fragments.iter().filter_map(move |f| {
            let seq = f.row_ids.sequence()?;
            newer_than
                .is_none_or(|n| f.id > n)
                .then_some((f.id, seq.as_ref()))
        })
    }

    /// Where the row with `id` is now, if it is live in this version.
    pub async fn resolve(&self, id: RowId) -> Result<Option<RowAddress>> {
        let view = self.view_for(std::iter::once(id)).await?;
        let Some((fragment, addr)) = self.candidate(&view, id) else {
            return Ok(None);
        };
        let deleted = self.outright_deletions(fragment).await?;
        Ok((!deleted.is_some_and(|d| d.contains(addr.offset()))).then_some(addr))
    }

    /// Where `id` lives if its row was not deleted: the view's answer (or its birth address)
    /// when that fragment exists and holds this id there.
    fn candidate(&self, view: &RelocationView, id: RowId) -> Option<(&Fragment, RowAddress)> {
        let addr = view.lookup(id).unwrap_or(id.birth_address());
        let fragment = self.manifest.fragment(addr.fragment_id())?;
        if addr.offset() >= fragment.physical_rows {
            return None;
        }
        // The address holds this id only if it was born there or moved there.
        if let Some(seq) = fragment.row_ids.sequence() {
            if seq.get(addr.offset() as usize) != Some(id) {
                return None;
            }
        }
        Some((fragment, addr))
    }

    /// The output schema of a scan.
    pub fn scan_schema(&self, request: &ScanRequest) -> Result<SchemaRef> {
        let (_, schema) = self.projection(request)?;
        Ok(super::blobs::sizes::sized(request, &schema)?.1)
    }

    fn projection(&self, request: &ScanRequest) -> Result<(FileColumns, SchemaRef)> {
        let schema = &self.manifest.schema;
        let fields: Vec<&crate::format::Field> = match &request.columns {
            None => schema.fields.iter().collect(),
            Some(names) => names
                .iter()
                .map(|n| {
                    schema
                        .field_by_name(n)
                        .ok_or_else(|| Error::invalid(format!("no column named '{n}'")))
                })
                .collect::<Result<_>>()?,
        };
        // Sizes need no inline bytes: their descriptors are read lean.
        let lean = |f: &crate::format::Field| {
            f.blob.is_some()
                && ((request.blob_descriptors && request.lean_blob_descriptors)
                    || request.blob_sizes.contains(&f.name))
        };
        let as_descriptors =
            |f: &crate::format::Field| (f.blob.is_some() && request.blob_descriptors) || lean(f);
        let as_view = |f: &crate::format::Field| {
            (f.blob.is_none() && request.as_views.contains(&f.name))
                .then(|| view_type(&f.data_type))
                .flatten()
        };
        let mut arrow_fields: Vec<ArrowField> = fields
            .iter()
            .map(|f| match (lean(f), as_descriptors(f), as_view(f)) {
                (true, _, _) => ArrowField::new(&f.name, f.lean_file_type(), f.nullable),
                (false, true, _) => ArrowField::new(&f.name, f.file_type(), f.nullable),
                (false, false, Some(view)) => f.to_arrow().with_data_type(view),
                (false, false, None) => f.to_arrow(),
            })
            .collect();
        if request.with_row_id {
            arrow_fields.push(ArrowField::new(ROW_ID, DataType::UInt64, false));
        }
        if request.with_row_addr {
            arrow_fields.push(ArrowField::new(ROW_ADDR, DataType::UInt64, false));
        }
        if request.with_lineage {
            for name in [ROW_CREATED_VERSION, ROW_UPDATED_VERSION] {
                arrow_fields.push(ArrowField::new(name, DataType::UInt64, true));
            }
        }
        let described = fields.iter().filter(|f| as_descriptors(f)).map(|f| f.id);
        let lean = fields.iter().filter(|f| lean(f)).map(|f| f.id);
        let viewed = fields.iter().filter(|f| as_view(f).is_some()).map(|f| f.id);
        let columns = FileColumns::of(fields.iter().copied())
            .deferring(described.collect())
            .without_inline(lean.collect())
            .as_views(viewed.collect());
        Ok((columns, Arc::new(ArrowSchema::new(arrow_fields))))
    }

    /// Streams the live rows the request selects, fragment by fragment.
    pub async fn scan(
        &self,
        request: ScanRequest,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let (field_ids, output) = self.projection(&request)?;
        let masks = match &request.row_ids {
            Some(ids) => Some(self.masks_of(ids.as_treemap()).await?),
            None => None,
        };
        let index = match &request.index {
            Some(probe) => Some(probe.answer(self).await?),
            None => None,
        };
        let store = match &request.metrics {
            Some(m) => self.store.counting_bytes(m.bytes_read.clone()),
            None => self.store.clone(),
        }
        .blob_references(request.blob_references);
        let reads = self.fragment_reads(&field_ids, &output, &request)?;
        let wanted: Vec<&Fragment> = self
            .manifest
            .fragments
            .iter()
            .filter(|f| {
                request
                    .fragments
                    .as_ref()
                    .is_none_or(|only| only.contains(&f.id))
            })
            .collect();
        // The index's offsets, like a mask's, are live rows already: no deletions read. The
        // other fragments' deletions are fetched side by side, not one after another.
        let index_covers = |f: &Fragment| index.as_ref().is_some_and(|i| i.covered.contains(f.id));
        let fetches: Vec<_> = wanted
            .iter()
            .map(|&f| {
                let skip = masks.is_some() || index_covers(f);
                async move {
                    if skip {
                        Ok(None)
                    } else {
                        self.deletions(f).await
                    }
                }
            })
            .collect();
        let deletions: Vec<Option<Arc<RoaringBitmap>>> = stream::iter(fetches)
            .buffered(CONCURRENT_FRAGMENT_READS)
            .try_collect()
            .await?;
        let mut parts = Vec::new();
        for (fragment, deleted) in wanted.into_iter().zip(deletions) {
            let rows = request
                .fragment_rows
                .as_ref()
                .and_then(|r| r.get(&fragment.id))
                .cloned()
                .unwrap_or(0..fragment.physical_rows);
            let masked = |read: u64| {
                if let Some(m) = &request.metrics {
                    let rows = u64::from(rows.end.saturating_sub(rows.start));
                    m.rows_masked
                        .fetch_add(rows - read.min(rows), Ordering::Relaxed);
                }
            };
            let index_covers = index_covers(fragment);
            let found = index
                .as_ref()
                .filter(|_| index_covers)
                .map(|i| i.offsets.get(&fragment.id).cloned().unwrap_or_default());
            let mut offsets = match (&masks, found) {
                (Some(masks), found) => match masks.get(&fragment.id) {
                    Some(mask) => Some(found.map_or_else(|| mask.clone(), |f| f & mask)),
                    None => {
                        masked(0);
                        continue;
                    }
                },
                (None, Some(found)) => Some(found),
                (None, None) => match deleted {
                    Some(deleted) => {
                        let mut live = RoaringBitmap::new();
                        live.insert_range(rows.clone());
                        live -= deleted.as_ref();
                        Some(live)
                    }
                    None => None,
                },
            };
            if let Some(range) = &request.row_id_range {
                let in_range = offsets_with_ids_in(fragment, range);
                offsets = Some(match offsets {
                    Some(selected) => selected & in_range,
                    None => in_range,
                });
            }
            if let Some(selected) = offsets.as_mut() {
                selected.remove_range(..rows.start);
                selected.remove_range(rows.end..);
            }
            masked(offsets.as_ref().map_or(
                u64::from(rows.end.saturating_sub(rows.start)),
                RoaringBitmap::len,
            ));
            if offsets.as_ref().is_some_and(RoaringBitmap::is_empty) {
                continue;
            }
            parts.push(reads.read_pruning(&store, fragment, offsets, rows, !index_covers));
        }
        // Rows chosen by id, or found by an index, are few and scattered: read their
        // fragments side by side (an index answer of many rows streams instead).
        let few_rows = masks.is_some()
            || index.as_ref().is_some_and(|i| {
                i.offsets.values().map(RoaringBitmap::len).sum::<u64>() <= MAX_ROWS_READ_IN_TASKS
            });
        let rows = if few_rows {
            read_in_tasks(parts)
        } else {
            stream::iter(parts).flatten().boxed()
        };
        let rows = at_most(rows, request.limit);
        if request.blob_sizes.is_empty() {
            return Ok(rows);
        }
        let (positions, sized) = super::blobs::sizes::sized(&request, &output)?;
        Ok(super::blobs::sizes::sizes(rows, positions, sized, store))
    }

    /// How every fragment of one scan is read, as `output` (whose first `columns.len()`
    /// fields are the user columns): with a filter, its columns are read beside the
    /// requested ones and only the rows that pass are yielded.
    fn fragment_reads(
        &self,
        columns: &FileColumns,
        output: &SchemaRef,
        request: &ScanRequest,
    ) -> Result<FragmentReads> {
        let Some(predicate) = request.filter.clone() else {
            // With a limit, blob payloads wait until the rows that make it are known.
            let empty = Arc::new(ArrowSchema::empty());
            let deferred = match request.limit.is_some() && !request.blob_descriptors {
                true => DeferredBlobs::plan(self.schema(), output, &empty).map(Arc::new),
                false => None,
            };
            // The rows' addresses come along: the kept inline values are read by them.
            let (columns, schema, request) = match &deferred {
                Some(blobs) => (
                    blobs.defer(columns.clone()),
                    blobs.input().clone(),
                    ScanRequest {
                        with_row_addr: true,
                        ..request.clone()
                    },
                ),
                None => (columns.clone(), output.clone(), request.clone()),
            };
            return Ok(FragmentReads {
                columns,
                schema,
                request,
                filter: None,
                pages: None,
                deferred,
                late: None,
            });
        };
        let mut names: Vec<String> = output.fields()[..columns.len()]
            .iter()
            .map(|f| f.name().clone())
            .collect();
        // The filter's columns as it reads them: those it reads as views, as views only if
        // the scan does not return them (a returned column is read as the table types it).
        let mut probe_request = predicate_layout(predicate.as_ref());
        (probe_request.as_views).retain(|c| !names.contains(c));
        let (probe_ids, probe) = self.projection(&probe_request)?;
        let pages = (predicate.prunes_pages() && !probe_ids.is_empty()).then(|| {
            let probe_ids = probe_ids.ids().to_vec();
            let predicate = predicate.clone();
            let select: Arc<SelectPages> =
                Arc::new(move |metadata, schema| predicate.select_pages(metadata, schema));
            PagePruning {
                field_ids: probe_ids,
                select,
                rows_pruned: request.metrics.as_ref().map(|m| m.rows_page_pruned.clone()),
            }
        });
        // Descriptors a filter sees are the request's: the two-step read does not ask for them.
        let late = match request.blob_descriptors || request.filter_in_one_step {
            true => None,
            false => {
                let output = (columns.clone(), output.clone());
                let probe = (&probe_request, &probe_ids, &probe);
                LateRead::plan(&self.manifest, output, &predicate, probe, |r| {
                    self.projection(r)
                })?
            }
        };
        for name in predicate.columns() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let deferred = match request.blob_descriptors {
            true => None,
            false => DeferredBlobs::plan(self.schema(), output, &probe).map(Arc::new),
        };
        let read = ScanRequest {
            columns: Some(names),
            with_row_id: request.with_row_id || predicate.needs_row_id(),
            // A deferred column's kept inline values are read by their rows' addresses.
            with_row_addr: request.with_row_addr
                || predicate.needs_row_addr()
                || deferred.is_some(),
            filter: None,
            as_views: probe_request.as_views,
            ..request.clone()
        };
        let (read_ids, read_schema) = self.projection(&read)?;
        let (read_ids, read_schema, filtered) = match &deferred {
            Some(blobs) => (
                blobs.defer(read_ids),
                blobs.as_descriptors(&read_schema),
                blobs.input().clone(),
            ),
            None => (read_ids, read_schema, output.clone()),
        };
        let positions = |schema: &SchemaRef| -> Result<Vec<usize>> {
            Ok(schema
                .fields()
                .iter()
                .map(|f| read_schema.index_of(f.name()))
                .collect::<std::result::Result<_, _>>()?)
        };
        let filter = ReadFilter {
            predicate,
            probe: positions(&probe)?,
            wanted: positions(&filtered)?,
            output: filtered,
        };
        Ok(FragmentReads {
            columns: read_ids,
            schema: read_schema,
            request: read,
            filter: Some(Arc::new(filter)),
            pages,
            deferred,
            late: late.map(Arc::new),
        })
    }

    /// Live offsets per fragment of the rows whose ids are in `ids`.
    pub async fn masks(&self, ids: &RowIdSet) -> Result<BTreeMap<FragmentId, RoaringBitmap>> {
        self.masks_of(ids.as_treemap()).await
    }

    pub(crate) async fn masks_of(
        &self,
        ids: &RoaringTreemap,
    ) -> Result<BTreeMap<FragmentId, RoaringBitmap>> {
        let view = self.view_for(ids.iter().map(RowId::from_u64)).await?;
        let layouts: Vec<FragmentLayout<'_>> = self
            .manifest
            .fragments
            .iter()
            .map(|f| FragmentLayout {
                id: f.id,
                physical_rows: f.physical_rows,
                sequence: f.row_ids.sequence().map(|s| s.as_ref()),
            })
            .collect();
        let candidates = candidate_offsets(ids, &layouts, &view);
        // Only the fragments holding a candidate have their deletions read: a lookup of one
        // fragment's rows costs (and can fail on) that fragment's deletion file alone.
        let masks: Vec<(FragmentId, RoaringBitmap)> = stream::iter(candidates)
            .map(|(id, mut offsets)| async move {
                let fragment = self.manifest.fragment(id).ok_or_else(|| {
                    Error::internal(format!("a mask names fragment {id}, not in the version"))
                })?;
                if let Some(deleted) = self.outright_deletions(fragment).await? {
                    offsets -= deleted.as_ref();
                }
                Ok::<_, Error>((id, offsets))
            })
            .buffered(CONCURRENT_FRAGMENT_READS)
            .try_collect()
            .await?;
        Ok(masks.into_iter().filter(|(_, m)| !m.is_empty()).collect())
    }

    /// The live rows with the given ids, in the order asked, skipping ids that name no live
    /// row. Resolves through the relocation view and reads only the rows' pages.
    pub async fn take(&self, ids: &[RowId], request: ScanRequest) -> Result<RecordBatch> {
        let _footers = self.load_birth_footers(ids, &request)?;
        let view = self.view_for(ids.iter().copied()).await?;
        let wanted: Vec<RowAddress> = (ids.iter())
            .filter_map(|&id| self.candidate(&view, id))
            .map(|(_, addr)| addr)
            .collect();
        self.read_at(&wanted, request, true).await
    }

    /// Starts loading, in a task of its own, the footers of the fragments `ids` were born in
    /// (most rows are still there) while they are resolved: after many updates that search
    /// is CPU that the runtime's other threads can hide behind those reads. Nothing starts
    /// when no row has moved or the whole view is built (the ids resolve at once). The task
    /// is aborted when the guard drops; errors are left to the reads that follow.
    fn load_birth_footers(
        &self,
        ids: &[RowId],
        request: &ScanRequest,
    ) -> Result<Option<AbortOnDrop>> {
        let carried = self
            .manifest
            .fragments
            .iter()
            .any(|f| !f.row_ids.is_native());
        if !carried || self.view.get().is_some() {
            return Ok(None);
        }
        let (field_ids, _) = self.projection(request)?;
        let born_in: BTreeSet<FragmentId> = (ids.iter())
            .map(|id| id.birth_address().fragment_id())
            .collect();
        let fragments: Vec<Fragment> = (born_in.into_iter())
            .filter_map(|f| self.manifest.fragment(f).cloned())
            .collect();
        let (store, field_ids) = (self.store.clone(), Arc::new(field_ids.ids().to_vec()));
        let loads = fragments.into_iter().map(move |fragment| {
            let (store, field_ids) = (store.clone(), field_ids.clone());
            async move { store.load_footers(&fragment, &field_ids).await }
        });
        let load = async move {
            let loading = stream::iter(loads).buffer_unordered(CONCURRENT_FRAGMENT_READS);
            loading.for_each(|_| async {}).await;
        };
        Ok(Some(AbortOnDrop(tokio::spawn(load))))
    }

    /// The rows at `addresses`, in that order, each known to be live in this version (a
    /// change read found them so): no view, no deletion read.
    pub(crate) async fn take_at(
        &self,
        addresses: &[RowAddress],
        request: ScanRequest,
    ) -> Result<RecordBatch> {
        self.read_at(addresses, request, false).await
    }

    /// The rows at `wanted`, in that order; with `drop_deleted`, those deleted outright are
    /// skipped (an id whose newest address is deleted names no live row).
    async fn read_at(
        &self,
        wanted: &[RowAddress],
        request: ScanRequest,
        drop_deleted: bool,
    ) -> Result<RecordBatch> {
        let (field_ids, output) = self.projection(&request)?;
        let mut by_fragment: BTreeMap<FragmentId, RoaringBitmap> = BTreeMap::new();
        for addr in wanted {
            by_fragment
                .entry(addr.fragment_id())
                .or_default()
                .insert(addr.offset());
        }
        // Read with addresses, to put the rows back in the order asked (an id whose newest
        // address is deleted is not read, so it is not found there).
        let internal = ScanRequest {
            with_row_addr: true,
            ..request.clone()
        };
        let (_, read_schema) = self.projection(&internal)?;
        let fragment_reads = Arc::new(self.fragment_reads(&field_ids, &read_schema, &internal)?);
        // Each fragment's task fetches its outright deletions and then its live rows: no
        // fragment's read waits for the deletions of all the others.
        let reads: Vec<_> = by_fragment
            .into_iter()
            .filter_map(|(fragment_id, mut offsets)| {
                let fragment = self.manifest.fragment(fragment_id)?.clone();
                let store = (self.store.clone()).blob_references(request.blob_references);
                let reads = fragment_reads.clone();
                let read = async move {
                    let deleted = match drop_deleted {
                        true => store.outright_deletions(&fragment).await?,
                        false => None,
                    };
                    if let Some(deleted) = deleted {
                        offsets -= deleted.as_ref();
                    }
                    Ok::<_, Error>(reads.read(&store, &fragment, Some(offsets)))
                };
                Some(stream::once(read).try_flatten().boxed())
            })
            .collect();
        let batches: Vec<RecordBatch> = read_in_tasks(reads).try_collect().await?;
        let all = concat_batches(&read_schema, &batches)?;
        let addr_column = all
            .column_by_name(ROW_ADDR)
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
            .ok_or_else(|| Error::internal("take lost its address column"))?;
        let indices: UInt64Array = positions(addr_column.values(), wanted)?.into();
        let columns = output
            .fields()
            .iter()
            .map(|f| {
                let column = all
                    .column_by_name(f.name())
                    .ok_or_else(|| Error::internal(format!("take lost column {}", f.name())))?;
                Ok(take(column.as_ref(), &indices, None)?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new_with_options(
            output,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(indices.len())),
        )?)
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Where each of `wanted` is among the addresses `read` (skipping those not read). A take's
/// rows come in address order (fragments in order, offsets ascending), so each is found
/// from the one before: forward by exponential search (a step, for rows asked in address
/// order), back by binary search.
fn positions(read: &[u64], wanted: &[RowAddress]) -> Result<Vec<u64>> {
    if !read.is_sorted() {
        return Err(Error::internal(
            "a take's rows came back out of address order",
        ));
    }
    let mut at = 0;
    let found = wanted.iter().filter_map(|a| {
        let a = a.as_u64();
        at = match at == 0 || read[at - 1] < a {
            true => at + gallop(&read[at..], a),
            false => read[..at].partition_point(|&r| r < a),
        };
        (read.get(at) == Some(&a)).then_some(at as u64)
    });
    Ok(found.collect())
}

/// Reads each fragment's rows in its own task, a few fragments at a time, yielding them in
/// fragment order. For reads of scattered rows, decoding their pages is the cost, and tasks
/// spread it over the runtime's threads; each read's rows are held until yielded, so this is
/// only for reads whose output is small.
fn read_in_tasks(
    reads: Vec<BoxStream<'static, Result<RecordBatch>>>,
) -> BoxStream<'static, Result<RecordBatch>> {
    stream::iter(reads)
        .map(|read| async move {
            tokio::spawn(read.try_collect::<Vec<RecordBatch>>())
                .await
                .map_err(|e| Error::External(Box::new(e)))?
        })
        .buffered(CONCURRENT_FRAGMENT_READS)
        .map_ok(|batches| stream::iter(batches.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
}

/// The offsets of `fragment` whose row ids fall in `range` (deleted rows included).
fn offsets_with_ids_in(fragment: &Fragment, range: &RangeInclusive<u64>) -> RoaringBitmap {
    let mut offsets = RoaringBitmap::new();
    match fragment.row_ids.sequence() {
        Some(sequence) => {
            for (offset, id) in sequence.iter().enumerate() {
                if range.contains(&id.as_u64()) {
                    offsets.insert(offset as u32);
                }
            }
        }
        None => {
            let base = RowAddress::new(fragment.id, 0).as_u64();
            let last = base + fragment.physical_rows as u64;
            let (lo, hi) = ((*range.start()).max(base), (*range.end()).min(last));
            if lo < last && lo <= hi {
                let hi = hi.min(last - 1);
                offsets.insert_range((lo - base) as u32..=(hi - base) as u32);
            }
        }
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_find_rows_asked_in_any_order_and_skip_those_not_read() {
        let read: Vec<u64> = [3, 5, 9, 12, 40].into_iter().collect();
        let at = |a: u64| RowAddress::from_u64(a);
        let wanted: Vec<RowAddress> = [9, 3, 4, 40, 40, 12, 5, 41].into_iter().map(at).collect();
        assert_eq!(positions(&read, &wanted).unwrap(), vec![2, 0, 4, 4, 3, 1]);
        let in_order: Vec<RowAddress> = [3, 5, 6, 12, 40].into_iter().map(at).collect();
        assert_eq!(positions(&read, &in_order).unwrap(), vec![0, 1, 3, 4]);
        assert!(positions(&[5, 3], &in_order).is_err());
    }
}
