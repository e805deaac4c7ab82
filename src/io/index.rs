//! Index segment files: `_indices/<uuid>/index.parquet`, the (value, row id) pairs of the
//! indexed rows sorted by value, in row groups small enough that the footer's per-group
//! min/max finds the few groups a lookup must decode.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt64Array};
use arrow::compute::{filter_record_batch, is_not_null, lexsort_to_indices, take, SortColumn};
use arrow::datatypes::{DataType, Field, Schema, UInt64Type};
use arrow::row::{RowConverter, Rows, SortField};
use bytes::Bytes;
use futures::TryStreamExt;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder};
use parquet::basic::Compression;
use parquet::file::properties::{WriterProperties, WriterVersion};
use roaring::RoaringTreemap;

use super::panics::parquet_read;
use super::reader::ObjectFileReader;
use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{IndexSegment, TablePath};

/// Rows per row group of a segment file: a lookup decodes whole groups.
const GROUP_ROWS: usize = 2 * 1024;

const VALUE: &str = "value";
const ROW_ID: &str = "row_id";

/// What writing a segment file produced.
pub(crate) struct WrittenSegment {
    pub path: TablePath,
    pub rows: u64,
    pub file_size_bytes: u64,
}

/// Whether values of this type can be indexed: equality and order agree with DataFusion's
/// `=` (floats do not: `-0.0 = 0.0` and NaN), and the type is a single value.
pub fn indexable(data_type: &DataType) -> bool {
    data_type.is_integer()
        || matches!(
            data_type,
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
                | DataType::Boolean
                | DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(_, _)
                | DataType::Decimal128(_, _)
                | DataType::Decimal256(_, _)
        )
}

fn segment_schema(value_type: &DataType) -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new(VALUE, value_type.clone(), false),
        Field::new(ROW_ID, DataType::UInt64, false),
    ]))
}

fn corrupt(path: &TablePath, reason: impl std::fmt::Display) -> Error {
    Error::corrupt(path.as_str(), format!("index segment: {reason}"))
}

fn sortable(values: &[ArrayRef]) -> Result<(RowConverter, Vec<Rows>)> {
    let data_type = values
        .first()
        .map(|v| v.data_type().clone())
        .ok_or_else(|| Error::invalid("no values to compare"))?;
    let converter = RowConverter::new(vec![SortField::new(data_type)])?;
    let rows = values
        .iter()
        .map(|v| converter.convert_columns(std::slice::from_ref(v)))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((converter, rows))
}

/// What an index lookup asks for, in the indexed column's type.
#[derive(Debug, Clone)]
pub enum IndexLookup {
    /// Rows holding any of these values (nulls among them match nothing).
    Values(ArrayRef),
    /// Rows whose value lies within the bounds: each a one-value array and whether it is
    /// included; `None` leaves that side open.
    Range {
        /// The lower bound.
        low: Option<(ArrayRef, bool)>,
        /// The upper bound.
        high: Option<(ArrayRef, bool)>,
    },
}

impl IndexLookup {
    /// The type of the values asked for (the indexed column's).
    pub fn data_type(&self) -> &DataType {
        match self {
            IndexLookup::Values(values) => values.data_type(),
            IndexLookup::Range { low, high } => low
                .as_ref()
                .or(high.as_ref())
                .map_or(&DataType::Null, |(bound, _)| bound.data_type()),
        }
    }

    /// How it shows in a plan.
    pub fn describe(&self) -> String {
        match self {
            IndexLookup::Values(values) => format!("{} values", values.len()),
            IndexLookup::Range { .. } => "range".to_string(),
        }
    }
}

/// A lookup over values in row format, whose byte order is the values' order.
enum Matcher {
    Values {
        sorted: Vec<Vec<u8>>,
        set: HashSet<Vec<u8>>,
    },
    Range {
        low: Option<(Vec<u8>, bool)>,
        high: Option<(Vec<u8>, bool)>,
    },
}

