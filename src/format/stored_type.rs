//! Column types Parquet has no encoding for, and the type data files hold them as instead
//! (reader and writer flag [`super::flags::STORED_TYPES`]; unions and dictionaries of nested
//! values also [`super::flags::STORED_SHAPES`]):
//! - an `Interval(MonthDayNano)` as 16 bytes, little-endian months (i32), days (i32) and
//!   nanoseconds (i64), as Arrow's own IPC format lays it out;
//! - a union (sparse or dense) as a struct of its type ids ([`UNION_TYPE_IDS`], `Int8`, never
//!   null) and one nullable column per child, named by its type id and aligned with the rows:
//!   row `i`'s value is in the column of its type id, at `i`. A dense union's children are
//!   laid out by row this way too (its offsets are made anew when it is read back, so a
//!   value two rows shared reads back as two), which keeps every column of a data file one
//!   value a row, as Parquet needs;
//! - a dictionary of a struct, a union or a dictionary as its values, each row its own (the
//!   dictionary is made again when read: values equal at the row level share a key);
//! - a vector (a fixed-size list of Float32; reader flag [`super::flags::VECTOR_BYTES`]) as
//!   a struct of its components' bytes ([`VECTOR_COMPONENTS`], `FixedSizeBinary(4n)`,
//!   little-endian) and, for a row with a null component only, its components' validity
//!   ([`VECTOR_NULL_COMPONENTS`], `Binary`, a bit a component, least significant first; NULL
//!   for every other row). Parquet holds a fixed-size list as a list, a repetition and a
//!   definition level for every component, whose decoding bounded every exact search; bytes
//!   decode at the speed of a copy. Files written before hold the list, and read as such.
//!
//! Only top-level columns: such a type inside a struct, list or map is refused when the
//! table is created or the column added.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, IntervalUnit, UnionFields};

/// Bytes of one `Interval(MonthDayNano)` value in a data file.
pub const MONTH_DAY_NANO_BYTES: i32 = 16;

/// The name of the type-id column of a stored union.
pub const UNION_TYPE_IDS: &str = "type_ids";

/// The name of a stored vector's column of component bytes.
pub const VECTOR_COMPONENTS: &str = "components";

/// The name of a stored vector's column of component validity.
pub const VECTOR_NULL_COMPONENTS: &str = "null_components";

/// The type data files hold a column of `data_type` as, when it is not `data_type` itself.
pub fn stored_as(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            Some(DataType::FixedSizeBinary(MONTH_DAY_NANO_BYTES))
        }
        DataType::Union(fields, _) => Some(stored_union(fields)),
        DataType::Dictionary(_, values) if reshaped(values) => {
            Some(stored_as(values).unwrap_or_else(|| values.as_ref().clone()))
        }
        _ => vector_bytes(data_type).map(|width| {
            DataType::Struct(
                vec![
                    Field::new(VECTOR_COMPONENTS, DataType::FixedSizeBinary(width), true),
                    Field::new(VECTOR_NULL_COMPONENTS, DataType::Binary, true),
                ]
                .into(),
            )
        }),
    }
}

/// The bytes of one vector's components when data files hold `data_type` as a vector's
/// bytes (see the module header): a fixed-size list of Float32 of at most `i32::MAX / 4`.
pub fn vector_bytes(data_type: &DataType) -> Option<i32> {
    match data_type {
        DataType::FixedSizeList(item, n) if item.data_type() == &DataType::Float32 && *n > 0 => {
            n.checked_mul(4)
        }
        _ => None,
    }
}

/// Whether data files hold `data_type` in another shape (a union, a dictionary of nested
/// values): what reader flag [`super::flags::STORED_SHAPES`] marks.
pub fn stored_reshaped(data_type: &DataType) -> bool {
    match data_type {
        DataType::Union(..) => true,
        DataType::Dictionary(_, values) => reshaped(values),
        _ => false,
    }
}

/// Whether a dictionary of `values` is held as its values: Parquet's dictionaries hold
/// only flat values.
fn reshaped(values: &DataType) -> bool {
    matches!(
        values,
        DataType::Struct(_) | DataType::Union(..) | DataType::Dictionary(..)
    )
}

fn stored_union(fields: &UnionFields) -> DataType {
    let type_ids = Field::new(UNION_TYPE_IDS, DataType::Int8, false);
    let children = fields.iter().map(|(type_id, field)| {
        Arc::new(Field::new(
            type_id.to_string(),
            field.data_type().clone(),
            true,
        ))
    });
    DataType::Struct(
        std::iter::once(Arc::new(type_ids))
            .chain(children)
            .collect(),
    )
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

    #[test]
    fn vectors_are_stored_as_bytes() {
        let vector = |item: DataType, nullable: bool, n: i32| {
            DataType::FixedSizeList(Arc::new(Field::new("item", item, nullable)), n)
        };
        for nullable in [false, true] {
            let Some(DataType::Struct(held)) = stored_as(&vector(DataType::Float32, nullable, 128))
            else {
                panic!("a vector is stored as a struct")
            };
            assert_eq!(held[0].data_type(), &DataType::FixedSizeBinary(512));
            assert_eq!(held[1].data_type(), &DataType::Binary);
        }
        // Other types, and sizes past i32: the list's layout.
        assert_eq!(stored_as(&vector(DataType::Float64, false, 128)), None);
        assert_eq!(stored_as(&vector(DataType::Float32, false, i32::MAX)), None);
        assert!(!stored_reshaped(&vector(DataType::Float32, false, 3)));
    }

    #[test]
    fn unions_are_stored_as_type_ids_and_row_aligned_children() {
        let fields = UnionFields::try_new(
            [3, 7],
            [
                Field::new("a", DataType::Int32, false),
                Field::new("b", DataType::Utf8, true),
            ],
        )
        .unwrap();
        for mode in [
            arrow::datatypes::UnionMode::Sparse,
            arrow::datatypes::UnionMode::Dense,
        ] {
            let union = DataType::Union(fields.clone(), mode);
            let DataType::Struct(stored) = stored_as(&union).unwrap() else {
                panic!("a union is stored as a struct")
            };
            let names: Vec<_> = stored.iter().map(|f| f.name().as_str()).collect();
            assert_eq!(names, [UNION_TYPE_IDS, "3", "7"]);
            assert!(!stored[0].is_nullable() && stored[1].is_nullable());
            assert!(stored_reshaped(&union));
        }
    }

    #[test]
    fn dictionaries_of_nested_values_are_stored_as_their_values() {
        let key = Box::new(DataType::Int16);
        let inner = DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8));
        let of_dictionary = DataType::Dictionary(key.clone(), Box::new(inner.clone()));
        assert_eq!(stored_as(&of_dictionary), Some(inner.clone()));
        assert!(stored_reshaped(&of_dictionary));
        // A flat dictionary is Parquet's own.
        assert_eq!(stored_as(&inner), None);
        assert!(!stored_reshaped(&inner));
        let point = DataType::Struct(vec![Field::new("x", DataType::Float64, true)].into());
        let of_struct = DataType::Dictionary(key.clone(), Box::new(point.clone()));
        assert_eq!(stored_as(&of_struct), Some(point.clone()));
        // Nested twice: the innermost values.
        let twice = DataType::Dictionary(key, Box::new(of_struct));
        assert_eq!(stored_as(&twice), Some(point));
    }
}
