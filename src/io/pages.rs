//! Page pruning: which rows of a data file a scan's filter could want, judged from the file's
//! page index (min/max per page) before any page is read. The judgement itself belongs to
//! the filter ([`PagePruning::select`]); this module shows it the file under the table's
//! current column names and turns its answer into the rows a fragment read keeps.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema as ArrowSchema, SchemaRef};
use parquet::arrow::arrow_reader::RowSelection;
use parquet::file::metadata::ParquetMetaData;

use crate::format::{field_id_of, FieldId};

/// Chooses the rows of one data file that may pass a filter, from its page index; `None`
/// when it cannot tell. The schema is the file's, with the filter's columns under their
/// table names (see `file_schema_as_table`).
pub type SelectPages = dyn Fn(&ParquetMetaData, &SchemaRef) -> Option<RowSelection> + Send + Sync;

/// A scan's page pruning: the table fields its filter reads, and the filter's judgement.
#[derive(Clone)]
pub struct PagePruning {
    /// Only the files holding these fields (as the fragment reads them) are consulted.
    pub field_ids: Vec<FieldId>,
    /// Which rows of a file may pass, from its page index.
    pub select: Arc<SelectPages>,
    /// Adds the rows left out of fragment reads by pruning (a scan's metric).
    pub rows_pruned: Option<Arc<AtomicU64>>,
}

impl fmt::Debug for PagePruning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PagePruning")
            .field("field_ids", &self.field_ids)
            .finish_non_exhaustive()
    }
}

/// `file_schema` with each column in `columns` (table field id → the table's field) renamed
/// to the table's name, and every other column given a name no filter can mention: a column
/// the file stores in another type than the table's, or one a newer file of the fragment
/// supersedes, must not be judged by its page statistics.
pub(super) fn file_schema_as_table(
    file_schema: &ArrowSchema,
    columns: &[(u32, &Field)],
) -> SchemaRef {
    let fields: Vec<Field> = file_schema
        .fields()
        .iter()
        .enumerate()
        .map(|(position, field)| {
            let id = field_id_of(field);
            let table = columns
                .iter()
                .find(|(table_id, _)| Some(*table_id) == id)
                .map(|(_, table)| *table)
                .filter(|table| table.data_type() == field.data_type());
            let name = match table {
                Some(table) => table.name().clone(),
                None => format!("\0natal unmatched column {position}"),
            };
            field.as_ref().clone().with_name(name)
        })
        .collect();
    Arc::new(ArrowSchema::new(fields))
}

/// The row ranges `selection` selects in a file of `total` rows; `None` if it does not
/// describe exactly `total` rows (then it is not used).
pub(super) fn selected_ranges(selection: &RowSelection, total: u32) -> Option<Vec<Range<u32>>> {
    let mut ranges: Vec<Range<u32>> = Vec::new();
    let mut position: u64 = 0;
    for selector in selection.iter() {
        let end = position + selector.row_count as u64;
        if end > u64::from(total) {
            return None;
        }
        if !selector.skip && end > position {
            let range = position as u32..end as u32;
            match ranges.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => ranges.push(range),
            }
        }
        position = end;
    }
    (position == u64::from(total)).then_some(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PARQUET_FIELD_ID_META_KEY;
    use parquet::arrow::arrow_reader::RowSelector;

    #[test]
    fn selected_ranges_must_cover_the_file_exactly() {
        let selection = RowSelection::from(vec![
            RowSelector::skip(10),
            RowSelector::select(5),
            RowSelector::select(5),
            RowSelector::skip(70),
            RowSelector::select(10),
        ]);
        assert_eq!(
            selected_ranges(&selection, 100),
            Some(vec![10..20, 90..100])
        );
        assert_eq!(selected_ranges(&selection, 99), None);
        assert_eq!(selected_ranges(&selection, 101), None);
    }

    #[test]
    fn only_the_named_columns_in_their_table_type_keep_a_name() {
        let with_id = |name: &str, id: u32, data_type| {
            Field::new(name, data_type, true)
                .with_metadata([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())].into())
        };
        use arrow::datatypes::DataType::{Int32, Int64};
        let file = ArrowSchema::new(vec![
            with_id("old_name", 1, Int64),
            with_id("narrow", 2, Int32),
            with_id("other", 3, Int64),
        ]);
        let (renamed, widened) = (
            Field::new("new_name", Int64, true),
            Field::new("narrow", Int64, true),
        );
        let schema = file_schema_as_table(&file, &[(1, &renamed), (2, &widened)]);
        assert_eq!(schema.field(0).name(), "new_name");
        assert!(schema.field(1).name().starts_with('\0'), "type differs");
        assert!(schema.field(2).name().starts_with('\0'), "not asked for");
    }
}
