//! What a change read reports and the values it reports: the kinds of change and the
//! change's columns; each chunk of the report read by id from the two ends of the range
//! (old values from `from`, new ones from `to`) and interleaved into report order, and the
//! pairs a restore put back as they were dropped.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array,
};
use arrow::compute::{filter_record_batch, interleave};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef, TimeUnit};
use arrow::row::{RowConverter, SortField};

use crate::error::{Error, Result};
use crate::format::Schema;
use crate::rowid::{RowAddress, RowId};
use crate::table::scan_request::{ScanRequest, ROW_ID};
use crate::table::Snapshot;

/// The column naming what happened to a row: `insert`, `update_preimage`,
/// `update_postimage` or `delete` (Delta's change data feed names).
pub const CHANGE_TYPE: &str = "_change_type";
/// The column holding the version of a row's last change in the range.
pub const COMMIT_VERSION: &str = "_commit_version";
/// The column holding when that version was committed (UTC, microseconds).
pub const COMMIT_TIMESTAMP: &str = "_commit_timestamp";

/// What happened to a row between two versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeType {
    /// The row was deleted; its values are those it had at `from`.
    Delete,
    /// The row's values at `from`, before the range's updates.
    UpdatePreimage,
    /// The row's values at `to`, after them.
    UpdatePostimage,
    /// The row was inserted; its values are those it has at `to`.
    Insert,
}

impl ChangeType {
    /// Every kind, in report order within a row.
    pub const ALL: [ChangeType; 4] = [
        ChangeType::Delete,
        ChangeType::UpdatePreimage,
        ChangeType::UpdatePostimage,
        ChangeType::Insert,
    ];

    /// The kind `_change_type` names `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The name `_change_type` holds.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Delete => "delete",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
            ChangeType::Insert => "insert",
        }
    }
}

/// One reported change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::table) struct Change {
    /// The version of the row's last change in the range.
    pub version: u64,
    /// The row's id.
    pub id: u64,
    /// What happened to it.
    pub kind: ChangeType,
    /// Where the values reported are, when the read found it: at `from` (or in the change
    /// data that captured them) for a delete or a preimage, at `to` for an insert or a
    /// postimage. Without it they are found by id.
    pub at: Option<RowAddress>,
}

impl Change {
    /// A change whose values are found by id.
    pub fn by_id(version: u64, id: u64, kind: ChangeType) -> Self {
        Self {
            version,
            id,
            kind,
            at: None,
        }
    }

    /// Whether its values are `from`'s (a delete's or a preimage's).
    pub(in crate::table) fn old_values(&self) -> bool {
        matches!(self.kind, ChangeType::Delete | ChangeType::UpdatePreimage)
    }
}

/// How many rows changed each way.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(in crate::table) struct Counts {
    pub inserted: u64,
    /// Rows updated (a preimage and a postimage each).
    pub updated: u64,
    pub deleted: u64,
}

impl Counts {
    /// Counts a reported change (an update by its postimage).
    pub fn add(&mut self, kind: ChangeType) {
        match kind {
            ChangeType::Insert => self.inserted += 1,
            ChangeType::Delete => self.deleted += 1,
            ChangeType::UpdatePostimage => self.updated += 1,
            ChangeType::UpdatePreimage => {}
        }
    }
}

/// `report` in chunks of about `size` changes, never parting a preimage from its postimage.
pub(in crate::table) fn pair_chunks(
    report: &[Change],
    size: usize,
) -> impl Iterator<Item = &[Change]> {
    let mut rest = report;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = size.min(rest.len());
        if end < rest.len() && rest[end].kind == ChangeType::UpdatePostimage {
            end += 1;
        }
        let (chunk, after) = rest.split_at(end);
        rest = after;
        Some(chunk)
    })
}

/// Per row, whether `a` and `b` hold equal values in every column. Values of a type rows
/// cannot be compared count as different.
pub(in crate::table) fn equal_rows(a: &RecordBatch, b: &RecordBatch) -> Result<Vec<bool>> {
    let fields = a
        .schema()
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    let Ok(converter) = RowConverter::new(fields) else {
        return Ok(vec![false; a.num_rows()]);
    };
    let (a, b) = (
        converter.convert_columns(a.columns())?,
        converter.convert_columns(b.columns())?,
    );
    Ok((0..a.num_rows()).map(|i| a.row(i) == b.row(i)).collect())
}

/// The positions, among `new`'s columns as read, of those `old` has too (by field id):
/// the values a change is judged by. A column added in between reads NULL in old rows,
/// and adding it changed no row.
pub(in crate::table) fn columns_in_both(old: &Schema, new: &Schema) -> Vec<usize> {
    (new.fields.iter().enumerate())
        .filter(|(_, f)| old.field_by_id(f.id).is_some())
        .map(|(i, _)| i)
        .collect()
}

