//! The schema between its domain type and protobuf: types as text (`type_text`), nested
//! field ids checked against the types they tag. A manifest written before nested fields had
//! ids gets them here, deterministically (from its `next_field_id` on), and remembers them
//! as the ids its older files are read by.

use std::collections::{BTreeMap, HashSet};

use arrow::datatypes::DataType;

use super::blob::BlobColumn;
use super::nested::nested_count;
use super::proto;
use super::schema::{Constraint, ConstraintKind, Field, Schema};
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
            if f.default_value.is_some() && f.default_expression.is_some() {
                return Err(corrupt(format!(
                    "column {} has both a default value and a default expression",
                    f.name
                )));
            }
            let blob = match f.blob {
                Some(b) => {
                    if !matches!(data_type, DataType::Binary | DataType::LargeBinary) {
                        return Err(corrupt(format!(
                            "blob column {} has type {data_type}, not Binary or LargeBinary",
                            f.name
                        )));
                    }
                    let blob = BlobColumn {
                        inline_limit: b.inline_limit,
                        dedicated_threshold: b.dedicated_threshold,
                        pack_file_size: b.pack_file_size,
                    };
                    blob.validate(&f.name).map_err(|e| corrupt(e.to_string()))?;
                    Some(blob)
                }
                None => None,
            };
            Ok(Field {
                blob,
                id: f.id,
                name: f.name,
                data_type,
                nullable: f.nullable,
                default_value: f.default_value,
                nested_ids: f.nested_field_ids,
                legacy_nested_ids: f.legacy_nested_field_ids,
                default_expression: f.default_expression,
                metadata: metadata_from_proto(f.metadata),
                nested_metadata: f
                    .nested_metadata
                    .into_iter()
                    .map(|n| (n.field_id, metadata_from_proto(n.metadata)))
                    .collect(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let constraints = raw
        .constraints
        .into_iter()
        .map(|c| {
            let kind = match proto::constraint::Kind::try_from(c.kind) {
                Ok(proto::constraint::Kind::PrimaryKey) => ConstraintKind::PrimaryKey,
                Ok(proto::constraint::Kind::Unique) => ConstraintKind::Unique,
                Err(_) => return Err(corrupt(format!("unknown constraint kind {}", c.kind))),
            };
            let unknown = c
                .field_ids
                .iter()
                .find(|id| !fields.iter().any(|f| f.id == **id));
            if c.field_ids.is_empty() || unknown.is_some() {
                return Err(corrupt(format!(
                    "a {kind:?} constraint over field ids {:?}, not all the schema's",
                    c.field_ids
                )));
            }
            Ok(Constraint {
                kind,
                field_ids: c.field_ids,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut schema = Schema {
        fields,
        next_field_id: raw.next_field_id,
        metadata: metadata_from_proto(raw.metadata),
        constraints,
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
        if let Some(id) = field
            .nested_metadata
            .keys()
            .find(|id| !field.nested_ids.contains(id))
        {
            return Err(corrupt(format!(
                "column {} keeps metadata for field id {id}, not a field inside it",
                field.name
            )));
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
                    default_expression: f.default_expression.clone(),
                    metadata: metadata_to_proto(&f.metadata),
                    nested_metadata: f
                        .nested_metadata
                        .iter()
                        .map(|(id, metadata)| proto::NestedMetadata {
                            field_id: *id,
                            metadata: metadata_to_proto(metadata),
                        })
                        .collect(),
                    blob: f.blob.map(|b| proto::BlobColumn {
                        inline_limit: b.inline_limit,
                        dedicated_threshold: b.dedicated_threshold,
                        pack_file_size: b.pack_file_size,
                    }),
                }
            })
            .collect(),
        next_field_id: schema.next_field_id,
        metadata: metadata_to_proto(&schema.metadata),
        constraints: schema
            .constraints
            .iter()
            .map(|c| proto::Constraint {
                kind: match c.kind {
                    ConstraintKind::PrimaryKey => proto::constraint::Kind::PrimaryKey,
                    ConstraintKind::Unique => proto::constraint::Kind::Unique,
                } as i32,
                field_ids: c.field_ids.clone(),
            })
            .collect(),
    }
}

/// Metadata as the manifest keeps it: sorted by key, so equal schemas encode alike.
fn metadata_to_proto(metadata: &BTreeMap<String, String>) -> Vec<proto::KeyValue> {
    metadata
        .iter()
        .map(|(key, value)| proto::KeyValue {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

fn metadata_from_proto(entries: Vec<proto::KeyValue>) -> BTreeMap<String, String> {
    entries.into_iter().map(|e| (e.key, e.value)).collect()
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
                default_expression: None,
                metadata: vec![],
                blob: None,
                nested_metadata: vec![],
            }],
            next_field_id,
            metadata: vec![],
            constraints: vec![],
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

    #[test]
    fn declarations_and_stored_types_read_back_and_bad_ones_are_corrupt() {
        let mut schema = schema_from_proto(raw(vec![1, 2], 3), "m").unwrap();
        schema.fields[0].default_expression = Some("named_struct('a', 1, 'b', 'x')".into());
        schema.fields[0].metadata = [("k".to_string(), "v".to_string())].into();
        schema.metadata = [("origin".to_string(), "here".to_string())].into();
        schema.fields[0].nested_metadata =
            [(2, [("unit".to_string(), "px".to_string())].into())].into();
        schema.constraints.push(Constraint {
            kind: ConstraintKind::Unique,
            field_ids: vec![0],
        });
        let mut interval = Field::new(
            3,
            "span",
            arrow::datatypes::DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
        );
        interval.default_value = Some("1 day".into());
        schema.fields.push(interval);
        schema.next_field_id = 4;
        assert!(schema.declares_more());
        let again = schema_from_proto(schema_to_proto(&schema), "m").unwrap();
        assert_eq!(again, schema);

        let mut both = raw(vec![1, 2], 3);
        both.fields[0].default_value = Some("x".into());
        both.fields[0].default_expression = Some("now()".into());
        let mut stray = raw(vec![1, 2], 3);
        stray.constraints.push(proto::Constraint {
            kind: 0,
            field_ids: vec![7],
        });
        let mut unknown_kind = raw(vec![1, 2], 3);
        unknown_kind.constraints.push(proto::Constraint {
            kind: 9,
            field_ids: vec![0],
        });
        let mut not_inside = raw(vec![1, 2], 3);
        not_inside.fields[0]
            .nested_metadata
            .push(proto::NestedMetadata {
                field_id: 0,
                metadata: vec![],
            });
        for bad in [both, stray, unknown_kind, not_inside] {
            let error = schema_from_proto(bad, "m").unwrap_err();
            assert!(matches!(error, Error::Corrupt { .. }), "{error}");
        }
    }
}
