//! Vector indexes (seed 002's `vector_idx`): building an IVF segment over the fragments an
//! index does not cover yet (k-means centroids over a sample, each vector in the partition
//! of its nearest), and keeping an index fit (`optimize_vector_index`: a stale segment
//! rebuilt with the uncovered fragments in its place). Searching them: `vector_search.rs`.
//!
//! An entry is valid while its row is live, in a fragment some segment of the index covers,
//! and unchanged since the segment was built (its `_row_updated_version`, which compaction
//! keeps, at most the segment's version). A row changed since, yet in a covered fragment,
//! was patched in another column (a patch of the indexed one uncovers its fragment) or has
//! a newer segment's entry too: a search ranks it by its vector as it is now, read by take.
//! Compaction of covered fragments keeps them covered (`IndexSection::on_compaction`), so it
//! writes no index byte.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float32Type, UInt64Type};
use futures::TryStreamExt;

use super::commit::Action;
use super::vector::vector_dimension;
use super::vector_train::{
    assign, coding_space, default_sub_vectors, encode, kmeans, sample_of, train_codebooks,
};
use super::{
    Committed, IndexBuild, ProgressHandle, RowPredicate, ScanRequest, Snapshot, Table, ROW_ADDR,
    ROW_ID, ROW_UPDATED_VERSION,
};
use crate::error::{Error, Result};
use crate::format::{IndexSegment, Metric, VectorIndex, VectorIndexKind};
use crate::io::{Codebooks, VectorPartition};
use crate::rowid::{FragmentId, RowId};

/// Index candidates whose rows are looked up together (one take), nearest first.
pub(super) const CANDIDATES_CHECKED_AT_ONCE: usize = 256;

/// How `create_vector_index` builds a segment.
#[derive(Debug, Clone)]
pub struct VectorIndexOptions {
    /// How entries are stored.
    pub kind: VectorIndexKind,
    /// The distance the index ranks by.
    pub metric: Metric,
    /// Partitions (k-means centroids) per segment; fewer when the segment has fewer vectors.
    pub partitions: u32,
    /// Vectors the centroids are trained on at most.
    pub sample: usize,
    /// Rounds of k-means.
    pub iterations: usize,
    /// Sub-vectors of an `ivf_pq` code (one byte each; must divide the dimension); `None`:
    /// one per 8 components.
    pub sub_vectors: Option<u32>,
    /// Told the rows indexed so far.
    pub progress: ProgressHandle,
}

impl Default for VectorIndexOptions {
    fn default() -> Self {
        Self {
            kind: VectorIndexKind::IvfFlat,
            metric: Metric::L2,
            partitions: 256,
            sample: 65_536,
            iterations: 10,
            sub_vectors: None,
            progress: ProgressHandle::default(),
        }
    }
}

impl VectorIndexOptions {
    /// `natal_optimize_index`'s options: `stale_share=` (default 0.1), and the options that
    /// shape the new segment (as [`Self::parse`] reads them; kind and metric are the
    /// index's own).
    pub fn parse_optimize(text: &str) -> Result<(f64, Self)> {
        let mut stale_share = 0.1;
        let mut rest = Vec::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some((key, value)) if key.trim().eq_ignore_ascii_case("stale_share") => {
                    stale_share = value.trim().parse().map_err(|_| {
                        Error::invalid(format!(
                            "stale_share takes a fraction, not '{}'",
                            value.trim()
                        ))
                    })?;
                }
                _ => rest.push(pair),
            }
        }
        Ok((stale_share, Self::parse("ivf_pq", &rest.join(","))?))
    }

    /// The options `text` sets over the defaults: `key=value` pairs separated by commas
    /// (`partitions=256, metric=l2, sample=65536, iterations=10`, and for `ivf_pq`
    /// `sub_vectors=16`). An unknown key or a value that does not read is an error.
    pub fn parse(kind: &str, text: &str) -> Result<Self> {
        let mut options = Self {
            kind: VectorIndexKind::parse(kind).ok_or_else(|| {
                Error::invalid(format!(
                    "unknown vector index kind '{kind}' (ivf_flat or ivf_pq)"
                ))
            })?,
            ..Self::default()
        };
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim()))
                .ok_or_else(|| {
                    Error::invalid(format!("vector index option '{pair}' is not key=value"))
                })?;
            let number = |what: &str| {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "vector index option {what} takes a positive number, not '{value}'"
                        ))
                    })
            };
            match key.as_str() {
                "partitions" => {
                    options.partitions = u32::try_from(number("partitions")?)
                        .map_err(|_| Error::invalid("too many partitions"))?
                }
                "sample" => options.sample = number("sample")?,
                "iterations" => options.iterations = number("iterations")?,
                "sub_vectors" if options.kind == VectorIndexKind::IvfPq => {
                    options.sub_vectors = Some(
                        u32::try_from(number("sub_vectors")?)
                            .map_err(|_| Error::invalid("too many sub-vectors"))?,
                    )
                }
                "metric" => {
                    options.metric = Metric::parse(value).ok_or_else(|| {
                        Error::invalid(format!("unknown metric '{value}' (l2, cosine or dot)"))
                    })?
                }
                other => {
                    return Err(Error::invalid(format!(
                        "unknown vector index option '{other}' (partitions, metric, sample, \
                         iterations; sub_vectors for ivf_pq)"
                    )))
                }
            }
        }
        Ok(options)
    }
}

