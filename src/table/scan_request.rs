//! [`ScanRequest`]: what a scan of a snapshot reads (columns, system columns, id masks, a
//! filter, an index), with its builder; [`ScanMetrics`]: what the scan counted as it ran.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::filter::RowPredicate;
use super::index::IndexProbe;
use crate::io::BlobReferences;
use crate::rowid::{FragmentId, RowId, RowIdSet};

/// The name of the system column holding a row's id.
pub const ROW_ID: &str = "_rowid";
/// The name of the system column holding a row's current address.
pub const ROW_ADDR: &str = "_rowaddr";
/// The name of the lineage column holding the version that first wrote a row (NULL when
/// the table did not record it yet).
pub const ROW_CREATED_VERSION: &str = "_row_created_version";
/// The name of the lineage column holding the version that last changed a row's values
/// (compaction and merges move rows without changing them).
pub const ROW_UPDATED_VERSION: &str = "_row_updated_version";

/// What a scan reads.
#[derive(Debug, Clone, Default)]
pub struct ScanRequest {
    /// User columns to read, by name; `None` reads every column.
    pub columns: Option<Vec<String>>,
    /// Adds the `_rowid` column.
    pub with_row_id: bool,
    /// Adds the `_rowaddr` column.
    pub with_row_addr: bool,
    /// Adds the lineage columns `_row_created_version` and `_row_updated_version` (after
    /// `_rowid` and `_rowaddr`), from fragment metadata.
    pub with_lineage: bool,
    /// Only rows whose ids are in this set (a mask: native ranges − tombstones + moves).
    pub row_ids: Option<RowIdSet>,
    /// Only rows whose ids are in this range, answered per fragment from its ids (a native
    /// fragment's are one range of addresses) without the relocation view.
    pub row_id_range: Option<RangeInclusive<u64>>,
    /// Counters the scan adds to as it reads.
    pub metrics: Option<Arc<ScanMetrics>>,
    /// Only these fragments (for partitioned scans); `None` reads all.
    pub fragments: Option<Vec<FragmentId>>,
    /// Of these fragments, only the rows at these offsets (a partition's share of a
    /// fragment split between partitions); others are read whole.
    pub fragment_rows: Option<BTreeMap<FragmentId, std::ops::Range<u32>>>,
    /// Only rows passing this, evaluated as the scan reads (see [`RowPredicate`]).
    pub filter: Option<Arc<dyn RowPredicate>>,
    /// In fragments the index covers, only the rows it finds for the probe's values (a
    /// superset of the rows the scan's filter passes; the filter still decides).
    pub index: Option<Arc<IndexProbe>>,
    /// Blob columns come as their descriptors (`kind, position, size, blob_id, blob_uri,
    /// inline`), no payload fetched: sizes and where bytes are, for a few bytes a row. A
    /// filter then sees descriptors too.
    pub blob_descriptors: bool,
    /// With `blob_descriptors`, the descriptors come without their last field, the inline
    /// bytes ([`crate::format::lean_descriptor_type`]): Parquet then decodes only their
    /// small leaves, whatever the values' sizes.
    pub lean_blob_descriptors: bool,
    /// Which blob values read as references, not bytes ([`BlobReferences`]): for a read
    /// whose rows are written back (a compaction, an UPDATE of other columns, a copy into
    /// another table), so the write keeps each value where it is — an external one at its
    /// object, a stored one (written back to this table) in its sidecar — never fetching or
    /// copying its bytes.
    pub blob_references: BlobReferences,
    /// These blob columns read as their values' sizes in bytes (`Int64`, NULL for NULL),
    /// from descriptors alone: `octet_length` without a payload byte read.
    pub blob_sizes: Vec<String>,
    /// Reads a filter's columns with the others in one step, even where the rows are wide
    /// enough for two steps to pay (late materialization off).
    pub filter_in_one_step: bool,
    /// At most this many rows (after the filter). Blob payloads are then fetched only for
    /// the rows returned, not for every row of the batches read to find them.
    pub limit: Option<usize>,
    /// These user columns of a string or binary type read as `Utf8View` / `BinaryView`,
    /// their values left in the pages Parquet decoded them into: a filter's columns that
    /// the scan does not return are read so, and decoding them copies no value.
    pub as_views: Vec<String>,
}

impl ScanRequest {
    /// Every row of every column, no system columns: add to it with the methods below.
    ///
    /// ```
    /// # use natal::ScanRequest;
    /// let request = ScanRequest::new()
    ///     .columns(["key", "name"])
    ///     .with_row_id()
    ///     .row_id_range(0..=999);
    /// assert_eq!(request.columns.as_deref(), Some(&["key".to_string(), "name".to_string()][..]));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads only these user columns, in this order.
    pub fn columns<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// Adds the `_rowid` column after the user columns.
    pub fn with_row_id(mut self) -> Self {
        self.with_row_id = true;
        self
    }

    /// Adds the `_rowaddr` column after the user columns (and `_rowid`).
    pub fn with_row_addr(mut self) -> Self {
        self.with_row_addr = true;
        self
    }

    /// Adds the lineage columns after the other system columns.
    pub fn with_lineage(mut self) -> Self {
        self.with_lineage = true;
        self
    }

    /// Reads only the rows with these ids (a take).
    pub fn row_ids(mut self, ids: impl IntoIterator<Item = RowId>) -> Self {
        self.row_ids = Some(ids.into_iter().collect());
        self
    }

    /// Reads only the rows whose ids fall in `range`.
    pub fn row_id_range(mut self, range: RangeInclusive<u64>) -> Self {
        self.row_id_range = Some(range);
        self
    }

    /// Reads only the rows passing `filter`, evaluated as the scan reads.
    pub fn filter(mut self, filter: Arc<dyn RowPredicate>) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Adds the scan's counters to `metrics`.
    pub fn metrics(mut self, metrics: Arc<ScanMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// What a scan did, counted as it runs.
#[derive(Debug, Default)]
pub struct ScanMetrics {
    /// Bytes received from data-file reads (footers and pages).
    pub bytes_read: Arc<AtomicU64>,
    /// Rows of the scanned fragments not read: deleted or outside the id mask.
    pub rows_masked: AtomicU64,
    /// Rows read and rejected by the scan's filter.
    pub rows_filtered: AtomicU64,
    /// Rows not read because their pages' min/max rule the filter out.
    pub rows_page_pruned: Arc<AtomicU64>,
    /// Rows the filter rejected before the scan's other columns were read (late
    /// materialization): those columns were never decoded for them.
    pub rows_late_skipped: AtomicU64,
    /// The bytes (before compression, by the columns' average width) of the columns not
    /// read for `rows_late_skipped`.
    pub bytes_late_skipped: AtomicU64,
}