/// `batch` without the update pairs whose preimage and postimage are equal in the
/// `compared` columns (counted into `dropped`): after a restore put a row back as it was,
/// it did not change over the range.
pub(in crate::table) fn drop_equal_pairs(
    batch: RecordBatch,
    chunk: &[Change],
    compared: &[usize],
    dropped: &mut u64,
) -> Result<RecordBatch> {
    let values = batch.project(compared)?;
    let mut keep = vec![true; chunk.len()];
    for i in 0..chunk.len().saturating_sub(1) {
        if chunk[i].kind == ChangeType::UpdatePreimage {
            let (pre, post) = (values.slice(i, 1), values.slice(i + 1, 1));
            if equal_rows(&pre, &post)?[0] {
                (keep[i], keep[i + 1]) = (false, false);
                *dropped += 1;
            }
        }
    }
    Ok(filter_record_batch(&batch, &BooleanArray::from(keep))?)
}

/// The columns a change read adds after the table's: `_rowid` and the change's three.
pub(crate) const CHANGE_COLUMNS: usize = 4;

/// The schema of a change read: the read's columns, then the change's.
pub(crate) fn change_schema(read: &ArrowSchema) -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = read.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(CHANGE_TYPE, DataType::Utf8, false)));
    fields.push(Arc::new(Field::new(
        COMMIT_VERSION,
        DataType::UInt64,
        false,
    )));
    fields.push(Arc::new(Field::new(
        COMMIT_TIMESTAMP,
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        false,
    )));
    Arc::new(ArrowSchema::new_with_metadata(
        fields,
        read.metadata().clone(),
    ))
}

/// Old values: rows of an earlier version, read with that version's own schema (its files
/// hold its field ids) and shown as a later version's columns, matched by field id. A
/// column the earlier version lacked, or held as a type that does not cast to the later
/// one's, reads NULL.
pub(in crate::table) struct OldValues {
    /// The earlier version.
    pub snapshot: Snapshot,
    /// The later version's schema.
    pub shown_as: Schema,
}

impl OldValues {
    /// The live rows `rows` as `output` (the later version's scan schema for `request`).
    pub(in crate::table) async fn take(
        &self,
        rows: Rows<'_>,
        request: &ScanRequest,
        output: &SchemaRef,
    ) -> Result<RecordBatch> {
        let old_schema = self.snapshot.schema();
        // Each output column's name in the earlier version, if it had the column.
        let old_names: Vec<Option<&str>> = (output.fields().iter())
            .map(|f| {
                let id = self.shown_as.field_by_name(f.name())?.id;
                Some(old_schema.field_by_id(id)?.name.as_str())
            })
            .collect();
        let read = ScanRequest {
            columns: Some(old_names.iter().flatten().map(|n| n.to_string()).collect()),
            with_row_id: true,
            ..request.clone()
        };
        let old = rows.take(&self.snapshot, read).await?;
        let columns = (output.fields().iter().zip(&old_names))
            .map(|(field, old_name)| {
                let name = if field.name() == ROW_ID {
                    Some(ROW_ID)
                } else {
                    *old_name
                };
                let column = name.and_then(|n| old.column_by_name(n));
                Ok(match column {
                    Some(c) if c.data_type() == field.data_type() => c.clone(),
                    Some(c) if arrow::compute::can_cast_types(c.data_type(), field.data_type()) => {
                        arrow::compute::cast(c, field.data_type())?
                    }
                    _ => arrow::array::new_null_array(field.data_type(), old.num_rows()),
                })
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        Ok(RecordBatch::try_new(output.clone(), columns)?)
    }
}

/// Rows of one side of a change, found by id or at their addresses.
pub(in crate::table) enum Rows<'a> {
    /// By id, through the version's relocation view.
    Ids(&'a [RowId]),
    /// At these addresses, each live in the version.
    At(&'a [RowAddress]),
}

impl Rows<'_> {
    async fn take(&self, snapshot: &Snapshot, request: ScanRequest) -> Result<RecordBatch> {
        match self {
            Rows::Ids(ids) => snapshot.take(ids, request).await,
            Rows::At(addresses) => snapshot.take_at(addresses, request).await,
        }
    }

    fn len(&self) -> usize {
        match self {
            Rows::Ids(ids) => ids.len(),
            Rows::At(addresses) => addresses.len(),
        }
    }
}

/// One side's rows of a chunk: at their places when every change of the chunk knows them,
/// else by id.
enum Side {
    Ids(Vec<RowId>),
    At(Vec<RowAddress>),
}

impl Side {
    fn new(located: bool) -> Self {
        match located {
            true => Side::At(Vec::new()),
            false => Side::Ids(Vec::new()),
        }
    }

    /// Adds `change`'s row (every change has its place on a side of places); its position.
    fn push(&mut self, change: &Change) -> usize {
        match self {
            Side::At(at) => {
                at.extend(change.at);
                at.len() - 1
            }
            Side::Ids(ids) => {
                ids.push(RowId::from_u64(change.id));
                ids.len() - 1
            }
        }
    }

    fn rows(&self) -> Rows<'_> {
        match self {
            Side::At(at) => Rows::At(at),
            Side::Ids(ids) => Rows::Ids(ids),
        }
    }
}

/// The columns of one chunk of the report: old values taken from `before`, new ones from
/// `after`, interleaved into report order.
pub(in crate::table) async fn read_chunk(
    chunk: &[Change],
    (before, after): (&OldValues, &Snapshot),
    request: &ScanRequest,
    timestamps: &HashMap<u64, i64>,
) -> Result<Vec<ArrayRef>> {
    // Each side by places when all its changes know them: old values may have places (in
    // change data) where new ones have only ids.
    let located = |old_side: bool| {
        (chunk.iter())
            .filter(|c| c.old_values() == old_side)
            .all(|c| c.at.is_some())
    };
    let (mut old, mut new) = (Side::new(located(true)), Side::new(located(false)));
    // Per reported row: which side it comes from and its row there.
    let picks: Vec<(usize, usize)> = (chunk.iter())
        .map(|change| match change.old_values() {
            true => (0, old.push(change)),
            false => (1, new.push(change)),
        })
        .collect();
    let mut columns = match request.columns.as_ref().is_some_and(Vec::is_empty) {
        // No value asked: the ids are all there is to read, and the report has them.
        true => {
            vec![Arc::new(UInt64Array::from_iter_values(chunk.iter().map(|c| c.id))) as ArrayRef]
        }
        false => {
            values(
                chunk,
                (old.rows(), new.rows()),
                &picks,
                (before, after),
                request,
            )
            .await?
        }
    };
    columns.push(Arc::new(StringArray::from_iter_values(
        chunk.iter().map(|c| c.kind.as_str()),
    )));
    columns.push(Arc::new(UInt64Array::from_iter_values(
        chunk.iter().map(|c| c.version),
    )));
    let stamps: Vec<i64> = chunk
        .iter()
        .map(|c| timestamps.get(&c.version).copied().unwrap_or_default())
        .collect();
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(stamps).with_timezone("UTC"),
    ));
    Ok(columns)
}

