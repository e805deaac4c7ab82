//! The schema between its domain type and protobuf: types as text (`type_text`), nested
//! field ids checked against the types they tag. A manifest written before nested fields had
//! ids gets them here, deterministically (from its `next_field_id` on), and remembers them
//! as the ids its older files are read by.

use std::collections::HashSet;

use super::nested::nested_count;
use super::proto;
use super::schema::{Field, Schema};
use super::type_text::{type_from_text, type_to_text};
use crate::error::{Error, Result};

pub(super) fn schema_from_proto(raw: proto::Schema, path: &str) -> Result<Schema> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    let fields = raw
        .fields
        .into_iter()
        .map(|f| {
            let data_type =
                type_from_text(&f.data_type, &f.nested_field_names).map_err(&corrupt)?;
            let count = nested_count(&data_type);
            let ids = f.nested_field_ids.len();
            if ids != 0 && ids != count {
                return Err(corrupt(format!(
                    "column {} has {ids} nested field ids for a type of {count} nested fields",
                    f.name
                )));
            }
            Ok(Field {
                id: f.id,
                name: f.name,
                data_type,
                nullable: f.nullable,
                default_value: f.default_value,
                nested_ids: f.nested_field_ids,
                legacy_nested_ids: f.legacy_nested_field_ids,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut schema = Schema {
        fields,
        next_field_id: raw.next_field_id,
    };
    let mut seen = HashSet::new();
    for field in &schema.fields {
        for &id in std::iter::once(&field.id).chain(&field.nested_ids) {
            if id >= schema.next_field_id || !seen.insert(id) {
                return Err(corrupt(format!(
                    "field id {id} (column {}) is used twice or not below next_field_id {}",
                    field.name, schema.next_field_id
                )));
            }
        }
    }
    // Written before nested fields had ids: their files carry none, and are read by the
    // ids given now, by position.
    let upgraded = schema
        .assign_nested_ids()
        .map_err(|e| corrupt(e.to_string()))?;
    for field in &mut schema.fields {
        if upgraded.contains(&field.id) {
            field.legacy_nested_ids = field.nested_ids.clone();
        }
    }
    Ok(schema)
}

pub(super) fn schema_to_proto(schema: &Schema) -> proto::Schema {
    proto::Schema {
        fields: schema
            .fields
            .iter()
            .map(|f| {
                let (data_type, nested_field_names) = type_to_text(&f.data_type);
                proto::Field {
                    id: f.id,
                    name: f.name.clone(),
                    data_type,
                    nullable: f.nullable,
                    nested_field_names,
                    default_value: f.default_value.clone(),
                    nested_field_ids: f.nested_ids.clone(),
                    legacy_nested_field_ids: f.legacy_nested_ids.clone(),
                }
            })
            .collect(),
        next_field_id: schema.next_field_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(nested_field_ids: Vec<u32>, next_field_id: u32) -> proto::Schema {
        proto::Schema {
            fields: vec![proto::Field {
                id: 0,
                name: "s".into(),
                data_type: "Struct(\"a\": Int32, \"b\": Utf8)".into(),
                nullable: true,
                nested_field_names: vec![],
                default_value: None,
                nested_field_ids,
                legacy_nested_field_ids: vec![],
            }],
            next_field_id,
        }
    }

    #[test]
    fn nested_ids_are_checked_and_given_to_manifests_that_have_none() {
        let schema = schema_from_proto(raw(vec![1, 2], 3), "m").unwrap();
        assert_eq!(schema.fields[0].nested_ids, [1, 2]);
        assert!(schema.fields[0].legacy_nested_ids.is_empty());
        for bad in [
            raw(vec![1], 3),
            raw(vec![1, 1], 3),
            raw(vec![0, 1], 3),
            raw(vec![1, 2], 2),
        ] {
            let error = schema_from_proto(bad, "m").unwrap_err();
            assert!(matches!(error, Error::Corrupt { .. }), "{error}");
        }
        // Written before nested ids: given ids from next_field_id on, kept as the legacy
        // ids its files are read by, and the same on every read.
        let old = schema_from_proto(raw(vec![], 1), "m").unwrap();
        assert_eq!(old.fields[0].nested_ids, [1, 2]);
        assert_eq!(old.fields[0].legacy_nested_ids, [1, 2]);
        assert_eq!(old.next_field_id, 3);
        let again = schema_from_proto(schema_to_proto(&old), "m").unwrap();
        assert_eq!(again, old);
    }
}
