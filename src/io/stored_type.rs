//! Columns of types Parquet has no encoding for, to and from the type data files hold them
//! as (`format::stored_as`): a month-day-nano interval as 16 little-endian bytes.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, FixedSizeBinaryArray, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalUnit};

use crate::error::{Error, Result};
use crate::format::MONTH_DAY_NANO_BYTES;

/// `column` as a data file holds it (itself when its type is stored as it is).
pub(crate) fn to_stored(column: &ArrayRef) -> Result<ArrayRef> {
    match column.data_type() {
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let intervals = column.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
            let mut bytes = Vec::with_capacity(intervals.len() * MONTH_DAY_NANO_BYTES as usize);
            for value in intervals.values() {
                bytes.extend_from_slice(&value.months.to_le_bytes());
                bytes.extend_from_slice(&value.days.to_le_bytes());
                bytes.extend_from_slice(&value.nanoseconds.to_le_bytes());
            }
            let stored = FixedSizeBinaryArray::try_new(
                MONTH_DAY_NANO_BYTES,
                bytes.into(),
                intervals.nulls().cloned(),
            )?;
            Ok(Arc::new(stored))
        }
        _ => Ok(column.clone()),
    }
}

/// A column a data file holds as `stored` (see [`to_stored`]) as its table type `data_type`.
pub(crate) fn from_stored(column: &ArrayRef, data_type: &DataType) -> Result<ArrayRef> {
    match (column.data_type(), data_type) {
        (
            DataType::FixedSizeBinary(MONTH_DAY_NANO_BYTES),
            DataType::Interval(IntervalUnit::MonthDayNano),
        ) => {
            let stored = column.as_fixed_size_binary();
            let values = (0..stored.len()).map(|i| {
                let b = stored.value(i);
                let i32_at =
                    |at: usize| i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                let mut nanos = [0u8; 8];
                nanos.copy_from_slice(&b[8..16]);
                IntervalMonthDayNano::new(i32_at(0), i32_at(4), i64::from_le_bytes(nanos))
            });
            let intervals =
                IntervalMonthDayNanoArray::try_new(values.collect(), stored.nulls().cloned())?;
            Ok(Arc::new(intervals))
        }
        (held, _) => Err(Error::internal(format!(
            "a column held as {held} is not stored {data_type}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_round_trip_through_their_bytes_nulls_and_slices_kept() {
        let intervals: ArrayRef = Arc::new(IntervalMonthDayNanoArray::from(vec![
            Some(IntervalMonthDayNano::new(1, -2, 3)),
            None,
            Some(IntervalMonthDayNano::new(i32::MIN, i32::MAX, i64::MIN)),
        ]));
        let sliced = intervals.slice(1, 2);
        for column in [intervals, sliced] {
            let stored = to_stored(&column).unwrap();
            assert_eq!(stored.data_type(), &DataType::FixedSizeBinary(16));
            assert_eq!(stored.null_count(), column.null_count());
            let back = from_stored(&stored, column.data_type()).unwrap();
            assert_eq!(&back, &column);
        }
    }
}
