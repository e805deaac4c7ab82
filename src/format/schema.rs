//! Table schema: columns with stable field ids, at the top level and (`nested`) for every
//! field inside a struct, list or map. Data files store values by field id, so a rename or
//! reorder touches only the manifest.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, Schema as ArrowSchema, SchemaRef};

use crate::error::{Error, Result};

pub use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// The field id an Arrow field of a data file carries in its Parquet metadata, if any.
pub fn field_id_of(field: &ArrowField) -> Option<u32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// A column's stable id: data files store values by it, so a rename or reorder touches only
/// the manifest. Never reused (the schema's `next_field_id` is the high-water mark).
pub type FieldId = u32;

/// A column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its stable id.
    pub id: FieldId,
    /// Its current name.
    pub name: String,
    /// Its Arrow type.
    pub data_type: DataType,
    /// Whether it may hold nulls.
    pub nullable: bool,
    /// The value rows written without this column get (as text cast to its type; SQL's
    /// `DEFAULT`); `None`: NULL.
    pub default_value: Option<String>,
    /// The field ids of the fields inside it (struct children, list elements, map keys and
    /// values), depth first, a field before the fields inside it; empty for a primitive
    /// column.
    pub nested_ids: Vec<FieldId>,
    /// For a nested column of a table written before nested fields had ids: the ids they
    /// were given then, in the order of the column's type of then. Files written before
    /// carry none, and are read by these. Empty for every other column.
    pub legacy_nested_ids: Vec<FieldId>,
}

impl Field {
    /// A nullable column without a default, its nested fields not yet given ids (see
    /// [`Schema::assign_nested_ids`]).
    pub fn new(id: FieldId, name: impl Into<String>, data_type: DataType) -> Self {
        Self {
            id,
            name: name.into(),
            data_type,
            nullable: true,
            default_value: None,
            nested_ids: Vec::new(),
            legacy_nested_ids: Vec::new(),
        }
    }

    /// Its type as data files hold it: each nested field tagged with its field id.
    pub fn file_type(&self) -> DataType {
        if self.nested_ids.is_empty() {
            return self.data_type.clone();
        }
        super::nested::tagged(&self.data_type, &self.nested_ids)
    }

    /// Its default value as a one-row array of its type, if it has one: the stored text
    /// cast (strictly: text that does not read as the type is an error naming the column).
    pub fn default_array(&self) -> Result<Option<arrow::array::ArrayRef>> {
        let Some(text) = &self.default_value else {
            return Ok(None);
        };
        let options = arrow::compute::CastOptions {
            safe: false,
            ..Default::default()
        };
        let array = arrow::array::StringArray::from(vec![text.as_str()]);
        arrow::compute::cast_with_options(&array, &self.data_type, &options)
            .map(Some)
            .map_err(|e| {
                Error::invalid(format!(
                    "column {}'s default '{text}' is not a {}: {e}",
                    self.name, self.data_type
                ))
            })
    }
}

/// A table's columns, with field ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// The columns, in table order.
    pub fields: Vec<Field>,
    /// Field ids are never reused: the next column added gets this id.
    pub next_field_id: FieldId,
}

/// Names natal reserves for its system columns.
pub const RESERVED_COLUMNS: [&str; 2] = ["_rowid", "_rowaddr"];