/// A vector column of a snapshot: its name, field id and dimension.
pub(super) struct VectorColumn {
    pub(super) name: String,
    pub(super) field_id: u32,
    pub(super) dimension: usize,
}

impl Snapshot {
    pub(super) fn vector_column(&self, column: &str) -> Result<VectorColumn> {
        let field = self
            .schema()
            .field_by_name(column)
            .ok_or_else(|| Error::invalid(format!("no column {column} in the table")))?;
        let dimension = vector_dimension(&field.data_type).ok_or_else(|| {
            Error::invalid(format!(
                "column {column} of type {} is not a vector column (VECTOR(n): a \
                 FixedSizeList of Float32)",
                field.data_type
            ))
        })?;
        Ok(VectorColumn {
            name: column.to_string(),
            field_id: field.id,
            dimension,
        })
    }

    /// Calls `each(row id, vector)` for every row of `fragments` (that passes `filter`) whose
    /// vector in `column` is not NULL and has only finite components (others are never
    /// indexed nor returned).
    pub(super) async fn for_each_vector(
        &self,
        column: &VectorColumn,
        fragments: Vec<FragmentId>,
        filter: Option<Arc<dyn RowPredicate>>,
        mut each: impl FnMut(u64, &[f32]),
    ) -> Result<()> {
        let request = ScanRequest {
            columns: Some(vec![column.name.clone()]),
            with_row_id: true,
            fragments: Some(fragments),
            filter,
            ..Default::default()
        };
        let mut batches = self.scan(request).await?;
        let n = column.dimension;
        while let Some(batch) = batches.try_next().await? {
            let list = batch.column(0).as_fixed_size_list();
            let values = list.values().as_primitive::<Float32Type>();
            let row_ids = batch.column(1).as_primitive::<UInt64Type>();
            for row in 0..batch.num_rows() {
                if list.is_null(row) {
                    continue;
                }
                let start = (list.offset() + row) * n;
                let vector = &values.values()[start..start + n];
                let valid =
                    values.null_count() == 0 || (start..start + n).all(|i| values.is_valid(i));
                if valid && vector.iter().all(|x| x.is_finite()) {
                    each(row_ids.value(row), vector);
                }
            }
        }
        Ok(())
    }

    /// Where each live row of `ids` is now (its fragment) and the version that last changed
    /// its values, if lineage records it.
    pub(super) async fn where_and_when(
        &self,
        ids: impl Iterator<Item = u64>,
    ) -> Result<HashMap<u64, (FragmentId, Option<u64>)>> {
        let ids: Vec<RowId> = ids.map(RowId::from_u64).collect();
        let request = ScanRequest {
            columns: Some(Vec::new()),
            with_row_id: true,
            with_row_addr: true,
            with_lineage: true,
            ..Default::default()
        };
        let rows = self.take(&ids, request).await?;
        let column = |name: &str| {
            rows.column_by_name(name)
                .map(|c| c.as_primitive::<UInt64Type>().clone())
                .ok_or_else(|| Error::internal(format!("a take with lineage returned no {name}")))
        };
        let (row_ids, addresses, updated) = (
            column(ROW_ID)?,
            column(ROW_ADDR)?,
            column(ROW_UPDATED_VERSION)?,
        );
        Ok((0..rows.num_rows())
            .map(|i| {
                let fragment = crate::rowid::RowAddress::from_u64(addresses.value(i)).fragment_id();
                let version = updated.is_valid(i).then(|| updated.value(i));
                (row_ids.value(i), (fragment, version))
            })
            .collect())
    }

