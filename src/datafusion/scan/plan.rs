//! [`ScanPlan`]: everything a natal scan will read, decided by the table provider at
//! planning time — the snapshot, columns, id masks, filters, index probe, limit and the
//! pieces each partition reads. The scan exec runs it; `statistics.rs` describes it.

use std::ops::RangeInclusive;
use std::sync::Arc;

use super::filter::ExprPredicate;
use super::partitions::Piece;
use crate::rowid::RowIdSet;
use crate::table::{IndexProbe, Snapshot, Table};

/// A scan as its provider was asked for it (`TableProvider::scan`), with the table it read.
#[derive(Debug, Clone)]
pub(crate) struct ScanOrigin {
    pub table: Table,
    /// The `t$rows` face: system columns after the user columns.
    pub system_columns: bool,
    /// Positions in the provider's columns, in output order.
    pub projection: Vec<usize>,
    /// Every filter handed to the scan (all applied by it).
    pub filters: Vec<datafusion::logical_expr::Expr>,
}

/// How the scan reads a snapshot; built by the table provider.
#[derive(Debug, Clone)]
pub(crate) struct ScanPlan {
    pub snapshot: Arc<Snapshot>,
    /// What the provider was asked: another process plans the scan again from it.
    pub origin: ScanOrigin,
    /// User columns to read, in scan order.
    pub columns: Vec<String>,
    pub with_row_id: bool,
    pub with_row_addr: bool,
    /// Adds the lineage columns after the other system columns.
    pub with_lineage: bool,
    /// For each output column, its index in the scan's own output.
    pub output_order: Vec<usize>,
    pub row_ids: Option<RowIdSet>,
    pub row_id_range: Option<RangeInclusive<u64>>,
    /// What each partition reads: fragments, whole or a range of their rows.
    pub partitions: Vec<Vec<Piece>>,
    pub fragments_pruned: usize,
    /// The column filters, evaluated as fragments are read.
    pub filter: Option<Arc<ExprPredicate>>,
    /// An index that narrows the rows the filter must look at in the fragments it covers.
    pub index: Option<Arc<IndexProbe>>,
    pub limit: Option<usize>,
    /// The share of rows (0..=1) a filter is taken to pass when nothing better is known:
    /// the session's `datafusion.optimizer.default_filter_selectivity`, as DataFusion's
    /// own `FilterExec` estimates.
    pub filter_selectivity: f64,
    /// Blob columns read as their values' sizes (`octet_length` of them is all the query
    /// asks; see `blob_sizes.rs`).
    pub blob_sizes: Vec<String>,
    /// Blob values read as references, not bytes (a read whose rows are written back
    /// unchanged in those columns: `MergeExec`'s target).
    pub blob_references: crate::BlobReferences,
    /// Whether a filtered scan of wide rows may read in two steps (`natal.late_materialization`).
    pub late_materialization: bool,
}
