//! Index operations: building a segment for the fragments an index does not cover yet,
//! dropping an index, and probing one for the rows holding some values.
//!
//! A probe answers per fragment: in a fragment some segment covers, only the live rows whose
//! ids the segments return can hold the values; every other fragment (appended or rewritten
//! by an update since) must be read in full. Callers still evaluate their filter on what
//! they read, so a probe only needs to be a superset of the matching rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::compute::concat_batches;
use futures::{stream, StreamExt, TryStreamExt};
use roaring::{RoaringBitmap, RoaringTreemap};
use tokio::sync::OnceCell;

use super::commit::Action;
use super::{Committed, ProgressHandle, ScanRequest, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::{FieldId, IndexSegment};
use crate::io::{indexable, IndexLookup};
use crate::rowid::FragmentId;

/// Segments probed at once.
const CONCURRENT_SEGMENT_LOOKUPS: usize = 8;

/// What `create_index` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexBuild {
    /// The sequence number of the newest segment added.
    pub segment_seq: Option<u64>,
    /// Index segments the version added.
    pub segments_added: u64,
    /// Fragments the new segments cover.
    pub fragments_indexed: u64,
    /// Rows the new segments hold.
    pub rows_indexed: u64,
    /// Bytes of segment files written.
    pub bytes_written: u64,
}

/// How `create_index` builds segments.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// Rows one segment holds at most: a segment is sorted in memory (~16 bytes a row plus
    /// the values' own bytes), so a large table is indexed as several segments.
    pub max_rows_per_segment: u64,
    /// Told the rows indexed so far.
    pub progress: ProgressHandle,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            max_rows_per_segment: 8 * 1024 * 1024,
            progress: ProgressHandle::default(),
        }
    }
}

impl Table {
    /// Indexes `column` under `name` with the default [`IndexOptions`].
    pub async fn create_index(&self, name: &str, column: &str) -> Result<Committed<IndexBuild>> {
        self.create_index_with(name, column, IndexOptions::default())
            .await
    }

    /// Indexes `column` under `name`: new segments holding the (value, row id) pairs of
    /// every fragment no segment of `name` covers yet, committed together. With nothing left
    /// to cover it commits nothing. Run it again after appends or updates to cover their
    /// fragments.
    pub async fn create_index_with(
        &self,
        name: &str,
        column: &str,
        options: IndexOptions,
    ) -> Result<Committed<IndexBuild>> {
        if name.is_empty() {
            return Err(Error::invalid("an index needs a name"));
        }
        let read = self.read_snapshot().await?;
        let field = read
            .schema()
            .field_by_name(column)
            .ok_or_else(|| Error::invalid(format!("no column {column} in the table to index")))?;
        if super::vector::vector_dimension(&field.data_type).is_some() {
            return Err(Error::invalid(format!(
                "column {column} is a vector column: index it as one \
                 (natal_create_index('t', '{column}', 'name', 'ivf_flat'))"
            )));
        }
        if !indexable(&field.data_type) {
            return Err(Error::invalid(format!(
                "column {column} of type {} cannot be indexed (integers, strings, binary, \
                 booleans, dates, timestamps and decimals can)",
                field.data_type
            )));
        }
        let indexes = &read.manifest().indexes;
        if indexes.segments_named(name).any(|s| s.vector.is_some()) {
            return Err(Error::invalid(format!("index {name} is a vector index")));
        }
        if indexes.field_of(name).is_some_and(|id| id != field.id) {
            return Err(Error::invalid(format!(
                "index {name} already indexes another column"
            )));
        }
        let covered = indexes.covered(name);
        // Runs of uncovered fragments of at most `max_rows_per_segment` live rows (a larger
        // fragment gets a segment to itself).
        let mut chunks: Vec<Vec<FragmentId>> = Vec::new();
        let mut chunk_rows = 0;
        for fragment in &read.manifest().fragments {
            if covered.contains(fragment.id) {
                continue;
            }
            let rows = fragment.live_rows();
            match chunks.last_mut() {
                Some(chunk) if chunk_rows + rows <= options.max_rows_per_segment.max(1) => {
                    chunk.push(fragment.id);
                    chunk_rows += rows;
                }
                _ => {
                    chunks.push(vec![fragment.id]);
                    chunk_rows = rows;
                }
            }
        }
        if chunks.is_empty() {
            return Ok(Committed::unchanged(&read, IndexBuild::default()));
        }
        let total: u64 = chunks
            .iter()
            .flatten()
            .filter_map(|id| read.manifest().fragment(*id))
            .map(|f| f.live_rows())
            .sum();
        let progress = &options.progress;
        progress.update("indexing", 0, Some(total));
        let built = self
            .build_segments(&read, name, field.id, column, chunks, total, progress)
            .await;
        progress.finish("indexing");
        let segments = built?;
        let uuids: Vec<String> = segments.iter().map(|s| s.uuid.clone()).collect();
        // The published manifest holds the numbers the commit assigned (after any rebase).
        let published = self
            .commit_manifest(
                &read,
                Action::CreateIndex {
                    segments,
                    replaces: Vec::new(),
                },
                None,
            )
            .await?;
        let mut report = IndexBuild::default();
        for added in published.indexes.segments.iter() {
            if uuids.contains(&added.uuid) {
                report.segments_added += 1;
                report.segment_seq = report.segment_seq.max(added.segment_seq);
                report.fragments_indexed += added.fragments.len();
                report.rows_indexed += added.row_count;
                report.bytes_written += added.file_size_bytes;
            }
        }
        Ok(Committed::published(published.version, report))
    }

