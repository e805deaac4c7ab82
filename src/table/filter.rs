//! Filters evaluated while reading. A scan with a [`RowPredicate`] reads the columns the
//! predicate needs beside the requested ones, evaluates it on each batch as it is decoded,
//! and yields only the passing rows: no `FilterExec` over the scan, and a `LIMIT` stops it.
//!
//! Reading the predicate's columns first and the rest only for passing rows (late
//! materialization, `late_read.rs`) is kept for wide rows only: over narrow ones, with
//! matches spread over the table (1% of rows at random), nearly every page still holds one,
//! and the fine row selection cost more than it saved (145 ms vs 89 ms for the `sql` bench's
//! filtered scan).

use std::fmt;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::RowSelection;
use parquet::file::metadata::ParquetMetaData;

use super::ScanRequest;
use crate::error::{Error, Result};

/// A condition on rows, evaluated batch by batch as a scan reads.
pub trait RowPredicate: fmt::Debug + fmt::Display + Send + Sync {
    /// The user columns it reads, by name.
    fn columns(&self) -> &[String];
    /// Whether it reads `_rowid`.
    fn needs_row_id(&self) -> bool;
    /// Whether it reads `_rowaddr`.
    fn needs_row_addr(&self) -> bool;
    /// Which rows of `batch` pass; a null is a row that does not. `batch` is laid out as
    /// [`super::Snapshot::scan_schema`] lays out [`predicate_layout`] for this predicate.
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray>;
    /// Those of its columns it would evaluate as `Utf8View` / `BinaryView` (string and
    /// binary columns): a scan that does not return them reads them so. The others, and
    /// these where the scan returns them, come as the table types them.
    fn view_columns(&self) -> &[String] {
        &[]
    }
    /// Whether [`Self::select_pages`] can rule pages out; if not, no page index is loaded.
    fn prunes_pages(&self) -> bool {
        false
    }
    /// The rows of a data file whose pages may hold passing rows, judged by its page index
    /// (`metadata`); `schema` is the file's, its columns under the table's names where the
    /// values are the table's (others are named so no filter matches them). `None`: every
    /// row may pass.
    fn select_pages(&self, metadata: &ParquetMetaData, schema: &SchemaRef) -> Option<RowSelection> {
        let _ = (metadata, schema);
        None
    }
}

/// The layout `predicate` is evaluated on: its columns, then `_rowid` and `_rowaddr` if it
/// reads them.
pub fn predicate_layout(predicate: &dyn RowPredicate) -> ScanRequest {
    ScanRequest {
        columns: Some(predicate.columns().to_vec()),
        with_row_id: predicate.needs_row_id(),
        with_row_addr: predicate.needs_row_addr(),
        as_views: predicate.view_columns().to_vec(),
        ..Default::default()
    }
}

/// Keeps the rows of `batch` that pass `predicate` (reading the columns at `probe`, which
/// lay the batch out as [`predicate_layout`] would), as the columns at `output`.
pub(super) fn filter_batch(
    predicate: &dyn RowPredicate,
    batch: &RecordBatch,
    probe: &[usize],
    output: &[usize],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let keep = passing_rows(predicate, batch, probe)?;
    let kept = filter_record_batch(&batch.project(output)?, &keep)?;
    Ok(kept.with_schema(schema.clone())?)
}

/// Which rows of `batch` pass `predicate` (reading the columns at `probe`), one answer a row.
pub(super) fn passing_rows(
    predicate: &dyn RowPredicate,
    batch: &RecordBatch,
    probe: &[usize],
) -> Result<BooleanArray> {
    let keep = predicate.evaluate(&batch.project(probe)?)?;
    if keep.len() != batch.num_rows() {
        return Err(Error::invalid(format!(
            "filter {predicate} answered {} rows of {}",
            keep.len(),
            batch.num_rows()
        )));
    }
    Ok(keep)
}

/// A Rust closure as a [`RowPredicate`] over whole rows: it sees every user column, then
/// `_rowid` and `_rowaddr` (what [`super::Table::delete_where`] hands it).
pub(super) struct WholeRowPredicate<F> {
    columns: Vec<String>,
    evaluate: F,
}

impl<F> WholeRowPredicate<F> {
    /// The predicate `evaluate` over the columns of `schema`.
    pub(super) fn new(schema: &crate::format::Schema, evaluate: F) -> Self {
        let columns = schema.fields.iter().map(|f| f.name.clone()).collect();
        Self { columns, evaluate }
    }
}

impl<F> fmt::Debug for WholeRowPredicate<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WholeRowPredicate")
            .field("columns", &self.columns)
            .finish_non_exhaustive()
    }
}

impl<F> fmt::Display for WholeRowPredicate<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Rust predicate over whole rows")
    }
}

impl<F> RowPredicate for WholeRowPredicate<F>
where
    F: Fn(&RecordBatch) -> Result<BooleanArray> + Send + Sync,
{
    fn columns(&self) -> &[String] {
        &self.columns
    }
    fn needs_row_id(&self) -> bool {
        true
    }
    fn needs_row_addr(&self) -> bool {
        true
    }
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        (self.evaluate)(batch)
    }
}
