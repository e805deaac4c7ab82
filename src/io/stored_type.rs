//! Columns of types Parquet has no encoding for, to and from the type data files hold them
//! as (`format::stored_as`): a month-day-nano interval as 16 little-endian bytes, a union as
//! a struct of type ids and row-aligned children, a dictionary of nested values as those
//! values row by row, a vector as its components' bytes (and validity). A stored column that does not fit its declared type (a type id no
//! child has, a type-id column with nulls, other children) is an Arrow error here, which the
//! data-file reader reports as `Corrupt` naming the file.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    make_array, Array, ArrayData, ArrayRef, AsArray, BinaryArray, BooleanBufferBuilder,
    FixedSizeBinaryArray, FixedSizeListArray, Float32Array, IntervalMonthDayNanoArray, StructArray,
    UInt32Array, UInt64Array, UnionArray,
};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::compute::{cast, cast_with_options, take, CastOptions};
use arrow::datatypes::{
    DataType, Float32Type, Int8Type, IntervalMonthDayNano, IntervalUnit, UnionFields,
};
use arrow::error::ArrowError;
use arrow::row::{RowConverter, SortField};

use crate::error::{Error, Result};
use crate::format::{
    stored_as, vector_bytes, MONTH_DAY_NANO_BYTES, VECTOR_COMPONENTS, VECTOR_NULL_COMPONENTS,
};

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
        DataType::Union(fields, _) => union_to_stored(column.as_union(), fields),
        DataType::Dictionary(..) if stored_as(column.data_type()).is_some() => {
            let dictionary = column.as_any_dictionary();
            let values = take(dictionary.values().as_ref(), dictionary.keys(), None)?;
            to_stored(&values)
        }
        DataType::FixedSizeList(..) => match vector_bytes(column.data_type()) {
            Some(width) => vector_to_bytes(column.as_fixed_size_list(), width),
            None => Ok(column.clone()),
        },
        _ => Ok(column.clone()),
    }
}

/// A vector column as its components' little-endian bytes (a row's in one value) and, for
/// each row with a null component, its components' validity bits.
fn vector_to_bytes(list: &FixedSizeListArray, width: i32) -> Result<ArrayRef> {
    let Some(DataType::Struct(stored)) = stored_as(list.data_type()) else {
        return Err(Error::internal("a vector is stored as a struct"));
    };
    let n = list.value_length() as usize;
    let values = list.values().as_primitive::<Float32Type>();
    let null_components: BinaryArray = match values.nulls() {
        Some(components) if components.null_count() > 0 => (0..list.len())
            .map(|row| {
                let valid = |d: usize| components.is_valid(row * n + d);
                let any_null = list.is_valid(row) && (0..n).any(|d| !valid(d));
                any_null.then(|| {
                    let mut bits = vec![0u8; n.div_ceil(8)];
                    for d in (0..n).filter(|d| valid(*d)) {
                        bits[d / 8] |= 1 << (d % 8);
                    }
                    bits
                })
            })
            .collect(),
        _ => BinaryArray::new_null(list.len()),
    };
    let bytes = match cfg!(target_endian = "little") {
        // The components' own buffer: Arrow's native order is the stored one.
        true => values.values().inner().clone(),
        false => (values.values().iter())
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>()
            .into(),
    };
    let components = FixedSizeBinaryArray::try_new(width, bytes, list.nulls().cloned())?;
    let columns: Vec<ArrayRef> = vec![Arc::new(components), Arc::new(null_components)];
    Ok(Arc::new(StructArray::try_new(
        stored,
        columns,
        list.nulls().cloned(),
    )?))
}

