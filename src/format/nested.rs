//! Field ids below the top level (seed 004 "Structs and lists"): every struct child, list
//! element and map key and value has a stable id of its own, so a nested field renamed,
//! moved, dropped or added changes only the manifest, and files are read by id at any depth.
//!
//! A column's nested ids are kept in the order of its type's nested fields, depth first (a
//! field before the fields inside it); a map's entries struct is structure, not a field, and
//! has none. Data files carry them as each Parquet field's field id (Arrow metadata
//! [`PARQUET_FIELD_ID_META_KEY`] on the nested fields of a *tagged* type).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, FieldRef, Fields};

pub use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// A column's or nested field's stable id: data files store values by it, so a rename or
/// reorder touches only the manifest. Never reused (the schema's `next_field_id` is the
/// high-water mark).
pub type FieldId = u32;

/// The field id an Arrow field of a data file carries in its Parquet metadata, if any.
pub fn field_id_of(field: &ArrowField) -> Option<u32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// `data_type` with each field that has an id rebuilt by `visit` (depth first, a field
/// before the fields inside it); the rest of the type kept.
pub(crate) fn map_fields(
    data_type: &DataType,
    visit: &mut impl FnMut(&ArrowField) -> ArrowField,
) -> DataType {
    let mut child = |field: &FieldRef| -> FieldRef {
        let outer = visit(field);
        let inner = map_fields(outer.data_type(), visit);
        Arc::new(outer.with_data_type(inner))
    };
    match data_type {
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(&mut child).collect()),
        DataType::List(f) => DataType::List(child(f)),
        DataType::LargeList(f) => DataType::LargeList(child(f)),
        DataType::FixedSizeList(f, size) => DataType::FixedSizeList(child(f), *size),
        DataType::Map(entries, sorted) => match entries.data_type() {
            DataType::Struct(key_value) => {
                let key_value: Fields = key_value.iter().map(&mut child).collect();
                let entries = entries
                    .as_ref()
                    .clone()
                    .with_data_type(DataType::Struct(key_value));
                DataType::Map(Arc::new(entries), *sorted)
            }
            _ => data_type.clone(),
        },
        other => other.clone(),
    }
}

/// How many fields inside `data_type` have ids of their own.
pub(crate) fn nested_count(data_type: &DataType) -> usize {
    let mut count = 0;
    map_fields(data_type, &mut |f| {
        count += 1;
        f.clone()
    });
    count
}

/// `data_type` with `ids` (depth first, [`nested_count`] of them) as its nested fields'
/// Parquet field ids: the type a data file holds the column as.
pub(crate) fn tagged(data_type: &DataType, ids: &[FieldId]) -> DataType {
    let mut ids = ids.iter();
    map_fields(data_type, &mut |f| match ids.next() {
        Some(id) => with_id(f, *id),
        None => f.clone(),
    })
}

/// `data_type` without field-id metadata at any depth: the type users see.
pub(crate) fn untagged(data_type: &DataType) -> DataType {
    map_fields(data_type, &mut |f| {
        let mut metadata = f.metadata().clone();
        metadata.remove(PARQUET_FIELD_ID_META_KEY);
        f.clone().with_metadata(metadata)
    })
}

/// `data_type` without any metadata on its nested fields (field ids, or a source file's
/// own): the type a table's manifest holds, which keeps none.
pub fn plain(data_type: &DataType) -> DataType {
    map_fields(data_type, &mut |f| {
        f.clone().with_metadata(Default::default())
    })
}

/// The field ids `data_type`'s nested fields carry, depth first (`None` where one has none).
pub(crate) fn ids_in(data_type: &DataType) -> Vec<Option<FieldId>> {
    let mut ids = Vec::new();
    map_fields(data_type, &mut |f| {
        ids.push(field_id_of(f));
        f.clone()
    });
    ids
}

/// `field` with `id` as its Parquet field id.
pub(crate) fn with_id(field: &ArrowField, id: FieldId) -> ArrowField {
    let mut metadata = field.metadata().clone();
    metadata.insert(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string());
    field.clone().with_metadata(metadata)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A struct of an integer, a list of structs and a map: eight nested fields.
    pub(crate) fn nested() -> DataType {
        let point = DataType::Struct(
            vec![
                ArrowField::new("x", DataType::Int32, true),
                ArrowField::new("y", DataType::Utf8, true),
            ]
            .into(),
        );
        DataType::Struct(
            vec![
                ArrowField::new("a", DataType::Int64, true),
                ArrowField::new_list("points", ArrowField::new("item", point, true), true),
                ArrowField::new_map(
                    "m",
                    "entries",
                    ArrowField::new("key", DataType::Utf8, false),
                    ArrowField::new("value", DataType::Int64, true),
                    false,
                    true,
                ),
            ]
            .into(),
        )
    }

    #[test]
    fn ids_go_depth_first_and_skip_map_entries() {
        let data_type = nested();
        // a, points, item, x, y, m, key, value
        assert_eq!(nested_count(&data_type), 8);
        let ids: Vec<FieldId> = (10..18).collect();
        let file_type = tagged(&data_type, &ids);
        assert_eq!(
            ids_in(&file_type),
            ids.iter().copied().map(Some).collect::<Vec<_>>()
        );
        let DataType::Struct(fields) = &file_type else {
            panic!("a struct")
        };
        assert_eq!(super::field_id_of(&fields[1]), Some(11));
        assert_ne!(file_type, data_type);
        assert_eq!(untagged(&file_type), data_type);
        assert!(ids_in(&data_type).iter().all(Option::is_none));
        assert_eq!(nested_count(&DataType::Int64), 0);
    }
}