    /// How many entries of vector segment `segment` are still valid (see the module header;
    /// `covered`: what the index's segments cover).
    async fn valid_entries(
        &self,
        segment: &IndexSegment,
        covered: &roaring::RoaringBitmap,
    ) -> Result<u64> {
        let head = self.store().read_vector_head(segment).await?;
        let all: Vec<usize> = (0..head.partition_count()).collect();
        let partitions = self
            .store()
            .read_vector_partitions(segment, &head, &all)
            .await?;
        let ids: Vec<u64> = partitions.into_iter().flat_map(|p| p.ids.clone()).collect();
        let mut valid = 0;
        for chunk in ids.chunks(CANDIDATES_CHECKED_AT_ONCE * 16) {
            let now = self.where_and_when(chunk.iter().copied()).await?;
            valid += now
                .values()
                .filter(|(fragment, updated)| {
                    covered.contains(*fragment)
                        && match updated {
                            Some(version) => *version <= segment.dataset_version,
                            None => segment.fragments.contains(*fragment),
                        }
                })
                .count() as u64;
        }
        Ok(valid)
    }
}

impl Table {
    /// Indexes vector column `column` under `name`: one IVF segment over the vectors of
    /// every fragment no segment of `name` covers yet (k-means centroids trained on a
    /// sample, each vector in the partition of its nearest centroid), committed as one
    /// version. NULL vectors and vectors with a component that is not finite are not
    /// indexed. With nothing left to cover it commits nothing.
    pub async fn create_vector_index(
        &self,
        name: &str,
        column: &str,
        options: VectorIndexOptions,
    ) -> Result<Committed<IndexBuild>> {
        if name.is_empty() {
            return Err(Error::invalid("an index needs a name"));
        }
        let read = self.read_snapshot().await?;
        let vectors = read.vector_column(column)?;
        let indexes = &read.manifest().indexes;
        if indexes
            .field_of(name)
            .is_some_and(|id| id != vectors.field_id)
        {
            return Err(Error::invalid(format!(
                "index {name} already indexes another column"
            )));
        }
        let params = VectorIndex {
            kind: options.kind,
            metric: options.metric,
            dimension: vectors.dimension as u32,
            partitions: 0,
            sub_vectors: sub_vectors_for(
                options.kind,
                column,
                vectors.dimension,
                options.sub_vectors,
            )?,
        };
        let same = |s: &IndexSegment| {
            s.vector
                .is_some_and(|v| v.kind == params.kind && v.metric == params.metric)
        };
        if indexes.segments_named(name).any(|s| !same(s)) {
            return Err(Error::invalid(format!(
                "index {name} exists as another kind of index (or with another metric)"
            )));
        }
        let covered = indexes.covered(name);
        let fragments: Vec<FragmentId> = (read.manifest().fragments.iter())
            .map(|f| f.id)
            .filter(|f| !covered.contains(*f))
            .collect();
        if fragments.is_empty() {
            return Ok(Committed::unchanged(&read, IndexBuild::default()));
        }
        let segment = self
            .build_vector_segment(&read, name, &vectors, fragments, params, &options)
            .await?;
        self.commit_vector_segment(&read, segment, Vec::new()).await
    }

