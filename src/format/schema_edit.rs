//! What a [`SchemaChange`] makes of a schema, or why it cannot: at the top level a change
//! edits the column list; inside a column it edits the column's type, whose nested fields
//! keep their field ids (`nested`) through renames, moves and widenings, and whose added
//! fields take fresh ones.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, FieldRef, Fields};

use super::nested::{ids_in, nested_count, tagged, untagged, with_id};
use super::schema::{Field, FieldId, Schema, RESERVED_COLUMNS};
use super::schema_change::{widens, Position, SchemaChange};
use crate::error::{Error, Result};

fn refused(change: &SchemaChange, reason: impl Into<String>) -> Error {
    Error::SchemaChange {
        change: change.to_string(),
        reason: reason.into(),
    }
}

fn not_a_widening(change: &SchemaChange, from: &DataType, to: &DataType) -> Error {
    refused(
        change,
        format!(
            "{from} to {to} is not a lossless widening (natal widens integers to wider \
             integers of the same signedness, small integers and floats to Float64, decimals \
             to more digits at the same scale, integers to decimals with room for their \
             digits, Date32 to Timestamp(µs), TIMESTAMP(6) in SQL)"
        ),
    )
}

impl Schema {
    /// The schema `change` makes of this one; `None` when it would change nothing (the
    /// column already has that type or is already nullable, or is already there).
    pub fn changed_by(&self, change: &SchemaChange) -> Result<Option<Schema>> {
        if change.path().is_column() {
            return self.column_changed_by(change);
        }
        let column = change.path().column();
        let at = self
            .fields
            .iter()
            .position(|f| f.name == column)
            .ok_or_else(|| refused(change, format!("no column named '{column}'")))?;
        let field = &self.fields[at];
        let mut next_field_id = self.next_field_id;
        let edited = edit_nested(
            &field.file_type(),
            &change.path().names()[1..],
            column,
            &mut |kind, siblings, name| {
                edit_siblings(change, kind, siblings, name, &mut next_field_id)
            },
        )
        .map_err(|reason| match reason {
            Edit::Refused(reason) => refused(change, reason),
            Edit::Failed(e) => e,
        })?;
        let Some(edited) = edited else {
            return Ok(None);
        };
        let mut next = self.clone();
        next.next_field_id = next_field_id;
        let column = &mut next.fields[at];
        column.nested_ids = ids_in(&edited)
            .into_iter()
            .collect::<Option<Vec<FieldId>>>()
            .ok_or_else(|| Error::internal("a nested field lost its field id"))?;
        column.data_type = untagged(&edited);
        // A dropped nested field's metadata goes with it.
        let kept_ids = &column.nested_ids;
        column.nested_metadata.retain(|id, _| kept_ids.contains(id));
        if !super::type_text::stores_exactly(&column.data_type) {
            return Err(refused(
                change,
                format!(
                    "natal's manifest cannot hold the type {} exactly",
                    column.data_type
                ),
            ));
        }
        Ok(Some(next))
    }