/// Vectors a data file holds as bytes (see [`vector_to_bytes`]) as `data_type`.
fn vector_from_bytes(stored: &StructArray, data_type: &DataType) -> Result<ArrayRef> {
    let (DataType::FixedSizeList(item, n), Some(width)) = (data_type, vector_bytes(data_type))
    else {
        return Err(Error::internal("vectors are fixed-size lists"));
    };
    let n = *n as usize;
    let components = (stored.column_by_name(VECTOR_COMPONENTS))
        .and_then(|c| c.as_fixed_size_binary_opt())
        .filter(|c| c.value_length() == width);
    let null_components =
        (stored.column_by_name(VECTOR_NULL_COMPONENTS)).and_then(|c| c.as_binary_opt::<i32>());
    let (Some(components), Some(null_components)) = (components, null_components) else {
        return Err(damaged(format!("a stored {data_type} lacks its columns")));
    };
    let count = stored.len() * n;
    let bytes = components.values();
    if bytes.len() < count * 4 {
        return Err(damaged(format!(
            "{} bytes hold no {} vectors of {n} components",
            bytes.len(),
            stored.len()
        )));
    }
    let aligned = bytes.as_ptr().align_offset(std::mem::align_of::<f32>()) == 0;
    let values: ScalarBuffer<f32> = if aligned && cfg!(target_endian = "little") {
        ScalarBuffer::new(bytes.clone(), 0, count)
    } else {
        (bytes.as_slice()[..count * 4].chunks_exact(4))
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let nulls = match null_components.null_count() == null_components.len() {
        true => None,
        false => {
            let mut validity = BooleanBufferBuilder::new(count);
            validity.append_n(count, true);
            for (row, bits) in null_components.iter().enumerate() {
                let Some(bits) = bits else { continue };
                if bits.len() != n.div_ceil(8) {
                    return Err(damaged(format!(
                        "a stored {data_type}'s row {row} has {} bytes of component validity",
                        bits.len()
                    )));
                }
                for d in 0..n {
                    validity.set_bit(row * n + d, bits[d / 8] & (1 << (d % 8)) != 0);
                }
            }
            Some(NullBuffer::new(validity.finish()))
        }
    };
    let values = Arc::new(Float32Array::new(values, nulls));
    let vectors =
        FixedSizeListArray::try_new(item.clone(), n as i32, values, stored.nulls().cloned())?;
    Ok(Arc::new(vectors))
}

/// A union as a struct of its type ids and, per child, the rows of that type at their row.
fn union_to_stored(union: &UnionArray, fields: &UnionFields) -> Result<ArrayRef> {
    let Some(DataType::Struct(stored)) = stored_as(union.data_type()) else {
        return Err(Error::internal("a union is stored as a struct"));
    };
    let type_ids = union.type_ids();
    let mut columns: Vec<ArrayRef> = vec![Arc::new(arrow::array::Int8Array::new(
        type_ids.clone(),
        None,
    ))];
    for (type_id, _) in fields.iter() {
        let child = union.child(type_id);
        let aligned = match union.offsets() {
            // Sparse: the child is aligned with the rows already.
            None => child.clone(),
            Some(offsets) => {
                let at: UInt32Array = (type_ids.iter().zip(offsets.iter()))
                    .map(|(&t, &o)| (t == type_id).then_some(o as u32))
                    .collect();
                take(child.as_ref(), &at, None)?
            }
        };
        columns.push(aligned);
    }
    Ok(Arc::new(StructArray::try_new(stored, columns, None)?))
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
        (DataType::Struct(_), DataType::Union(fields, _)) => {
            union_from_stored(column.as_struct(), fields, data_type)
        }
        (DataType::Struct(_), DataType::FixedSizeList(..)) if vector_bytes(data_type).is_some() => {
            vector_from_bytes(column.as_struct(), data_type)
        }
        (held, DataType::Dictionary(key, values)) if stored_as(data_type).is_some() => {
            let values = if held == values.as_ref() {
                column.clone()
            } else {
                from_stored(column, values)?
            };
            dictionary_of(&values, key)
        }
        (held, _) => Err(Error::internal(format!(
            "a column held as {held} is not stored {data_type}"
        ))),
    }
}

/// A data-file column that does not hold what its type says: `Corrupt` once its file is named.
fn damaged(reason: String) -> Error {
    Error::Arrow(ArrowError::InvalidArgumentError(reason))
}