    /// Keeps vector index `name` fit: one new segment over the fragments no segment covers,
    /// together with those of every segment whose stale share (entries of rows deleted or
    /// changed since it was built) is above `stale_share`, in place of those segments (seed
    /// 002's "s2 plus newly unindexed fragments into s4"); the other segments keep their
    /// numbers and places. Kind and metric are the index's; the options' partitions,
    /// sample and iterations shape the new segment. With nothing to do it commits nothing.
    pub async fn optimize_vector_index(
        &self,
        name: &str,
        stale_share: f64,
        options: VectorIndexOptions,
    ) -> Result<Committed<(IndexBuild, u64)>> {
        if !(0.0..=1.0).contains(&stale_share) {
            return Err(Error::invalid(format!(
                "a stale share is a fraction from 0 to 1, not {stale_share}"
            )));
        }
        let read = self.read_snapshot().await?;
        let segments: Vec<IndexSegment> = read
            .manifest()
            .indexes
            .segments_named(name)
            .cloned()
            .collect();
        let Some(params) = segments.first().and_then(|s| s.vector) else {
            return Err(Error::invalid(format!("no vector index named {name}")));
        };
        let Some(column) = read.schema().field_by_id(segments[0].field_id) else {
            return Err(Error::invalid(format!(
                "the column of index {name} is gone"
            )));
        };
        let vectors = read.vector_column(&column.name)?;
        let params = VectorIndex {
            sub_vectors: match options.sub_vectors {
                None => params.sub_vectors,
                asked => sub_vectors_for(params.kind, &column.name, vectors.dimension, asked)?,
            },
            ..params
        };
        let covered = read.manifest().indexes.covered(name);
        let mut replaced = Vec::new();
        let mut fragments: std::collections::BTreeSet<FragmentId> =
            (read.manifest().fragments.iter())
                .map(|f| f.id)
                .filter(|f| !covered.contains(*f))
                .collect();
        for segment in &segments {
            let valid = read.valid_entries(segment, &covered).await?;
            let stale = segment.row_count.saturating_sub(valid);
            if segment.row_count > 0 && stale as f64 / segment.row_count as f64 > stale_share {
                replaced.push(segment.uuid.clone());
                fragments.extend(segment.fragments.iter());
            }
        }
        if fragments.is_empty() {
            return Ok(Committed::unchanged(&read, (IndexBuild::default(), 0)));
        }
        let options = VectorIndexOptions {
            kind: params.kind,
            metric: params.metric,
            ..options
        };
        let fragments: Vec<FragmentId> = fragments.into_iter().collect();
        let segment = self
            .build_vector_segment(&read, name, &vectors, fragments, params, &options)
            .await?;
        let replaced_count = replaced.len() as u64;
        let committed = self.commit_vector_segment(&read, segment, replaced).await?;
        Ok(Committed {
            figures: (committed.figures, replaced_count),
            version: committed.version,
            published: committed.published,
        })
    }

    /// One segment of index `name` over the vectors of `fragments`.
    async fn build_vector_segment(
        &self,
        read: &Snapshot,
        name: &str,
        vectors: &VectorColumn,
        fragments: Vec<FragmentId>,
        params: VectorIndex,
        options: &VectorIndexOptions,
    ) -> Result<IndexSegment> {
        options.progress.update("indexing vectors", 0, None);
        let quantized = params.kind == VectorIndexKind::IvfPq;
        let (mut ids, mut values) = (Vec::new(), Vec::new());
        read.for_each_vector(vectors, fragments.clone(), None, |id, v| {
            // An ivf_pq index codes cosine's unit vectors (zero vectors have no direction).
            let coded = match quantized {
                true => coding_space(v, params.metric),
                false => Some(v.to_vec()),
            };
            if let Some(coded) = coded {
                ids.push(id);
                values.extend(coded);
            }
        })
        .await?;
        let dimension = vectors.dimension;
        let sample = sample_of(&values, dimension, options.sample);
        let (k, iterations) = (options.partitions as usize, options.iterations);
        let centroids = kmeans(&sample, dimension, k, iterations, params.metric);
        let assigned = assign(&values, &centroids, dimension, params.metric);
        let mut partitions = vec![VectorPartition::default(); centroids.len() / dimension];
        let coded = quantized.then(|| {
            let m = params.sub_vectors as usize;
            quantize(&mut values, &assigned, &centroids, (dimension, m), options)
        });
        for (i, &p) in assigned.iter().enumerate() {
            let partition = &mut partitions[p as usize];
            partition.ids.push(ids[i]);
            match &coded {
                Some((books, codes)) => partition
                    .codes
                    .extend_from_slice(&codes[i * books.sub_vectors..][..books.sub_vectors]),
                None => (partition.vectors)
                    .extend_from_slice(&values[i * dimension..(i + 1) * dimension]),
            }
        }
        let codebooks = coded.map(|(books, _)| books);
        options.progress.finish("indexing vectors");
        let written = self
            .store
            .write_vector_segment(dimension, &centroids, codebooks.as_ref(), &partitions)
            .await?;
        Ok(IndexSegment {
            uuid: uuid::Uuid::new_v4().to_string(),
            name: name.to_string(),
            field_id: vectors.field_id,
            path: written.path,
            fragments: fragments.iter().copied().collect(),
            segment_seq: None,
            dataset_version: read.version(),
            row_count: ids.len() as u64,
            file_size_bytes: written.file_size_bytes,
            vector: Some(VectorIndex {
                partitions: partitions.len() as u32,
                ..params
            }),
        })
    }