impl Matcher {
    fn new(converter: &RowConverter, lookup: &IndexLookup) -> Result<Self> {
        let encode = |array: &ArrayRef| -> Result<Vec<Vec<u8>>> {
            let rows = converter.convert_columns(std::slice::from_ref(array))?;
            Ok((0..array.len())
                .filter(|&i| array.is_valid(i))
                .map(|i| rows.row(i).data().to_vec())
                .collect())
        };
        let bound = |b: &Option<(ArrayRef, bool)>| -> Result<Option<(Vec<u8>, bool)>> {
            Ok(match b {
                Some((value, inclusive)) => {
                    encode(value)?.into_iter().next().map(|v| (v, *inclusive))
                }
                None => None,
            })
        };
        Ok(match lookup {
            IndexLookup::Values(values) => {
                let mut sorted = encode(values)?;
                sorted.sort_unstable();
                sorted.dedup();
                let set = sorted.iter().cloned().collect();
                Matcher::Values { sorted, set }
            }
            IndexLookup::Range { low, high } => Matcher::Range {
                low: bound(low)?,
                high: bound(high)?,
            },
        })
    }

    fn above_low(low: &Option<(Vec<u8>, bool)>, value: &[u8]) -> bool {
        low.as_ref().is_none_or(|(low, inclusive)| {
            value > low.as_slice() || (*inclusive && value == low.as_slice())
        })
    }

    fn below_high(high: &Option<(Vec<u8>, bool)>, value: &[u8]) -> bool {
        high.as_ref().is_none_or(|(high, inclusive)| {
            value < high.as_slice() || (*inclusive && value == high.as_slice())
        })
    }

    /// Whether a group whose values lie in `[min, max]` may hold a match.
    fn may_hold(&self, min: &[u8], max: &[u8]) -> bool {
        match self {
            Matcher::Values { sorted, .. } => {
                let first = sorted.partition_point(|w| w.as_slice() < min);
                sorted.get(first).is_some_and(|w| w.as_slice() <= max)
            }
            Matcher::Range { low, high } => {
                Self::above_low(low, max) && Self::below_high(high, min)
            }
        }
    }

    fn matches(&self, value: &[u8]) -> bool {
        match self {
            Matcher::Values { set, .. } => set.contains(value),
            Matcher::Range { low, high } => {
                Self::above_low(low, value) && Self::below_high(high, value)
            }
        }
    }
}

