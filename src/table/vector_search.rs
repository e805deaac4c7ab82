//! Nearest rows ([`Snapshot::nearest`]) through vector indexes. A search probes the
//! `nprobes` partitions whose centroids are nearest the query in each segment of the index
//! that ranks the column by the metric asked, keeps a candidate only while its entry is valid
//! (see `vector_index.rs`): a deleted row drops out, a row changed since is ranked by its
//! vector as it is now, and fragments no segment covers (appended, written by updates,
//! patched in the indexed column, or merged with such) are searched exactly.
//! With every partition probed an `ivf_flat` search is exact. An `ivf_pq` segment's
//! distances are estimates from its codes: with a refine factor `r`, the `r × k` best
//! candidates are re-ranked by their rows' exact vectors (read by take).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float32Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Float32Type, Schema, UInt64Type};
use futures::{stream, StreamExt, TryStreamExt};

use super::vector_index::{VectorColumn, CANDIDATES_CHECKED_AT_ONCE};
use super::vector_train::{coding_space, on_every_core, DistanceTable};
use super::{RowPredicate, ScanRequest, Snapshot, ROW_ID};
use crate::error::{Error, Result};
use crate::format::{Fragment, IndexSegment, Metric, VectorIndexKind};
use crate::io::VectorRun;
use crate::rowid::{FragmentId, RowId};

/// The column a nearest-rows search adds: each row's distance to the query.
pub const DISTANCE: &str = "_distance";

/// Segments searched at once.
const CONCURRENT_SEGMENTS: usize = 8;

/// How [`Snapshot::nearest`] searches.
#[derive(Debug, Clone, Copy)]
pub struct NearestOptions {
    /// The distance to rank by.
    pub metric: Metric,
    /// Partitions probed in each segment.
    pub nprobes: usize,
    /// False: search every row exactly, whatever index there is.
    pub use_index: bool,
    /// For an `ivf_pq` index: re-rank this many times `k` candidates by their exact
    /// vectors; `None`: rank by the codes' estimates. No effect on `ivf_flat`.
    pub refine_factor: Option<usize>,
}

impl Default for NearestOptions {
    fn default() -> Self {
        Self {
            metric: Metric::L2,
            nprobes: 20,
            use_index: true,
            refine_factor: None,
        }
    }
}

impl Snapshot {
    /// The `k` rows nearest `query` in vector column `column`, nearest first (ties by row
    /// id): every user column, then `_rowid` and `_distance`. Rows whose vector is NULL or
    /// not finite are never returned. See the module header for how an index is used.
    pub async fn nearest(
        &self,
        column: &str,
        query: &[f32],
        k: usize,
        options: NearestOptions,
    ) -> Result<RecordBatch> {
        self.nearest_where(column, query, k, options, None).await
    }

    /// [`Self::nearest`] among the rows that pass `filter` (a pre-filter: the `k` nearest of
    /// those rows, not the passing rows of the `k` nearest). Where the probed partitions
    /// hold fewer than `k` candidates that are valid and pass, four times as many
    /// partitions are probed, until every one has been.
    pub async fn nearest_where(
        &self,
        column: &str,
        query: &[f32],
        k: usize,
        options: NearestOptions,
        filter: Option<Arc<dyn RowPredicate>>,
    ) -> Result<RecordBatch> {
        let search = (column, query, k, options);
        self.nearest_in_columns(search, filter, None).await
    }