    /// Commits `segment` in place of the segments `replaces` names.
    async fn commit_vector_segment(
        &self,
        read: &Snapshot,
        segment: IndexSegment,
        replaces: Vec<String>,
    ) -> Result<Committed<IndexBuild>> {
        let uuid = segment.uuid.clone();
        let action = Action::CreateIndex {
            segments: vec![segment],
            replaces,
        };
        let published = self.commit_manifest(read, action, None).await?;
        let mut report = IndexBuild::default();
        if let Some(added) = published.indexes.segments.iter().find(|s| s.uuid == uuid) {
            report.segments_added = 1;
            report.segment_seq = added.segment_seq;
            report.fragments_indexed = added.fragments.len();
            report.rows_indexed = added.row_count;
            report.bytes_written = added.file_size_bytes;
        }
        Ok(Committed::published(published.version, report))
    }
}

/// Product quantization of `values` (`dimension` components each, `assigned` to
/// `centroids`) into `sub_vectors` runs: the values become their residuals from their
/// centroids, codebooks are trained on a sample of those, and each is coded.
fn quantize(
    values: &mut [f32],
    assigned: &[u32],
    centroids: &[f32],
    (dimension, sub_vectors): (usize, usize),
    options: &VectorIndexOptions,
) -> (Codebooks, Vec<u8>) {
    for (v, &p) in values.chunks_exact_mut(dimension).zip(assigned) {
        let centroid = &centroids[p as usize * dimension..][..dimension];
        v.iter_mut().zip(centroid).for_each(|(x, c)| *x -= c);
    }
    let sample = sample_of(values, dimension, options.sample);
    let books = train_codebooks(&sample, dimension, sub_vectors, options.iterations);
    let codes = encode(values, dimension, &books);
    (books, codes)
}

/// The sub-vectors an index of `kind` over `column` (of `dimension` components) codes with
/// when `asked` (0 for `ivf_flat`): the dimension must split into them evenly.
fn sub_vectors_for(
    kind: VectorIndexKind,
    column: &str,
    dimension: usize,
    asked: Option<u32>,
) -> Result<u32> {
    match (kind, asked) {
        (VectorIndexKind::IvfFlat, None) => Ok(0),
        (VectorIndexKind::IvfFlat, Some(_)) => Err(Error::invalid(
            "sub_vectors applies to an ivf_pq index, not ivf_flat",
        )),
        (VectorIndexKind::IvfPq, None) => Ok(default_sub_vectors(dimension) as u32),
        (VectorIndexKind::IvfPq, Some(n))
            if n as usize <= dimension && dimension.is_multiple_of(n as usize) =>
        {
            Ok(n)
        }
        (VectorIndexKind::IvfPq, Some(n)) => Err(Error::invalid(format!(
            "sub_vectors={n} does not divide column {column}'s {dimension} components evenly"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_from_text_and_refuse_what_they_do_not_know() {
        let options =
            VectorIndexOptions::parse("IVF_FLAT", "partitions=16, metric=cosine, sample=100")
                .unwrap();
        assert_eq!(
            (options.partitions, options.metric, options.sample),
            (16, Metric::Cosine, 100)
        );
        let pq = VectorIndexOptions::parse("ivf_pq", "sub_vectors=4").unwrap();
        assert_eq!((pq.kind, pq.sub_vectors), (VectorIndexKind::IvfPq, Some(4)));
        for (kind, text) in [
            ("hnsw", ""),
            ("ivf_flat", "sub_vectors=4"),
            ("ivf_pq", "sub_vectors=0"),
            ("ivf_flat", "partitions=0"),
            ("ivf_flat", "partitions=x"),
            ("ivf_flat", "metric=hamming"),
            ("ivf_flat", "colour=blue"),
            ("ivf_flat", "partitions"),
        ] {
            assert!(
                VectorIndexOptions::parse(kind, text).is_err(),
                "{kind} {text}"
            );
        }
    }
}