    /// [`Self::changed_by`] for a change to a top-level column.
    fn column_changed_by(&self, change: &SchemaChange) -> Result<Option<Schema>> {
        let mut next = self.clone();
        let position = |name: &str| {
            self.fields
                .iter()
                .position(|f| f.name == name)
                .ok_or_else(|| refused(change, format!("no column named '{name}'")))
        };
        let check_new_name = |name: &str| {
            if RESERVED_COLUMNS.contains(&name) {
                return Err(refused(
                    change,
                    format!("'{name}' is a natal system column"),
                ));
            }
            if name.is_empty() {
                return Err(refused(change, "a column needs a name"));
            }
            if self.field_by_name(name).is_some() {
                return Err(refused(change, format!("a column named '{name}' exists")));
            }
            Ok(())
        };
        let name = change.path().column();
        match change {
            SchemaChange::AddColumn { data_type, .. } => {
                check_new_name(name)?;
                if !super::type_text::stores_exactly(data_type) {
                    return Err(refused(
                        change,
                        format!("natal's manifest cannot hold the type {data_type} exactly"),
                    ));
                }
                next.fields
                    .push(Field::new(next.next_field_id, name, untagged(data_type)));
                next.next_field_id = next
                    .next_field_id
                    .checked_add(1)
                    .ok_or_else(|| refused(change, "the table has used every field id"))?;
                next.assign_nested_ids()
                    .map_err(|_| refused(change, "the table has used every field id"))?;
            }
            SchemaChange::AddBlobColumn { blob, .. } => {
                check_new_name(name)?;
                blob.validate(name)
                    .map_err(|e| refused(change, e.to_string()))?;
                let mut field = Field::new(next.next_field_id, name, DataType::LargeBinary);
                field.blob = Some(*blob);
                next.fields.push(field);
                next.next_field_id = next
                    .next_field_id
                    .checked_add(1)
                    .ok_or_else(|| refused(change, "the table has used every field id"))?;
            }
            SchemaChange::SetBlobOptions { blob, .. } => {
                let at = position(name)?;
                if next.fields[at].blob.is_none() {
                    return Err(refused(change, format!("{name} is not a blob column")));
                }
                blob.validate(name)
                    .map_err(|e| refused(change, e.to_string()))?;
                if next.fields[at].blob == Some(*blob) {
                    return Ok(None);
                }
                next.fields[at].blob = Some(*blob);
            }
            SchemaChange::DropColumn { .. } => {
                let at = position(name)?;
                if self.fields.len() == 1 {
                    return Err(refused(change, "a table keeps at least one column"));
                }
                let dropped = next.fields.remove(at).id;
                // A key without one of its columns is no longer the key (SQL drops it too).
                next.constraints.retain(|c| !c.field_ids.contains(&dropped));
            }
            SchemaChange::RenameColumn { to, .. } => {
                let at = position(name)?;
                if name == to {
                    return Ok(None);
                }
                check_new_name(to)?;
                next.fields[at].name = to.clone();
            }
            SchemaChange::SetDataType { data_type, .. } => {
                let at = position(name)?;
                let from = &self.fields[at].data_type;
                if from == data_type {
                    return Ok(None);
                }
                if !widens(from, data_type) {
                    return Err(not_a_widening(change, from, data_type));
                }
                next.fields[at].data_type = data_type.clone();
            }
            SchemaChange::DropNotNull { .. } => {
                let at = position(name)?;
                if self.fields[at].nullable {
                    return Ok(None);
                }
                next.fields[at].nullable = true;
            }
            SchemaChange::Move { to, .. } => {
                let at = position(name)?;
                let names: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
                let Some(order) = moved(&names, at, to).map_err(|e| refused(change, e))? else {
                    return Ok(None);
                };
                next.fields = order.into_iter().map(|i| self.fields[i].clone()).collect();
            }
        }
        Ok(Some(next))
    }
}

/// The order of `names` once the one at `at` moves `to`; `None` if it is there already.
fn moved(
    names: &[&str],
    at: usize,
    to: &Position,
) -> std::result::Result<Option<Vec<usize>>, String> {
    let mut order: Vec<usize> = (0..names.len()).filter(|&i| i != at).collect();
    let insert_at = match to {
        Position::First => 0,
        Position::After(sibling) if sibling == names[at] => {
            return Err(format!("'{sibling}' cannot move after itself"))
        }
        Position::After(sibling) => {
            let of = names
                .iter()
                .position(|n| n == sibling)
                .ok_or_else(|| format!("no '{sibling}' to move after"))?;
            order.iter().position(|&i| i == of).map_or(0, |p| p + 1)
        }
    };
    order.insert(insert_at, at);
    Ok((!order.iter().copied().eq(0..names.len())).then_some(order))
}

/// What holds the fields a nested change edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Struct,
    /// A list's single element.
    List,
    /// A map's key and value.
    Map,
}

/// An edit of the fields holding a path's last name: what holds them, the fields, the name;
/// whether it changed anything.
type EditFields<'a> =
    dyn FnMut(Holder, &mut Vec<FieldRef>, &str) -> std::result::Result<bool, Edit> + 'a;

/// Why an edit did not happen: a refusal of the change (its reason), or another error.
enum Edit {
    Refused(String),
    Failed(Error),
}

impl From<String> for Edit {
    fn from(reason: String) -> Self {
        Edit::Refused(reason)
    }
}