    /// Writes one segment file per chunk of fragments: the chunk's (value, row id) pairs,
    /// read, sorted and written before the next chunk is read.
    #[allow(clippy::too_many_arguments)]
    async fn build_segments(
        &self,
        read: &Snapshot,
        name: &str,
        field_id: FieldId,
        column: &str,
        chunks: Vec<Vec<FragmentId>>,
        total: u64,
        progress: &ProgressHandle,
    ) -> Result<Vec<IndexSegment>> {
        let mut segments = Vec::with_capacity(chunks.len());
        let mut done = 0;
        for fragments in chunks {
            let request = ScanRequest {
                columns: Some(vec![column.to_string()]),
                with_row_id: true,
                fragments: Some(fragments.clone()),
                ..Default::default()
            };
            let schema = read.scan_schema(&request)?;
            let batches: Vec<_> = read.scan(request).await?.try_collect().await?;
            let rows = concat_batches(&schema, &batches)?;
            drop(batches);
            let written = self
                .store
                .write_index_segment(rows.column(0).clone(), rows.column(1).clone())
                .await?;
            done += rows.num_rows() as u64;
            progress.update("indexing", done, Some(total));
            segments.push(IndexSegment {
                uuid: uuid::Uuid::new_v4().to_string(),
                name: name.to_string(),
                field_id,
                path: written.path,
                fragments: fragments.iter().copied().collect(),
                segment_seq: None,
                dataset_version: read.version(),
                row_count: written.rows,
                file_size_bytes: written.file_size_bytes,
                vector: None,
            });
        }
        Ok(segments)
    }

    /// Removes every segment of index `name`; its sequence numbers are never handed out
    /// again. Returns what it committed, as every operation that publishes a version does.
    pub async fn drop_index(&self, name: &str) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        if read
            .manifest()
            .indexes
            .segments_named(name)
            .next()
            .is_none()
        {
            return Err(Error::invalid(format!("no index named {name}")));
        }
        self.commit(
            &read,
            Action::DropIndex {
                name: name.to_string(),
            },
        )
        .await
    }
}

/// A question for an index — which rows may hold the values `lookup` asks for — asked
/// once per scan however many partitions read it.
#[derive(Debug)]
pub struct IndexProbe {
    /// The index asked.
    pub name: String,
    /// The values asked for.
    pub lookup: IndexLookup,
    answer: OnceCell<Arc<IndexAnswer>>,
}

/// A probe's answer: the fragments the index covers, and in them the live rows that may
/// hold the values, by offset.
#[derive(Debug, Default)]
pub(crate) struct IndexAnswer {
    pub covered: RoaringBitmap,
    pub offsets: BTreeMap<FragmentId, RoaringBitmap>,
}

impl IndexProbe {
    /// A probe of the index `name` for `lookup`.
    pub fn new(name: impl Into<String>, lookup: IndexLookup) -> Self {
        Self {
            name: name.into(),
            lookup,
            answer: OnceCell::new(),
        }
    }

    pub(crate) async fn answer(&self, snapshot: &Snapshot) -> Result<Arc<IndexAnswer>> {
        self.answer
            .get_or_try_init(|| async {
                let indexes = &snapshot.manifest().indexes;
                let segments: Vec<IndexSegment> =
                    indexes.segments_named(&self.name).cloned().collect();
                let found: Vec<RoaringTreemap> = stream::iter(segments)
                    .map(|segment| {
                        let (store, lookup) = (snapshot.store().clone(), self.lookup.clone());
                        async move { store.lookup_index_segment(&segment, &lookup).await }
                    })
                    .buffer_unordered(CONCURRENT_SEGMENT_LOOKUPS)
                    .try_collect()
                    .await?;
                let ids = found.into_iter().fold(RoaringTreemap::new(), |a, b| a | b);
                Ok(Arc::new(IndexAnswer {
                    covered: indexes.covered(&self.name),
                    offsets: snapshot.masks_of(&ids).await?,
                }))
            })
            .await
            .cloned()
    }
}