impl TableStore {
    /// Writes the non-null `values` with their `row_ids` as a new segment file.
    pub(crate) async fn write_index_segment(
        &self,
        values: ArrayRef,
        row_ids: ArrayRef,
    ) -> Result<WrittenSegment> {
        let schema = segment_schema(values.data_type());
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new(VALUE, values.data_type().clone(), true),
                Field::new(ROW_ID, DataType::UInt64, false),
            ])),
            vec![values.clone(), row_ids],
        )?;
        let batch = filter_record_batch(&batch, &is_not_null(&values)?)?;
        let order = lexsort_to_indices(
            &[
                SortColumn {
                    values: batch.column(0).clone(),
                    options: None,
                },
                SortColumn {
                    values: batch.column(1).clone(),
                    options: None,
                },
            ],
            None,
        )?;
        let columns = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &order, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let sorted = RecordBatch::try_new(schema.clone(), columns)?;
        let properties = WriterProperties::builder()
            // Sorted values delta-encode to a few bits each (version 2 pages, no dictionary).
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_dictionary_enabled(false)
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(GROUP_ROWS))
            // Group min/max must be the true bounds of each group's values.
            .set_statistics_truncate_length(None)
            .build();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema, Some(properties))?;
        writer.write(&sorted)?;
        writer.close()?;
        let path = TablePath::parse(&format!("_indices/{}/index.parquet", uuid::Uuid::new_v4()))?;
        let file_size_bytes = bytes.len() as u64;
        self.put(&self.path(&path), Bytes::from(bytes)).await?;
        Ok(WrittenSegment {
            path,
            rows: sorted.num_rows() as u64,
            file_size_bytes,
        })
    }

    /// The row ids `segment` holds under the values `lookup` asks for, decoding only the
    /// row groups whose min/max could hold one of them. A panic of the Parquet reader over a
    /// damaged segment file is that file's corruption.
    pub(crate) async fn lookup_index_segment(
        &self,
        segment: &IndexSegment,
        lookup: &IndexLookup,
    ) -> Result<RoaringTreemap> {
        let lookup = self.lookup_in_segment_file(segment, lookup);
        parquet_read(segment.path.as_str(), lookup).await
    }

    async fn lookup_in_segment_file(
        &self,
        segment: &IndexSegment,
        lookup: &IndexLookup,
    ) -> Result<RoaringTreemap> {
        let mut reader = ObjectFileReader::new(
            self.object_store().clone(),
            self.path(&segment.path),
            segment.file_size_bytes,
            None,
        );
        let metadata = self
            .cached_footer(
                &segment.path,
                &mut reader,
                ArrowReaderOptions::new(),
                |_| true,
            )
            .await
            .map_err(|e| corrupt(&segment.path, e))?;
        if matches!(
            lookup,
            IndexLookup::Range {
                low: None,
                high: None
            }
        ) {
            return Err(Error::invalid("an index range needs at least one bound"));
        }
        let expected = segment_schema(lookup.data_type());
        if metadata.schema().fields() != expected.fields() {
            return Err(corrupt(
                &segment.path,
                format!("holds {:?}, not (value, row_id)", metadata.schema()),
            ));
        }
        let groups = metadata.metadata().row_groups();
        let stats =
            StatisticsConverter::try_new(VALUE, metadata.schema(), metadata.parquet_schema())
                .map_err(|e| corrupt(&segment.path, e))?;
        let mins = stats
            .row_group_mins(groups)
            .map_err(|e| corrupt(&segment.path, e))?;
        let maxes = stats
            .row_group_maxes(groups)
            .map_err(|e| corrupt(&segment.path, e))?;
        let (converter, encoded) = sortable(&[mins.clone(), maxes.clone()])?;
        let (min_rows, max_rows) = (&encoded[0], &encoded[1]);
        let matcher = Matcher::new(&converter, lookup)?;
        let selected: Vec<usize> = (0..groups.len())
            .filter(|&g| {
                // A group without bounds is read: absent statistics rule nothing out.
                !mins.is_valid(g)
                    || !maxes.is_valid(g)
                    || matcher.may_hold(min_rows.row(g).data(), max_rows.row(g).data())
            })
            .collect();
        let mut ids = RoaringTreemap::new();
        if selected.is_empty() {
            return Ok(ids);
        }
        // Every selected group in one request, not one request per group in turn.
        let ranges: Vec<std::ops::Range<u64>> = selected
            .iter()
            .flat_map(|&g| {
                groups[g].columns().iter().map(|c| {
                    let (start, len) = c.byte_range();
                    start..start + len
                })
            })
            .collect();
        reader
            .prefetch(ranges)
            .await
            .map_err(|e| corrupt(&segment.path, e))?;
        let mut batches = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
            .with_row_groups(selected)
            .with_batch_size(GROUP_ROWS)
            .build()
            .map_err(|e| corrupt(&segment.path, e))?;
        while let Some(batch) = batches
            .try_next()
            .await
            .map_err(|e| corrupt(&segment.path, e))?
        {
            let values = converter.convert_columns(&[batch.column(0).clone()])?;
            let row_ids: &UInt64Array = batch
                .column(1)
                .as_primitive_opt::<UInt64Type>()
                .ok_or_else(|| corrupt(&segment.path, "row ids are not UInt64"))?;
            for (i, value) in values.iter().enumerate() {
                if matcher.matches(value.data()) {
                    ids.insert(row_ids.value(i));
                }
            }
        }
        Ok(ids)
    }
}