/// The fields inside `data_type` a path can name, and what holds them.
fn children_of(data_type: &DataType) -> Option<(Holder, Vec<FieldRef>)> {
    match data_type {
        DataType::Struct(fields) => Some((Holder::Struct, fields.iter().cloned().collect())),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some((Holder::List, vec![f.clone()]))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(key_value) => Some((Holder::Map, key_value.iter().cloned().collect())),
            _ => None,
        },
        _ => None,
    }
}

/// `data_type` with its nested fields `children` in place of its own.
fn with_children(data_type: &DataType, children: Vec<FieldRef>) -> DataType {
    let one = || children[0].clone();
    match data_type {
        DataType::Struct(_) => DataType::Struct(Fields::from(children)),
        DataType::List(_) => DataType::List(one()),
        DataType::LargeList(_) => DataType::LargeList(one()),
        DataType::FixedSizeList(_, size) => DataType::FixedSizeList(one(), *size),
        DataType::Map(entries, sorted) => {
            let entries = entries
                .as_ref()
                .clone()
                .with_data_type(DataType::Struct(Fields::from(children)));
            DataType::Map(Arc::new(entries), *sorted)
        }
        other => other.clone(),
    }
}

/// Which of `children` (held by `holder`) `name` names: a struct's field by its name, a
/// list's element as `element` or its Arrow name, a map's `key` and `value` (or their Arrow
/// names).
fn child_named(holder: Holder, children: &[FieldRef], name: &str) -> Option<usize> {
    let by_name = || children.iter().position(|f| f.name() == name);
    match (holder, name) {
        (Holder::Struct, _) => by_name(),
        (Holder::List, "element") => Some(0),
        (Holder::Map, "key") => Some(0),
        (Holder::Map, "value") => Some(1),
        _ => by_name(),
    }
}

/// `data_type` (tagged with field ids) with `edit` applied to the fields holding the last
/// name of `path`, found by the names before it; `None` if the edit changed nothing.
/// `within` is what `data_type` is the type of, for errors.
fn edit_nested(
    data_type: &DataType,
    path: &[String],
    within: &str,
    edit: &mut EditFields<'_>,
) -> std::result::Result<Option<DataType>, Edit> {
    let (name, inward) = path
        .split_first()
        .ok_or_else(|| Edit::Failed(Error::internal("an empty field path")))?;
    let Some((holder, mut children)) = children_of(data_type) else {
        return Err(Edit::Refused(format!(
            "{within} is a {}, which has no field '{name}'",
            untagged(data_type)
        )));
    };
    if inward.is_empty() {
        return Ok(edit(holder, &mut children, name)?.then(|| with_children(data_type, children)));
    }
    let at = child_named(holder, &children, name)
        .ok_or_else(|| Edit::Refused(format!("{within} has no field '{name}'")))?;
    let inner = edit_nested(
        children[at].data_type(),
        inward,
        &format!("{within}.{name}"),
        edit,
    )?;
    Ok(inner.map(|inner| {
        children[at] = Arc::new(children[at].as_ref().clone().with_data_type(inner));
        with_children(data_type, children)
    }))
}