    /// [`Self::nearest_where`] with only the user columns `columns` (`None`: every one)
    /// before `_rowid` and `_distance`: the rows are taken whole, and an SQL search that
    /// returns few of a wide table's columns reads only those.
    pub(crate) async fn nearest_in_columns(
        &self,
        (column, query, k, options): (&str, &[f32], usize, NearestOptions),
        filter: Option<Arc<dyn RowPredicate>>,
        columns: Option<Vec<String>>,
    ) -> Result<RecordBatch> {
        let vectors = self.vector_column(column)?;
        if query.len() != vectors.dimension {
            return Err(Error::invalid(format!(
                "the query has {} components; column {column} has {}",
                query.len(),
                vectors.dimension
            )));
        }
        if k == 0 {
            return Err(Error::invalid(
                "a nearest-rows search needs k of at least 1",
            ));
        }
        if query.iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid(
                "the query vector has a component that is not finite",
            ));
        }
        let metric = options.metric;
        let segments = match options.use_index {
            true => self.vector_segments(vectors.field_id, metric, vectors.dimension),
            false => Vec::new(),
        };
        let covered =
            (segments.iter()).fold(roaring::RoaringBitmap::new(), |a, s| a | &s.fragments);
        let uncovered: Vec<FragmentId> = (self.manifest().fragments.iter())
            .map(|f| f.id)
            .filter(|f| !covered.contains(*f))
            .collect();
        // Exactly over what no segment covers, keeping the k best as it goes. Beside an
        // index, and unfiltered, from the vectors the handle kept.
        let mut exact = Kept::new(k);
        if segments.is_empty() || filter.is_some() {
            self.for_each_vector(&vectors, uncovered, filter.clone(), |id, v| {
                exact.offer(metric.distance(v, query), id, ());
            })
            .await?;
        } else {
            let loads: Vec<_> = (self.manifest().fragments.iter())
                .filter(|f| !covered.contains(f.id))
                .map(|fragment| self.uncovered_run(&vectors, fragment))
                .collect();
            let mut runs = stream::iter(loads).buffered(CONCURRENT_SEGMENTS);
            while let Some(run) = runs.try_next().await? {
                // The k nearest of each core's share, then of theirs.
                let n = vectors.dimension;
                let nearest = on_every_core(run.ids.len(), |rows| {
                    let mut kept = Kept::new(k);
                    for row in rows {
                        let v = &run.values[row * n..(row + 1) * n];
                        kept.offer(metric.distance(v, query), run.ids[row], ());
                    }
                    kept.into_sorted().0
                });
                for (distance, id, ()) in nearest {
                    exact.offer(distance, id, ());
                }
            }
        }
        let mut best: Vec<(f32, u64)> = (exact.into_sorted().0.into_iter())
            .map(|(distance, id, ())| (distance, id))
            .collect();
        // Through the index over what it covers.
        let approximate =
            (segments.iter()).any(|s| s.vector.is_some_and(|v| v.kind == VectorIndexKind::IvfPq));
        let want = match approximate {
            true => k.saturating_mul(options.refine_factor.unwrap_or(1).max(1)),
            false => k,
        };
        let most = segments
            .iter()
            .filter_map(|s| s.vector)
            .map(|v| v.partitions as usize)
            .max();
        // Under a filter, the covered rows that pass it, found once by a scan of its columns:
        // a candidate is kept only if it is among them.
        let allowed = match (&filter, segments.is_empty()) {
            (Some(filter), false) => {
                let fragments = (self.manifest().fragments.iter())
                    .map(|f| f.id)
                    .filter(|f| covered.contains(*f))
                    .collect();
                Some(self.passing_ids(fragments, filter.clone()).await?)
            }
            _ => None,
        };
        let refined = approximate && options.refine_factor.is_some();
        let recheck = (!refined).then_some(&vectors);
        let mut nprobes = options.nprobes.max(1);
        let mut found = Vec::new();
        while !segments.is_empty() {
            found = self
                .index_candidates(
                    recheck,
                    &segments,
                    query,
                    (metric, nprobes),
                    want,
                    allowed.as_ref(),
                )
                .await?;
            if found.len() >= want || most.is_none_or(|most| nprobes >= most) {
                break;
            }
            nprobes = nprobes.saturating_mul(4);
        }
        if refined {
            found = self
                .exact_distances(&vectors, &found, query, metric)
                .await?;
        }
        best.extend(found);
        best.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        best.truncate(k);
        self.rows_with_distances(&best, columns).await
    }

    /// Up to `k` of the entries of the `nprobes` partitions nearest `query` in each of
    /// `segments` (ranked by `metric`) that are valid and `allowed` (all, without a list),
    /// nearest first.
    async fn index_candidates(
        &self,
        recheck: Option<&VectorColumn>,
        segments: &[IndexSegment],
        query: &[f32],
        (metric, nprobes): (Metric, usize),
        k: usize,
        allowed: Option<&roaring::RoaringTreemap>,
    ) -> Result<Vec<(f32, u64)>> {
        // Each probe keeps its nearest entries only: enough for `k` valid ones unless most
        // are stale, and then the search is run again keeping every entry.
        let mut limit = CANDIDATES_CHECKED_AT_ONCE.max(k.saturating_mul(4));
        loop {
            let (found, dropped) = self
                .valid_candidates(
                    recheck,
                    segments,
                    query,
                    (metric, nprobes),
                    (k, limit),
                    allowed,
                )
                .await?;
            if found.len() >= k || !dropped {
                return Ok(found);
            }
            limit = usize::MAX;
        }
    }

    /// [`Self::index_candidates`] from the `limit` nearest entries of each segment's
    /// probed partitions; true if entries beyond them were left out. A row changed since
    /// its segment is ranked by its vector in `recheck` as it is now; with none, the caller
    /// re-ranks every candidate so (an `ivf_pq` search with a refine factor).
    async fn valid_candidates(
        &self,
        recheck: Option<&VectorColumn>,
        segments: &[IndexSegment],
        query: &[f32],
        (metric, nprobes): (Metric, usize),
        (k, limit): (usize, usize),
        allowed: Option<&roaring::RoaringTreemap>,
    ) -> Result<(Vec<(f32, u64)>, bool)> {
        let covered =
            (segments.iter()).fold(roaring::RoaringBitmap::new(), |a, s| a | &s.fragments);
        let probes: Vec<_> = (segments.iter().enumerate())
            .map(|(at, segment)| async move {
                let mut kept = Kept::new(limit);
                let searched = (segment, at, query);
                (self.probe_segment(searched, (metric, nprobes), allowed, &mut kept)).await?;
                Ok::<_, Error>(kept.into_sorted())
            })
            .collect();
        let probed: Vec<(Vec<Entry<usize>>, bool)> = stream::iter(probes)
            .buffered(CONCURRENT_SEGMENTS)
            .try_collect()
            .await?;
        let dropped = probed.iter().any(|(_, dropped)| *dropped);
        let mut candidates: Vec<(f32, u64, usize)> =
            probed.into_iter().flat_map(|(kept, _)| kept).collect();
        candidates.sort_by(by_distance);
        let mut seen = HashSet::new();
        let mut found: Vec<(f32, u64)> = Vec::new();
        for chunk in candidates.chunks(CANDIDATES_CHECKED_AT_ONCE.max(k.saturating_mul(2))) {
            let now = self.where_and_when(chunk.iter().map(|c| c.1)).await?;
            let mut changed = Vec::new();
            for &(distance, id, at) in chunk {
                let Some(&(fragment, updated)) = now.get(&id) else {
                    continue; // deleted
                };
                // Fragments no segment covers were searched exactly.
                if !covered.contains(fragment) {
                    continue;
                }
                let current = match updated {
                    // Changed since the segment read it: checked below.
                    Some(version) if version > segments[at].dataset_version => {
                        changed.push((distance, id));
                        continue;
                    }
                    Some(_) => true,
                    // No lineage (written before it was kept): trust the fragment only.
                    None => segments[at].fragments.contains(fragment),
                };
                if current && seen.insert(id) {
                    found.push((distance, id));
                }
            }
            // A row changed since its segment yet still in a covered fragment was patched
            // in place (a patch of the indexed column uncovers the fragment, so another
            // column's: its vector is as indexed), or rewritten and then compacted together
            // with covered fragments (a newer segment holds its vector): ranked by its
            // vector as it is now, it is neither lost nor misplaced.
            changed.retain(|(_, id)| !seen.contains(id));
            if !changed.is_empty() {
                let ranked = match recheck {
                    Some(vectors) => {
                        self.exact_distances(vectors, &changed, query, metric)
                            .await?
                    }
                    // The caller re-ranks every candidate by its vector as it is now.
                    None => changed,
                };
                for (distance, id) in ranked {
                    if seen.insert(id) {
                        found.push((distance, id));
                    }
                }
            }
            // Enough once k are no farther than this chunk's farthest candidate: the next
            // chunks' are farther (a changed row's distance may not be).
            let bound = chunk.last().map_or(f32::INFINITY, |c| c.0);
            if found.iter().filter(|f| f.0 <= bound).count() >= k {
                break;
            }
        }
        found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        found.truncate(k);
        Ok((found, dropped))
    }

    /// The live rows of `fragment` with a finite vector in `vectors`, and those vectors:
    /// kept by the handle while the fragment's rows and deletions stay as they are.
    async fn uncovered_run(
        &self,
        vectors: &VectorColumn,
        fragment: &Fragment,
    ) -> Result<Arc<VectorRun>> {
        // Its file holding the column, and its deletions: a write to the fragment is a new
        // deletion file, a new key.
        let file =
            (fragment.file_holding(vectors.field_id)).map(|i| fragment.files[i].path.as_str());
        // And its patches of the column: a patch is a new key too.
        let patched = (fragment.patches.iter())
            .filter(|p| p.holds(vectors.field_id))
            .map(|p| p.file.path.as_str());
        let deletions: Vec<&str> = (fragment.deletion.iter())
            .flat_map(|d| d.files().map(|f| f.path.as_str()))
            .chain(patched)
            .collect();
        let key = format!(
            "{}#{}#{}",
            file.unwrap_or("-"),
            vectors.field_id,
            deletions.join(",")
        );
        let load = async {
            let mut run = VectorRun::default();
            self.for_each_vector(vectors, vec![fragment.id], None, |id, v| {
                run.ids.push(id);
                run.values.extend_from_slice(v);
            })
            .await?;
            Ok::<_, Error>(Arc::new(run))
        };
        self.store().vector_runs.get_or_load(&key, load).await
    }

    /// `rows` (distance, live row id) with the exact distances of their vectors in `vectors`
    /// to `query`.
    async fn exact_distances(
        &self,
        vectors: &VectorColumn,
        rows: &[(f32, u64)],
        query: &[f32],
        metric: Metric,
    ) -> Result<Vec<(f32, u64)>> {
        let ids: Vec<RowId> = rows.iter().map(|(_, id)| RowId::from_u64(*id)).collect();
        let request = ScanRequest {
            columns: Some(vec![vectors.name.clone()]),
            with_row_id: true,
            ..Default::default()
        };
        let read = self.take(&ids, request).await?;
        let list = read.column(0).as_fixed_size_list();
        let values = list.values().as_primitive::<Float32Type>().values();
        let row_ids = read.column(1).as_primitive::<UInt64Type>();
        let n = vectors.dimension;
        Ok((0..read.num_rows())
            .filter(|&row| list.is_valid(row))
            .map(|row| {
                let start = (list.offset() + row) * n;
                let distance = metric.distance(&values[start..start + n], query);
                (distance, row_ids.value(row))
            })
            .filter(|(distance, _)| !distance.is_nan())
            .collect())
    }

    /// The ids of the rows of `fragments` that pass `filter`.
    async fn passing_ids(
        &self,
        fragments: Vec<FragmentId>,
        filter: Arc<dyn RowPredicate>,
    ) -> Result<roaring::RoaringTreemap> {
        let request = ScanRequest {
            columns: Some(Vec::new()),
            with_row_id: true,
            fragments: Some(fragments),
            filter: Some(filter),
            ..Default::default()
        };
        let mut batches = self.scan(request).await?;
        let mut ids = roaring::RoaringTreemap::new();
        while let Some(batch) = batches.try_next().await? {
            let column = (batch.column_by_name(ROW_ID))
                .ok_or_else(|| Error::internal("a scan with row ids returned none"))?;
            ids.extend(column.as_primitive::<UInt64Type>().values().iter().copied());
        }
        Ok(ids)
    }

    /// The name of the vector index a search of `column` by `metric` with a query of
    /// `dimension` components would use, if there is one.
    pub(crate) fn vector_index_for(
        &self,
        column: &str,
        metric: Metric,
        dimension: usize,
    ) -> Option<String> {
        let field = self.schema().field_by_name(column)?;
        let segments = self.vector_segments(field.id, metric, dimension);
        segments.first().map(|s| s.name.clone())
    }

    /// The segments of an index on field `field_id` that ranks by `metric` in `dimension`
    /// components: those of the first such index by name.
    fn vector_segments(
        &self,
        field_id: u32,
        metric: Metric,
        dimension: usize,
    ) -> Vec<IndexSegment> {
        let indexes = &self.manifest().indexes;
        let fits = |s: &&IndexSegment| {
            s.field_id == field_id
                && s.vector
                    .is_some_and(|v| v.metric == metric && v.dimension as usize == dimension)
        };
        let Some(name) = (indexes.segments.iter())
            .filter(fits)
            .map(|s| s.name.clone())
            .min()
        else {
            return Vec::new();
        };
        indexes.segments_named(&name).cloned().collect()
    }

    /// Offers `(distance, row id, at)` of every entry of the `nprobes` partitions of
    /// `segment` (at `at` in the search's list) whose centroids are nearest `query` (ranked
    /// by `metric`) that is `allowed` (all, without a list) to `kept`.
    async fn probe_segment(
        &self,
        (segment, at, query): (&IndexSegment, usize, &[f32]),
        (metric, nprobes): (Metric, usize),
        allowed: Option<&roaring::RoaringTreemap>,
        kept: &mut Kept<usize>,
    ) -> Result<()> {
        let head = self.store().read_vector_head(segment).await?;
        let mut order: Vec<(f32, usize)> = (0..head.partition_count())
            .map(|p| (metric.distance(head.centroid(p), query), p))
            .collect();
        let by_distance =
            |a: &(f32, usize), b: &(f32, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        let nprobes = nprobes.clamp(1, order.len().max(1));
        if nprobes < order.len() {
            order.select_nth_unstable_by(nprobes - 1, by_distance);
        }
        order.truncate(nprobes);
        let which: Vec<usize> = order.iter().map(|(_, p)| *p).collect();
        // An ivf_pq segment scores codes against the query in its coding space, once; a
        // zero query has no cosine distance to anything, and reads nothing.
        let coded = match &head.codebooks {
            Some(books) => match coding_space(query, metric) {
                Some(coded) => Some((books, coded)),
                None => return Ok(()),
            },
            None => None,
        };
        let partitions = self
            .store()
            .read_vector_partitions(segment, &head, &which)
            .await?;
        let dimension = head.dimension;
        // The allow-list is asked only of entries near enough to be kept.
        let mut consider = |distance: f32, id: u64| {
            if kept.admits(distance) && allowed.is_none_or(|a| a.contains(id)) {
                kept.push(distance, id, at);
            }
        };
        for (partition, &p) in partitions.iter().zip(&which) {
            match &coded {
                Some((books, coded)) => {
                    let table = DistanceTable::new(coded, head.centroid(p), books, metric);
                    let codes = partition.codes.chunks_exact(books.sub_vectors);
                    for (code, id) in codes.zip(&partition.ids) {
                        consider(table.estimate(code), *id);
                    }
                }
                None => {
                    let vectors = partition.vectors.chunks_exact(dimension);
                    for (v, id) in vectors.zip(&partition.ids) {
                        consider(metric.distance(v, query), *id);
                    }
                }
            }
        }
        Ok(())
    }

    /// The rows `best` names (distance, row id), in that order: their user `columns`
    /// (`None`: all), `_rowid` and `_distance`.
    async fn rows_with_distances(
        &self,
        best: &[(f32, u64)],
        columns: Option<Vec<String>>,
    ) -> Result<RecordBatch> {
        let ids: Vec<RowId> = best.iter().map(|(_, id)| RowId::from_u64(*id)).collect();
        let request = ScanRequest {
            columns,
            with_row_id: true,
            ..Default::default()
        };
        let rows = self.take(&ids, request).await?;
        let distances: HashMap<u64, f32> = best.iter().map(|(d, id)| (*id, *d)).collect();
        let row_ids = rows
            .column_by_name(ROW_ID)
            .ok_or_else(|| Error::internal("a take with row ids returned none"))?
            .as_primitive::<UInt64Type>();
        let distance: Float32Array = (row_ids.values().iter())
            .map(|id| distances.get(id).copied())
            .collect();
        let mut fields: Vec<Field> = rows
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(DISTANCE, DataType::Float32, false));
        let mut columns: Vec<ArrayRef> = rows.columns().to_vec();
        columns.push(Arc::new(distance));
        Ok(RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns,
        )?)
    }
}

