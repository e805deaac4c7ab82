//! Column types Parquet has no encoding for, and the type data files hold them as instead
//! (reader and writer flag [`super::flags::STORED_TYPES`]): an `Interval(MonthDayNano)` as
//! 16 bytes, little-endian months (i32), days (i32) and nanoseconds (i64), as Arrow's own
//! IPC format lays it out. Only top-level columns: such a type inside a struct, list or map
//! is refused when the table is created or the column added.

use arrow::datatypes::{DataType, IntervalUnit};

/// Bytes of one `Interval(MonthDayNano)` value in a data file.
pub const MONTH_DAY_NANO_BYTES: i32 = 16;

/// The type data files hold a column of `data_type` as, when it is not `data_type` itself.
pub fn stored_as(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            Some(DataType::FixedSizeBinary(MONTH_DAY_NANO_BYTES))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_month_day_nano_intervals_are_stored_apart() {
        assert_eq!(
            stored_as(&DataType::Interval(IntervalUnit::MonthDayNano)),
            Some(DataType::FixedSizeBinary(16))
        );
        assert_eq!(stored_as(&DataType::Interval(IntervalUnit::DayTime)), None);
        assert_eq!(stored_as(&DataType::Int64), None);
    }
}
