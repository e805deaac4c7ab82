//! Nearest rows ([`Snapshot::nearest`]) through vector indexes. A search probes the
//! `nprobes` partitions whose centroids are nearest the query in each segment of the index
//! that ranks the column by the metric asked, keeps a candidate only while its entry is valid
//! (see `vector_index.rs`): a row updated since or deleted drops out, and fragments no
//! segment covers (appended, written by updates, or merged with such) are searched exactly.
//! With every partition probed an `ivf_flat` search is exact. An `ivf_pq` segment's
//! distances are estimates from its codes: with a refine factor `r`, the `r × k` best
//! candidates are re-ranked by their rows' exact vectors (read by take).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float32Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Float32Type, Schema, UInt64Type};
use futures::{stream, StreamExt, TryStreamExt};

use super::vector_index::{VectorColumn, CANDIDATES_CHECKED_AT_ONCE};
use super::vector_train::{coding_space, DistanceTable};
use super::{RowPredicate, ScanRequest, Snapshot, ROW_ID};
use crate::error::{Error, Result};
use crate::format::{IndexSegment, Metric, VectorIndexKind};
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
        // Exactly over what no segment covers, keeping the k best as it goes.
        let mut best: Vec<(f32, u64)> = Vec::new();
        let by_distance = |a: &(f32, u64), b: &(f32, u64)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        self.for_each_vector(&vectors, uncovered, filter.clone(), |id, v| {
            let distance = metric.distance(v, query);
            if !distance.is_nan() {
                best.push((distance, id));
                if best.len() >= k.max(512).saturating_mul(2) {
                    best.sort_by(by_distance);
                    best.truncate(k);
                }
            }
        })
        .await?;
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
        let mut nprobes = options.nprobes.max(1);
        let mut found = Vec::new();
        while !segments.is_empty() {
            found = self
                .index_candidates(&segments, query, (metric, nprobes), want, allowed.as_ref())
                .await?;
            if found.len() >= want || most.is_none_or(|most| nprobes >= most) {
                break;
            }
            nprobes = nprobes.saturating_mul(4);
        }
        if approximate && options.refine_factor.is_some() {
            found = self
                .exact_distances(&vectors, &found, query, metric)
                .await?;
        }
        best.extend(found);
        best.sort_by(by_distance);
        best.truncate(k);
        self.rows_with_distances(&best).await
    }

    /// Up to `k` of the entries of the `nprobes` partitions nearest `query` in each of
    /// `segments` (ranked by `metric`) that are valid and `allowed` (all, without a list),
    /// nearest first.
    async fn index_candidates(
        &self,
        segments: &[IndexSegment],
        query: &[f32],
        (metric, nprobes): (Metric, usize),
        k: usize,
        allowed: Option<&roaring::RoaringTreemap>,
    ) -> Result<Vec<(f32, u64)>> {
        let covered =
            (segments.iter()).fold(roaring::RoaringBitmap::new(), |a, s| a | &s.fragments);
        let probes: Vec<_> = (segments.iter().enumerate())
            .map(|(at, segment)| self.probe_segment(segment, at, query, metric, nprobes))
            .collect();
        let probed: Vec<Vec<(f32, u64, usize)>> = stream::iter(probes)
            .buffered(CONCURRENT_SEGMENTS)
            .try_collect()
            .await?;
        let mut candidates: Vec<(f32, u64, usize)> = (probed.into_iter().flatten())
            .filter(|c| allowed.is_none_or(|a| a.contains(c.1)))
            .collect();
        let by_distance =
            |a: &(f32, u64, usize), b: &(f32, u64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        let mut seen = HashSet::new();
        let mut found = Vec::new();
        // Only the nearest chunk is put in order (most searches need no other): sorting
        // every entry of 64 probed partitions cost more than probing them.
        let size = CANDIDATES_CHECKED_AT_ONCE.max(k.saturating_mul(2));
        let mut rest = candidates.as_mut_slice();
        while !rest.is_empty() && found.len() < k {
            let end = size.min(rest.len());
            if end < rest.len() {
                rest.select_nth_unstable_by(end - 1, by_distance);
            }
            let (chunk, after) = rest.split_at_mut(end);
            chunk.sort_by(by_distance);
            rest = after;
            let now = self.where_and_when(chunk.iter().map(|c| c.1)).await?;
            for &(distance, id, at) in chunk.iter() {
                let Some(&(fragment, updated)) = now.get(&id) else {
                    continue; // deleted
                };
                // Fragments no segment covers were searched exactly.
                let current = covered.contains(fragment)
                    && match updated {
                        // Unchanged since the segment read it.
                        Some(version) => version <= segments[at].dataset_version,
                        // No lineage (written before it was kept): trust the fragment only.
                        None => segments[at].fragments.contains(fragment),
                    };
                if current && seen.insert(id) {
                    found.push((distance, id));
                }
            }
        }
        found.truncate(k);
        Ok(found)
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

    /// `(distance, row id, at)` of every entry of the `nprobes` partitions of `segment` whose
    /// centroids are nearest `query`.
    async fn probe_segment(
        &self,
        segment: &IndexSegment,
        at: usize,
        query: &[f32],
        metric: Metric,
        nprobes: usize,
    ) -> Result<Vec<(f32, u64, usize)>> {
        let head = self.store().read_vector_head(segment).await?;
        let mut order: Vec<(f32, usize)> = (0..head.partition_count())
            .map(|p| (metric.distance(head.centroid(p), query), p))
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let which: Vec<usize> = order.iter().take(nprobes.max(1)).map(|(_, p)| *p).collect();
        // An ivf_pq segment scores codes against the query in its coding space, once; a
        // zero query has no cosine distance to anything, and reads nothing.
        let coded = match &head.codebooks {
            Some(books) => match coding_space(query, metric) {
                Some(coded) => Some((books, coded)),
                None => return Ok(Vec::new()),
            },
            None => None,
        };
        let partitions = self
            .store()
            .read_vector_partitions(segment, &head, &which)
            .await?;
        let dimension = head.dimension;
        let mut out = Vec::new();
        for (partition, &p) in partitions.iter().zip(&which) {
            let mut push = |distance: f32, id: u64| {
                if !distance.is_nan() {
                    out.push((distance, id, at));
                }
            };
            match &coded {
                Some((books, coded)) => {
                    let table = DistanceTable::new(coded, head.centroid(p), books, metric);
                    let codes = partition.codes.chunks_exact(books.sub_vectors);
                    for (code, id) in codes.zip(&partition.ids) {
                        push(table.estimate(code), *id);
                    }
                }
                None => {
                    let vectors = partition.vectors.chunks_exact(dimension);
                    for (v, id) in vectors.zip(&partition.ids) {
                        push(metric.distance(v, query), *id);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The rows `best` names (distance, row id), in that order, with `_rowid` and
    /// `_distance`.
    async fn rows_with_distances(&self, best: &[(f32, u64)]) -> Result<RecordBatch> {
        let ids: Vec<RowId> = best.iter().map(|(_, id)| RowId::from_u64(*id)).collect();
        let request = ScanRequest {
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
