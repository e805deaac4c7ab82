//! A column's Arrow type as the manifest stores it: Arrow's own text (`Display` and
//! `FromStr`). Arrow's parser keeps the backslash of an escaped quote and cannot read a
//! backslash in a nested field name, so a type whose text does not read back as itself is
//! stored with its nested field names apart, depth first, and placeholders in the text.
//! Reader flag [`super::flags::NESTED_FIELD_NAMES`] marks a manifest that holds one: a reader
//! without it would show the placeholders.

use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef, UnionFields};

/// The text of `data_type`, and its nested field names when they are stored apart (empty
/// when the text alone reads back as the type).
pub(super) fn type_to_text(data_type: &DataType) -> (String, Vec<String>) {
    let text = data_type.to_string();
    if DataType::from_str(&text).ok().as_ref() == Some(data_type) {
        return (text, Vec::new());
    }
    let mut names = Vec::new();
    let placeholders = rename(data_type, &mut |name: &str| {
        names.push(name.to_string());
        format!("n{}", names.len() - 1)
    });
    (placeholders.to_string(), names)
}

/// True when `data_type`'s nested field names must be stored apart from its text.
pub(super) fn names_apart(data_type: &DataType) -> bool {
    !type_to_text(data_type).1.is_empty()
}

/// The type `text` and `names` (from [`type_to_text`]) stand for.
pub(super) fn type_from_text(text: &str, names: &[String]) -> Result<DataType, String> {
    let data_type = DataType::from_str(text).map_err(|e| format!("bad type '{text}': {e}"))?;
    if names.is_empty() {
        return Ok(data_type);
    }
    let mut stored = names.iter();
    let mut too_few = false;
    let named = rename(&data_type, &mut |_: &str| {
        stored.next().cloned().unwrap_or_else(|| {
            too_few = true;
            String::new()
        })
    });
    if too_few || stored.next().is_some() {
        return Err(format!(
            "{} nested field names stored for type '{text}', which has another number",
            names.len()
        ));
    }
    Ok(named)
}

/// True when `data_type` is stored exactly: its text and names read back as it.
pub(super) fn stores_exactly(data_type: &DataType) -> bool {
    let (text, names) = type_to_text(data_type);
    type_from_text(&text, &names).ok().as_ref() == Some(data_type)
}

/// `data_type` with every nested field renamed by `name` (depth first, a field before the
/// fields inside it).
fn rename(data_type: &DataType, name: &mut impl FnMut(&str) -> String) -> DataType {
    match data_type {
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| rename_field(f, name)).collect())
        }
        DataType::List(f) => DataType::List(rename_field(f, name)),
        DataType::LargeList(f) => DataType::LargeList(rename_field(f, name)),
        DataType::ListView(f) => DataType::ListView(rename_field(f, name)),
        DataType::LargeListView(f) => DataType::LargeListView(rename_field(f, name)),
        DataType::FixedSizeList(f, size) => DataType::FixedSizeList(rename_field(f, name), *size),
        DataType::Map(f, sorted) => DataType::Map(rename_field(f, name), *sorted),
        DataType::Dictionary(key, value) => {
            DataType::Dictionary(key.clone(), Box::new(rename(value, name)))
        }
        DataType::Union(fields, mode) => {
            let (ids, renamed): (Vec<i8>, Vec<FieldRef>) = (fields.iter())
                .map(|(id, f)| (id, rename_field(f, name)))
                .unzip();
            let renamed = UnionFields::try_new(ids, renamed).unwrap_or_else(|_| fields.clone());
            DataType::Union(renamed, *mode)
        }
        DataType::RunEndEncoded(ends, values) => {
            DataType::RunEndEncoded(rename_field(ends, name), rename_field(values, name))
        }
        other => other.clone(),
    }
}

fn rename_field(field: &FieldRef, name: &mut impl FnMut(&str) -> String) -> FieldRef {
    let renamed = name(field.name());
    let data_type = rename(field.data_type(), name);
    Arc::new(
        field
            .as_ref()
            .clone()
            .with_name(renamed)
            .with_data_type(data_type),
    )
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Fields};

    use super::*;

    #[test]
    fn nested_names_with_quotes_and_backslashes_read_back() {
        let inner = Field::new("c\\d", DataType::Int32, true);
        let data_type = DataType::Struct(Fields::from(vec![
            Field::new("a\"b", DataType::Utf8, false),
            Field::new("plain", DataType::Struct(vec![inner].into()), true),
            Field::new_list("l", Field::new("it\"em", DataType::Int64, true), true),
        ]));
        let (text, names) = type_to_text(&data_type);
        assert_eq!(names, ["a\"b", "plain", "c\\d", "l", "it\"em"]);
        assert_eq!(type_from_text(&text, &names).unwrap(), data_type);
        assert!(stores_exactly(&data_type));
        assert!(type_from_text(&text, &names[1..]).is_err());

        let simple = DataType::Struct(vec![Field::new("a b, c: d", DataType::Int8, true)].into());
        assert_eq!(type_to_text(&simple), (simple.to_string(), Vec::new()));
        assert!(!names_apart(&simple));
    }
}