fn union_from_stored(
    stored: &StructArray,
    fields: &UnionFields,
    data_type: &DataType,
) -> Result<ArrayRef> {
    if stored.num_columns() != fields.len() + 1 || stored.null_count() > 0 {
        return Err(damaged(format!(
            "a stored {data_type} has {} columns and {} null rows",
            stored.num_columns(),
            stored.null_count()
        )));
    }
    let type_ids = match stored.column(0).as_primitive_opt::<Int8Type>() {
        Some(ids) if ids.null_count() == 0 => ids.values().clone(),
        _ => {
            return Err(damaged(format!(
                "a stored {data_type}'s type ids are not Int8 without nulls"
            )))
        }
    };
    if let Some(stray) = type_ids
        .iter()
        .find(|&&t| !fields.iter().any(|(id, _)| id == t))
    {
        return Err(damaged(format!(
            "a stored {data_type} holds type id {stray}, which none of its children has"
        )));
    }
    let mut children = Vec::with_capacity(fields.len());
    let dense = matches!(
        data_type,
        DataType::Union(_, arrow::datatypes::UnionMode::Dense)
    );
    let mut offsets = vec![0i32; if dense { type_ids.len() } else { 0 }];
    for (position, (type_id, field)) in fields.iter().enumerate() {
        let mut child = stored.column(position + 1).clone();
        if child.data_type() != field.data_type() {
            child = cast(&child, field.data_type())?;
        }
        if dense {
            let rows: Vec<u32> = (type_ids.iter().enumerate())
                .filter(|(_, &t)| t == type_id)
                .map(|(row, _)| row as u32)
                .collect();
            for (at, &row) in rows.iter().enumerate() {
                offsets[row as usize] = at as i32;
            }
            child = take(child.as_ref(), &UInt32Array::from(rows), None)?;
        }
        children.push(child);
    }
    let offsets = dense.then(|| ScalarBuffer::from(offsets));
    Ok(Arc::new(UnionArray::try_new(
        fields.clone(),
        type_ids,
        offsets,
        children,
    )?))
}