/// A candidate: its distance, row id and a tag (the segment it came from).
type Entry<T> = (f32, u64, T);

/// The nearest entries offered, by (distance, row id): at most twice `limit` are held, cut
/// to the `limit` nearest whenever full, so a search of many entries neither holds nor
/// sorts them all. Remembers whether it left any out.
struct Kept<T> {
    limit: usize,
    entries: Vec<(f32, u64, T)>,
    /// Entries farther than this are not among the `limit` nearest.
    bound: f32,
    dropped: bool,
}

impl<T: Copy> Kept<T> {
    fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            entries: Vec::new(),
            bound: f32::INFINITY,
            dropped: false,
        }
    }

    /// Whether an entry at `distance` could be among the nearest (NaN never is).
    fn admits(&mut self, distance: f32) -> bool {
        if distance > self.bound {
            self.dropped = true;
        }
        distance <= self.bound
    }

    /// Holds an entry [`Self::admits`] let in.
    fn push(&mut self, distance: f32, id: u64, tag: T) {
        self.entries.push((distance, id, tag));
        if self.entries.len() >= self.limit.saturating_mul(2) {
            self.cut();
        }
    }

    fn offer(&mut self, distance: f32, id: u64, tag: T) {
        if self.admits(distance) {
            self.push(distance, id, tag);
        }
    }

    fn cut(&mut self) {
        if self.entries.len() > self.limit {
            let last = self.limit - 1;
            self.entries.select_nth_unstable_by(last, by_distance);
            self.entries.truncate(self.limit);
            self.bound = self.entries[last].0;
            self.dropped = true;
        }
    }

    /// The `limit` nearest, nearest first (ties by row id), and whether any were left out.
    fn into_sorted(mut self) -> (Vec<(f32, u64, T)>, bool) {
        self.cut();
        self.entries.sort_unstable_by(by_distance);
        (self.entries, self.dropped)
    }
}

fn by_distance<T>(a: &(f32, u64, T), b: &(f32, u64, T)) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
}