/// The values and `_rowid` of `chunk`'s rows: `old_rows` taken from `before`, `new_rows`
/// from `after`, interleaved by `picks`.
async fn values(
    chunk: &[Change],
    (old_rows, new_rows): (Rows<'_>, Rows<'_>),
    picks: &[(usize, usize)],
    (before, after): (&OldValues, &Snapshot),
    request: &ScanRequest,
) -> Result<Vec<ArrayRef>> {
    let output = after.scan_schema(request)?;
    let (old_asked, new_asked) = (old_rows.len(), new_rows.len());
    let (old, new) = futures::future::try_join(
        before.take(old_rows, request, &output),
        new_rows.take(after, request.clone()),
    )
    .await?;
    for (batch, asked, side) in [(&old, old_asked, "old"), (&new, new_asked, "new")] {
        if batch.num_rows() != asked {
            return Err(Error::internal(format!(
                "a change read found {} of the {asked} rows it reads {side} values of",
                batch.num_rows()
            )));
        }
    }
    // Changes of one side only (a read of some kinds) come in that side's order already.
    let columns = match (old.num_rows(), new.num_rows()) {
        (0, _) => new.columns().to_vec(),
        (_, 0) => old.columns().to_vec(),
        _ => (0..old.num_columns())
            .map(|i| {
                let sides: [&dyn Array; 2] = [old.column(i).as_ref(), new.column(i).as_ref()];
                Ok(interleave(&sides, picks)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?,
    };
    let ids = old
        .schema()
        .index_of(ROW_ID)
        .ok()
        .and_then(|i| columns[i].as_any().downcast_ref::<UInt64Array>());
    if !ids.is_some_and(|ids| ids.values().iter().eq(chunk.iter().map(|c| &c.id))) {
        return Err(Error::internal(
            "a change read's rows came back out of order",
        ));
    }
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_a_preimage_with_its_postimage() {
        let report: Vec<Change> = [
            Change::by_id(2, 1, ChangeType::Insert),
            Change::by_id(2, 2, ChangeType::UpdatePreimage),
            Change::by_id(2, 2, ChangeType::UpdatePostimage),
            Change::by_id(3, 3, ChangeType::Delete),
        ]
        .into();
        let sizes: Vec<usize> = pair_chunks(&report, 2).map(<[_]>::len).collect();
        assert_eq!(sizes, vec![3, 1]);
        let sizes: Vec<usize> = pair_chunks(&report, 1).map(<[_]>::len).collect();
        assert_eq!(sizes, vec![1, 2, 1]);
    }
}
