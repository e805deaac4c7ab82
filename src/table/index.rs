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
use super::{ScanRequest, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::IndexSegment;
use crate::io::{indexable, IndexLookup};
use crate::rowid::FragmentId;

/// Segments probed at once.
const CONCURRENT_SEGMENT_LOOKUPS: usize = 8;

/// What `create_index` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexReport {
    /// The new version; `None` when every fragment was already covered.
    pub version: Option<u64>,
    pub segment_seq: Option<u64>,
    pub fragments_indexed: u64,
    pub rows_indexed: u64,
    pub bytes_written: u64,
}

impl Table {
    /// Indexes `column` under `name`: one new segment holding the (value, row id) pairs of
    /// every fragment no segment of `name` covers yet. With nothing left to cover it
    /// commits nothing. Run it again after appends or updates to cover their fragments.
    pub async fn create_index(&self, name: &str, column: &str) -> Result<IndexReport> {
        if name.is_empty() {
            return Err(Error::invalid("an index needs a name"));
        }
        let read = self.read_snapshot().await?;
        let field = read
            .schema()
            .field_by_name(column)
            .ok_or_else(|| Error::invalid(format!("no column {column} in the table to index")))?;
        if !indexable(&field.data_type) {
            return Err(Error::invalid(format!(
                "column {column} of type {} cannot be indexed (integers, strings, binary, \
                 booleans, dates, timestamps and decimals can)",
                field.data_type
            )));
        }
        let indexes = &read.manifest().indexes;
        if indexes.field_of(name).is_some_and(|id| id != field.id) {
            return Err(Error::invalid(format!(
                "index {name} already indexes another column"
            )));
        }
        let covered = indexes.covered(name);
        let fragments: Vec<FragmentId> = read
            .manifest()
            .fragments
            .iter()
            .map(|f| f.id)
            .filter(|id| !covered.contains(*id))
            .collect();
        if fragments.is_empty() {
            return Ok(IndexReport::default());
        }
        let request = ScanRequest {
            columns: Some(vec![column.to_string()]),
            with_row_id: true,
            fragments: Some(fragments.clone()),
            ..Default::default()
        };
        let schema = read.scan_schema(&request)?;
        let batches: Vec<_> = read.scan(request).await?.try_collect().await?;
        let rows = concat_batches(&schema, &batches)?;
        let written = self
            .store
            .write_index_segment(rows.column(0).clone(), rows.column(1).clone())
            .await?;
        let segment = IndexSegment {
            uuid: uuid::Uuid::new_v4().to_string(),
            name: name.to_string(),
            field_id: field.id,
            path: written.path,
            fragments: fragments.iter().copied().collect(),
            segment_seq: None,
            dataset_version: read.version(),
            row_count: written.rows,
            file_size_bytes: written.file_size_bytes,
        };
        let uuid = segment.uuid.clone();
        let committed = self.commit(&read, Action::CreateIndex { segment }).await?;
        let now = self.at_version(committed.version).await?;
        let added = now
            .manifest()
            .indexes
            .segments
            .iter()
            .find(|s| s.uuid == uuid)
            .ok_or_else(|| Error::invalid("the committed index segment is missing"))?;
        Ok(IndexReport {
            version: Some(committed.version),
            segment_seq: added.segment_seq,
            fragments_indexed: added.fragments.len(),
            rows_indexed: written.rows,
            bytes_written: written.file_size_bytes,
        })
    }

    /// Removes every segment of index `name`; its sequence numbers are never handed out
    /// again. Returns the new version.
    pub async fn drop_index(&self, name: &str) -> Result<u64> {
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
        let committed = self
            .commit(
                &read,
                Action::DropIndex {
                    name: name.to_string(),
                },
            )
            .await?;
        Ok(committed.version)
    }
}

/// A question for an index — which rows may hold the values `lookup` asks for — asked
/// once per scan however many partitions read it.
#[derive(Debug)]
pub struct IndexProbe {
    pub name: String,
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
                    offsets: snapshot.masks(&ids).await?,
                }))
            })
            .await
            .cloned()
    }
}