/// `values` as a dictionary with keys of type `key`: values equal row for row share a key,
/// a null row has a null key. More distinct values than `key` can number is an error.
fn dictionary_of(values: &ArrayRef, key: &DataType) -> Result<ArrayRef> {
    let converter = RowConverter::new(vec![SortField::new(values.data_type().clone())])?;
    let rows = converter.convert_columns(std::slice::from_ref(values))?;
    let mut seen = HashMap::new();
    let mut firsts: Vec<u32> = Vec::new();
    let keys: UInt64Array = (0..values.len())
        .map(|i| {
            if values.is_null(i) {
                return None;
            }
            let next = firsts.len() as u64;
            let key = *seen.entry(rows.row(i)).or_insert(next);
            if key == next {
                firsts.push(i as u32);
            }
            Some(key)
        })
        .collect();
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    let keys = cast_with_options(&keys, key, &strict).map_err(|_| {
        Error::invalid(format!(
            "{} distinct values read together do not fit a dictionary with {key} keys",
            firsts.len()
        ))
    })?;
    let dictionary_values = take(values.as_ref(), &UInt32Array::from(firsts), None)?;
    let keys = keys.to_data();
    let data = ArrayData::builder(DataType::Dictionary(
        Box::new(key.clone()),
        Box::new(values.data_type().clone()),
    ))
    .len(keys.len())
    .add_buffer(keys.buffers()[0].clone())
    .nulls(keys.nulls().cloned())
    .add_child_data(dictionary_values.to_data())
    .build()?;
    Ok(make_array(data))
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

    fn union_fields() -> UnionFields {
        UnionFields::try_new(
            [0, 5],
            [
                arrow::datatypes::Field::new("int", DataType::Int32, true),
                arrow::datatypes::Field::new("text", DataType::Utf8, true),
            ],
        )
        .unwrap()
    }

    /// The union's values row by row, as text.
    fn shown(column: &ArrayRef) -> Vec<String> {
        let options = arrow::util::display::FormatOptions::default();
        let formatter =
            arrow::util::display::ArrayFormatter::try_new(column.as_ref(), &options).unwrap();
        (0..column.len())
            .map(|i| formatter.value(i).to_string())
            .collect()
    }

    #[test]
    fn sparse_and_dense_unions_round_trip_sliced_too() {
        use arrow::array::{Int32Array, StringArray};
        let ids = ScalarBuffer::from(vec![0i8, 5, 0, 5, 0]);
        let sparse: ArrayRef = Arc::new(
            UnionArray::try_new(
                union_fields(),
                ids.clone(),
                None,
                vec![
                    Arc::new(Int32Array::from(vec![Some(1), None, None, None, Some(3)])),
                    Arc::new(StringArray::from(vec![None, Some("a"), None, None, None])),
                ],
            )
            .unwrap(),
        );
        // Dense, its children out of row order and one value shared by two rows.
        let dense: ArrayRef = Arc::new(
            UnionArray::try_new(
                union_fields(),
                ids,
                Some(ScalarBuffer::from(vec![2, 0, 1, 0, 2])),
                vec![
                    Arc::new(Int32Array::from(vec![Some(9), None, Some(1)])),
                    Arc::new(StringArray::from(vec![Some("a")])),
                ],
            )
            .unwrap(),
        );
        for column in [
            sparse.clone(),
            sparse.slice(1, 3),
            dense.clone(),
            dense.slice(2, 3),
        ] {
            let stored = to_stored(&column).unwrap();
            assert_eq!(
                Some(stored.data_type().clone()),
                stored_as(column.data_type())
            );
            let back = from_stored(&stored, column.data_type()).unwrap();
            assert_eq!(back.data_type(), column.data_type());
            assert_eq!(shown(&back), shown(&column));
        }
        assert_eq!(
            shown(&dense),
            ["{int=1}", "{text=a}", "{int=}", "{text=a}", "{int=1}"]
        );
    }

    #[test]
    fn a_stored_union_that_does_not_fit_its_type_is_damage() {
        use arrow::array::{Int32Array, Int8Array, StringArray};
        let union = DataType::Union(union_fields(), arrow::datatypes::UnionMode::Sparse);
        let Some(DataType::Struct(stored)) = stored_as(&union) else {
            panic!("a union is stored as a struct")
        };
        // As a damaged file could declare it: type ids that may be null.
        let stored: arrow::datatypes::Fields = (stored.iter().enumerate())
            .map(|(i, f)| Arc::new(f.as_ref().clone().with_nullable(i == 0 || f.is_nullable())))
            .collect();
        let with_ids = |ids: Int8Array| -> ArrayRef {
            Arc::new(StructArray::new(
                stored.clone(),
                vec![
                    Arc::new(ids),
                    Arc::new(Int32Array::from(vec![1, 2])),
                    Arc::new(StringArray::from(vec!["a", "b"])),
                ],
                None,
            ))
        };
        for ids in [
            Int8Array::from(vec![0, 3]),
            Int8Array::from(vec![Some(0), None]),
        ] {
            let error = from_stored(&with_ids(ids), &union).unwrap_err();
            assert!(matches!(error, Error::Arrow(_)), "{error}");
        }
        assert!(from_stored(&with_ids(Int8Array::from(vec![5, 0])), &union).is_ok());
    }

    #[test]
    fn dictionaries_of_structs_and_dictionaries_round_trip() {
        use arrow::array::{DictionaryArray, Float64Array, Int8Array, StringArray};
        use arrow::datatypes::Int16Type;
        let point = StructArray::from(vec![(
            Arc::new(arrow::datatypes::Field::new("x", DataType::Float64, true)),
            Arc::new(Float64Array::from(vec![1.0, 2.0])) as ArrayRef,
        )]);
        let keys = arrow::array::Int16Array::from(vec![Some(1), None, Some(1), Some(0)]);
        let of_struct: ArrayRef =
            Arc::new(DictionaryArray::<Int16Type>::try_new(keys.clone(), Arc::new(point)).unwrap());
        let inner: ArrayRef = Arc::new(
            DictionaryArray::<arrow::datatypes::Int8Type>::try_new(
                Int8Array::from(vec![0, 1]),
                Arc::new(StringArray::from(vec!["p", "q"])),
            )
            .unwrap(),
        );
        let of_dictionary: ArrayRef =
            Arc::new(DictionaryArray::<Int16Type>::try_new(keys, inner).unwrap());
        for column in [of_struct.clone(), of_dictionary, of_struct.slice(1, 3)] {
            let stored = to_stored(&column).unwrap();
            assert_eq!(
                Some(stored.data_type().clone()),
                stored_as(column.data_type())
            );
            let back = from_stored(&stored, column.data_type()).unwrap();
            assert_eq!(back.data_type(), column.data_type());
            assert_eq!(shown(&back), shown(&column));
            assert_eq!(back.null_count(), column.null_count());
        }
    }

    #[test]
    fn more_distinct_values_than_keys_can_number_is_refused() {
        use arrow::array::Float64Array;
        let values: Vec<f64> = (0..300).map(f64::from).collect();
        let point: ArrayRef = Arc::new(StructArray::from(vec![(
            Arc::new(arrow::datatypes::Field::new("x", DataType::Float64, true)),
            Arc::new(Float64Array::from(values)) as ArrayRef,
        )]));
        let declared = DataType::Dictionary(
            Box::new(DataType::Int8),
            Box::new(point.data_type().clone()),
        );
        let error = from_stored(&point, &declared).unwrap_err();
        assert!(matches!(error, Error::InvalidInput(_)), "{error}");
    }

    #[test]
    fn vectors_round_trip_through_their_bytes_with_null_rows_and_components() {
        use arrow::datatypes::Field;
        for nullable in [true, false] {
            let item = Arc::new(Field::new("item", DataType::Float32, nullable));
            let components: Vec<Option<f32>> = (0..15)
                .map(|i| (!nullable || i != 4).then_some(i as f32 * 0.5 - 2.0))
                .collect();
            let values = Arc::new(Float32Array::from(components));
            let rows = NullBuffer::from(vec![true, true, false, true, true]);
            let list = FixedSizeListArray::new(item, 3, values, Some(rows));
            let column: ArrayRef = Arc::new(list);
            for (offset, len) in [(0, 5), (1, 3), (2, 2)] {
                let column = column.slice(offset, len);
                let stored = to_stored(&column).unwrap();
                assert_eq!(
                    Some(stored.data_type().clone()),
                    stored_as(column.data_type())
                );
                let back = from_stored(&stored, column.data_type()).unwrap();
                assert_eq!(&back, &column, "nullable {nullable}, {offset}+{len}");
            }
        }
    }

    #[test]
    fn a_stored_vector_that_does_not_fit_its_type_is_damage() {
        use arrow::datatypes::Field;
        let item = Arc::new(Field::new("item", DataType::Float32, true));
        let vector = DataType::FixedSizeList(item, 2);
        let Some(DataType::Struct(fields)) = stored_as(&vector) else {
            panic!("a vector is stored as a struct")
        };
        let stored = |validity: &[u8]| -> ArrayRef {
            let bytes = FixedSizeBinaryArray::try_new(8, vec![0u8; 8].into(), None).unwrap();
            let bits = BinaryArray::from(vec![Some(validity)]);
            let columns: Vec<ArrayRef> = vec![Arc::new(bytes), Arc::new(bits)];
            Arc::new(StructArray::try_new(fields.clone(), columns, None).unwrap())
        };
        // Two components take one byte of validity; two bytes do not fit.
        assert!(from_stored(&stored(&[0b10]), &vector).is_ok());
        let error = from_stored(&stored(&[1, 1]), &vector).unwrap_err();
        assert!(matches!(error, Error::Arrow(_)), "{error}");
    }
}