impl Schema {
    /// Assigns field ids 0.. to an Arrow schema's top-level fields.
    pub fn from_arrow(schema: &ArrowSchema) -> Result<Self> {
        let mut fields = Vec::with_capacity(schema.fields().len());
        for (id, field) in schema.fields().iter().enumerate() {
            if RESERVED_COLUMNS.contains(&field.name().as_str()) {
                return Err(Error::invalid(format!(
                    "column name '{}' is reserved for natal's system columns",
                    field.name()
                )));
            }
            if fields.iter().any(|f: &Field| f.name == *field.name()) {
                return Err(Error::invalid(format!(
                    "duplicate column name '{}'",
                    field.name()
                )));
            }
            if !super::type_text::stores_exactly(field.data_type()) {
                return Err(Error::invalid(format!(
                    "column {} has type {}, which natal's manifest cannot hold exactly",
                    field.name(),
                    field.data_type()
                )));
            }
            let data_type = super::nested::untagged(field.data_type());
            fields.push(Field {
                nullable: field.is_nullable(),
                ..Field::new(id as u32, field.name(), data_type)
            });
        }
        if fields.is_empty() {
            return Err(Error::invalid("a table needs at least one column"));
        }
        let mut schema = Self {
            next_field_id: fields.len() as u32,
            fields,
        };
        schema.assign_nested_ids()?;
        Ok(schema)
    }

    /// Gives the nested fields of each column that has none their ids, from
    /// `next_field_id` on; returns the columns that got them.
    pub(crate) fn assign_nested_ids(&mut self) -> Result<Vec<FieldId>> {
        let mut assigned = Vec::new();
        for field in &mut self.fields {
            let count = super::nested::nested_count(&field.data_type);
            if count == 0 || !field.nested_ids.is_empty() {
                continue;
            }
            let first = self.next_field_id;
            self.next_field_id = u32::try_from(count)
                .ok()
                .and_then(|n| first.checked_add(n))
                .ok_or_else(|| Error::invalid("the table has used every field id"))?;
            field.nested_ids = (first..self.next_field_id).collect();
            assigned.push(field.id);
        }
        Ok(assigned)
    }

    /// The user-facing Arrow schema (no field-id metadata).
    pub fn to_arrow(&self) -> SchemaRef {
        Arc::new(ArrowSchema::new(
            self.fields
                .iter()
                .map(|f| ArrowField::new(&f.name, f.data_type.clone(), f.nullable))
                .collect::<Vec<_>>(),
        ))
    }

    /// The Arrow schema data files are written with: field ids in Parquet metadata.
    pub fn to_arrow_with_field_ids(&self) -> SchemaRef {
        Arc::new(ArrowSchema::new(
            self.fields
                .iter()
                .map(|f| {
                    ArrowField::new(&f.name, f.file_type(), f.nullable).with_metadata(
                        [(PARQUET_FIELD_ID_META_KEY.to_string(), f.id.to_string())].into(),
                    )
                })
                .collect::<Vec<_>>(),
        ))
    }

    /// The column named `name`.
    pub fn field_by_name(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The column with field id `id`.
    pub fn field_by_id(&self, id: u32) -> Option<&Field> {
        self.fields.iter().find(|f| f.id == id)
    }

    /// Every field id, in table order.
    pub fn field_ids(&self) -> Vec<u32> {
        self.fields.iter().map(|f| f.id).collect()
    }

    /// Checks that `other` (an input's schema) can be written to this table: same column
    /// names in the same order with the same types; a nullable input may feed a NOT NULL
    /// column only if it holds no nulls, which the writer checks per batch.
    pub fn check_input(&self, other: &ArrowSchema) -> Result<()> {
        if other.fields().len() != self.fields.len() {
            return Err(Error::invalid(format!(
                "schema mismatch: the table has {} columns ({}), the input has {} ({})",
                self.fields.len(),
                self.fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                other.fields().len(),
                other
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            )));
        }
        for (mine, theirs) in self.fields.iter().zip(other.fields()) {
            if mine.name != *theirs.name() {
                return Err(Error::invalid(format!(
                    "schema mismatch: expected column '{}', found '{}'",
                    mine.name,
                    theirs.name()
                )));
            }
            if mine.data_type != *theirs.data_type() {
                return Err(Error::invalid(format!(
                    "schema mismatch: column '{}' has type {}, the input has {}",
                    mine.name,
                    mine.data_type,
                    theirs.data_type()
                )));
            }
        }
        Ok(())
    }
}