/// Applies `change` to `siblings` (held by `holder`) at the one named `name`; false if it
/// changed nothing. Added fields take ids from `next_field_id` on.
fn edit_siblings(
    change: &SchemaChange,
    holder: Holder,
    siblings: &mut Vec<FieldRef>,
    name: &str,
    next_field_id: &mut FieldId,
) -> std::result::Result<bool, Edit> {
    let struct_only = |what: &str| -> std::result::Result<(), Edit> {
        match holder {
            Holder::Struct => Ok(()),
            Holder::List => Err(format!("a list's element cannot be {what}").into()),
            Holder::Map => Err(format!("a map's key and value cannot be {what}").into()),
        }
    };
    let new_name = |name: &str, siblings: &[FieldRef]| -> std::result::Result<(), Edit> {
        if name.is_empty() {
            return Err("a field needs a name".to_string().into());
        }
        if siblings.iter().any(|f| f.name() == name) {
            return Err(format!("a field named '{name}' exists there").into());
        }
        Ok(())
    };
    let find = |siblings: &[FieldRef]| {
        child_named(holder, siblings, name)
            .ok_or_else(|| Edit::Refused(format!("no field named '{name}'")))
    };
    match change {
        SchemaChange::AddColumn { data_type, .. } => {
            struct_only("added to")?;
            new_name(name, siblings)?;
            let plain = untagged(data_type);
            let count = nested_count(&plain) as u32 + 1;
            let first = *next_field_id;
            *next_field_id = first
                .checked_add(count)
                .ok_or_else(|| "the table has used every field id".to_string())?;
            let inner: Vec<FieldId> = (first + 1..*next_field_id).collect();
            let field = ArrowField::new(name, tagged(&plain, &inner), true);
            siblings.push(Arc::new(with_id(&field, first)));
        }
        SchemaChange::AddBlobColumn { .. } | SchemaChange::SetBlobOptions { .. } => {
            return Err(
                "a blob column is a column of its own, not a field inside one"
                    .to_string()
                    .into(),
            );
        }
        SchemaChange::DropColumn { .. } => {
            struct_only("dropped")?;
            let at = find(siblings)?;
            if siblings.len() == 1 {
                return Err("a struct keeps at least one field".to_string().into());
            }
            siblings.remove(at);
        }
        SchemaChange::RenameColumn { to, .. } => {
            struct_only("renamed")?;
            let at = find(siblings)?;
            let field = siblings[at].as_ref().clone();
            if field.name() == to {
                return Ok(false);
            }
            new_name(to, siblings)?;
            siblings[at] = Arc::new(field.with_name(to.clone()));
        }
        SchemaChange::SetDataType { data_type, .. } => {
            let at = find(siblings)?;
            let field = siblings[at].as_ref().clone();
            let from = field.data_type();
            if from == data_type {
                return Ok(false);
            }
            if !widens(from, data_type) {
                return Err(Edit::Failed(not_a_widening(change, from, data_type)));
            }
            siblings[at] = Arc::new(field.with_data_type(data_type.clone()));
        }
        SchemaChange::DropNotNull { .. } => {
            let at = find(siblings)?;
            let field = siblings[at].as_ref().clone();
            if field.is_nullable() {
                return Ok(false);
            }
            if holder == Holder::Map && at == 0 {
                return Err("a map's keys cannot be null".to_string().into());
            }
            siblings[at] = Arc::new(field.with_nullable(true));
        }
        SchemaChange::Move { to, .. } => {
            struct_only("moved")?;
            let at = find(siblings)?;
            let names: Vec<&str> = siblings.iter().map(|f| f.name().as_str()).collect();
            let Some(order) = moved(&names, at, to)? else {
                return Ok(false);
            };
            *siblings = order.into_iter().map(|i| siblings[i].clone()).collect();
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::from_arrow(&arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", DataType::Int32, false),
            arrow::datatypes::Field::new("v", DataType::Utf8, true),
        ]))
        .unwrap()
    }

    #[test]
    fn added_columns_take_fresh_ids_never_reused_after_a_drop() {
        let s = schema();
        let add = |name: &str| SchemaChange::AddColumn {
            name: name.into(),
            data_type: DataType::Int64,
        };
        let s = s.changed_by(&add("c")).unwrap().unwrap();
        assert_eq!(s.field_by_name("c").unwrap().id, 2);
        assert!(s.field_by_name("c").unwrap().nullable);
        let s = s
            .changed_by(&SchemaChange::DropColumn { name: "c".into() })
            .unwrap()
            .unwrap();
        let s = s.changed_by(&add("c")).unwrap().unwrap();
        assert_eq!(s.field_by_name("c").unwrap().id, 3);
        assert_eq!(s.next_field_id, 4);
    }

    #[test]
    fn renames_keep_the_field_id() {
        let s = schema()
            .changed_by(&SchemaChange::RenameColumn {
                from: "v".into(),
                to: "label".into(),
            })
            .unwrap()
            .unwrap();
        assert_eq!(s.field_by_name("label").unwrap().id, 1);
        assert!(s.field_by_name("v").is_none());
    }

    #[test]
    fn every_refused_change_is_a_typed_error_naming_it() {
        let s = schema();
        let refused = [
            SchemaChange::DropColumn {
                name: "nope".into(),
            },
            SchemaChange::RenameColumn {
                from: "id".into(),
                to: "v".into(),
            },
            SchemaChange::RenameColumn {
                from: "id".into(),
                to: "_rowid".into(),
            },
            SchemaChange::AddColumn {
                name: "v".into(),
                data_type: DataType::Int8,
            },
            SchemaChange::SetDataType {
                name: "id".into(),
                data_type: DataType::Int16,
            },
            SchemaChange::SetDataType {
                name: "v".into(),
                data_type: DataType::Int64,
            },
        ];
        for change in refused {
            match s.changed_by(&change) {
                Err(Error::SchemaChange { change: named, .. }) => {
                    assert_eq!(named, change.to_string())
                }
                other => panic!("{change}: {other:?}"),
            }
        }
        let one = s
            .changed_by(&SchemaChange::DropColumn { name: "v".into() })
            .unwrap()
            .unwrap();
        assert!(matches!(
            one.changed_by(&SchemaChange::DropColumn { name: "id".into() }),
            Err(Error::SchemaChange { .. })
        ));
    }

    fn nested_schema() -> Schema {
        use arrow::datatypes::Field as F;
        let inner = DataType::Struct(vec![F::new("c", DataType::Utf8, true)].into());
        let s = DataType::Struct(
            vec![
                F::new("a", DataType::Int32, false),
                F::new("b", inner, true),
            ]
            .into(),
        );
        Schema::from_arrow(&arrow::datatypes::Schema::new(vec![
            F::new("k", DataType::Int64, false),
            F::new("s", s, true),
        ]))
        .unwrap()
    }

    #[test]
    fn nested_fields_keep_their_ids_and_added_ones_take_fresh_ones() {
        let s = nested_schema();
        // k 0, s 1; s.a 2, s.b 3, s.b.c 4.
        assert_eq!(s.field_by_name("s").unwrap().nested_ids, [2, 3, 4]);
        assert_eq!(s.next_field_id, 5);
        let path = |p: &str| crate::format::FieldPath::parse(p).unwrap();
        let changes = [
            SchemaChange::RenameColumn {
                from: path("s.b.c"),
                to: "cc".into(),
            },
            SchemaChange::AddColumn {
                name: path("s.b.d"),
                data_type: DataType::Struct(
                    vec![arrow::datatypes::Field::new("e", DataType::Int8, true)].into(),
                ),
            },
            SchemaChange::Move {
                name: path("s.b"),
                to: Position::First,
            },
            SchemaChange::SetDataType {
                name: path("s.a"),
                data_type: DataType::Int64,
            },
            SchemaChange::DropNotNull { name: path("s.a") },
        ];
        let mut now = s.clone();
        for change in &changes {
            now = now.changed_by(change).unwrap().unwrap();
        }
        let column = now.field_by_name("s").unwrap();
        // s.b (3) first, then its c (4), its new d (5) and d.e (6); then s.a (2).
        assert_eq!(column.nested_ids, [3, 4, 5, 6, 2]);
        assert_eq!(now.next_field_id, 7);
        let listed: Vec<String> = column
            .nested_fields()
            .iter()
            .map(|f| format!("{}:{}:{}", f.path, f.id, f.data_type))
            .collect();
        assert_eq!(
            listed,
            [
                "s.b:3:Struct(\"cc\": Utf8, \"d\": Struct(\"e\": Int8))",
                "s.b.cc:4:Utf8",
                "s.b.d:5:Struct(\"e\": Int8)",
                "s.b.d.e:6:Int8",
                "s.a:2:Int64"
            ]
        );
        // A change to where things are already changes nothing.
        assert_eq!(now.changed_by(&changes[2]).unwrap(), None);
        assert_eq!(now.changed_by(&changes[4]).unwrap(), None);
    }

    #[test]
    fn field_paths_read_and_print_quoted_names() {
        use crate::format::FieldPath;
        let path = FieldPath::parse(r#"s."a.b"."say ""hi""".c"#).unwrap();
        assert_eq!(path.names(), ["s", "a.b", "say \"hi\"", "c"]);
        assert_eq!(FieldPath::parse(&path.to_string()).unwrap(), path);
        for bad in ["", "a..b", "a.", "\"a", "a\"b", "\"a\"b"] {
            assert!(FieldPath::parse(bad).is_err(), "{bad}");
        }
        assert!(FieldPath::from("a.b").is_column());
    }
}
