//! Table schema: columns with stable field ids, at the top level and (`nested`) for every
//! field inside a struct, list or map. Data files store values by field id, so a rename or
//! reorder touches only the manifest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, FieldRef, Schema as ArrowSchema, SchemaRef};

use super::blob::BlobColumn;
use super::schema_change::FieldPath;

use crate::error::{Error, Result};

pub use super::nested::{field_id_of, FieldId, PARQUET_FIELD_ID_META_KEY};

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
    /// A default that is an expression rather than a value (`now()`): SQL text each INSERT
    /// plans and evaluates. At most one of it and `default_value` is set.
    pub default_expression: Option<String>,
    /// The column's Arrow field metadata as given, natal's own keys left out.
    pub metadata: BTreeMap<String, String>,
    /// For a blob column (a Binary or LargeBinary column declared so): how its values are
    /// placed. Data files hold its values as descriptors ([`super::descriptor_type`]).
    pub blob: Option<BlobColumn>,
    /// The Arrow metadata of fields inside it, by nested field id, natal's own keys left
    /// out; only fields that have some.
    pub nested_metadata: BTreeMap<FieldId, BTreeMap<String, String>>,
}

impl Field {
    /// A nullable column without a default, its nested fields not yet given ids (see
    /// `Schema::assign_nested_ids`).
    pub fn new(id: FieldId, name: impl Into<String>, data_type: DataType) -> Self {
        Self {
            id,
            name: name.into(),
            data_type,
            nullable: true,
            default_value: None,
            nested_ids: Vec::new(),
            legacy_nested_ids: Vec::new(),
            default_expression: None,
            metadata: BTreeMap::new(),
            blob: None,
            nested_metadata: BTreeMap::new(),
        }
    }

    /// The column as users see it: its name, type, nullability and metadata.
    pub fn to_arrow(&self) -> ArrowField {
        let mut metadata: HashMap<String, String> = self.metadata.clone().into_iter().collect();
        // A blob column says so, with its thresholds: a table made from it makes one too.
        metadata.extend(self.blob.iter().flat_map(BlobColumn::to_metadata));
        ArrowField::new(&self.name, self.arrow_type(), self.nullable).with_metadata(metadata)
    }

    /// Its type as users see it: the kept metadata on its nested fields.
    pub fn arrow_type(&self) -> DataType {
        if self.nested_metadata.is_empty() {
            return self.data_type.clone();
        }
        let mut ids = self.nested_ids.iter();
        super::nested::map_fields(&self.data_type, &mut |f| match ids
            .next()
            .and_then(|id| self.nested_metadata.get(id))
        {
            Some(kept) => f.clone().with_metadata(kept.clone().into_iter().collect()),
            None => f.clone(),
        })
    }

    /// The fields inside it, depth first, a field before the fields inside it.
    pub fn nested_fields(&self) -> Vec<NestedField> {
        let mut out = Vec::new();
        walk(
            &self.file_type(),
            std::slice::from_ref(&self.name),
            self.id,
            &mut out,
        );
        out
    }

    /// The type a read of its descriptors without their inline bytes gives (a blob column;
    /// [`super::blob::lean_descriptor_type`]); its [`Self::file_type`] otherwise.
    pub fn lean_file_type(&self) -> DataType {
        match self.blob {
            Some(_) => super::blob::lean_descriptor_type(&self.data_type),
            None => self.file_type(),
        }
    }

    /// Its type as data files hold it: each nested field tagged with its field id.
    pub fn file_type(&self) -> DataType {
        if self.blob.is_some() {
            return super::blob::descriptor_type(&self.data_type);
        }
        if let Some(stored) = super::stored_type::stored_as(&self.data_type) {
            return stored;
        }
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

/// A field inside a column, as `t$schema` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct NestedField {
    /// Its path: the column's name, then each name inward (a list's element is `element`,
    /// a map's key and value `key` and `value`).
    pub path: FieldPath,
    /// Its field id.
    pub id: FieldId,
    /// The id of the field (or column) it lies in.
    pub parent_id: FieldId,
    /// Its place among the fields of its parent.
    pub position: u32,
    /// Its type.
    pub data_type: DataType,
    /// Whether it may hold nulls.
    pub nullable: bool,
}

fn walk(data_type: &DataType, path: &[String], parent_id: FieldId, out: &mut Vec<NestedField>) {
    let (children, names): (Vec<&FieldRef>, Vec<String>) = match data_type {
        DataType::Struct(fields) => fields.iter().map(|f| (f, f.name().clone())).unzip(),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            (vec![f], vec!["element".to_string()])
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) => kv
                .iter()
                .zip(["key", "value"])
                .map(|(f, n)| (f, n.to_string()))
                .unzip(),
            _ => return,
        },
        _ => return,
    };
    for (position, (child, name)) in children.into_iter().zip(names).enumerate() {
        let Some(id) = field_id_of(child) else {
            continue;
        };
        let mut inner = path.to_vec();
        inner.push(name);
        out.push(NestedField {
            path: FieldPath::new(inner.clone()),
            id,
            parent_id,
            position: position as u32,
            data_type: super::nested::untagged(child.data_type()),
            nullable: child.is_nullable(),
        });
        walk(child.data_type(), &inner, id, out);
    }
}

/// A table's columns, with field ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// The columns, in table order.
    pub fields: Vec<Field>,
    /// Field ids are never reused: the next column added gets this id.
    pub next_field_id: FieldId,
    /// The Arrow schema metadata as given.
    pub metadata: BTreeMap<String, String>,
    /// PRIMARY KEY and UNIQUE constraints: reported to query engines, not enforced.
    pub constraints: Vec<Constraint>,
}

/// A constraint a table declares over some of its columns. natal keeps and reports it (a
/// query planner may rely on it, as DataFusion's functional dependencies do) but does not
/// enforce it, as DataFusion does not for its own tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// Which kind it is.
    pub kind: ConstraintKind,
    /// The constrained columns, in the constraint's order.
    pub field_ids: Vec<FieldId>,
}

/// The kinds of [`Constraint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintKind {
    /// `PRIMARY KEY (...)`: unique and not null.
    PrimaryKey,
    /// `UNIQUE (...)`.
    Unique,
}

/// The metadata natal keeps of a field or schema: all but its own keys (a data file's
/// Parquet field ids, which natal writes itself; a blob column's declaration, kept as such).
pub(crate) fn kept_metadata(metadata: &HashMap<String, String>) -> BTreeMap<String, String> {
    metadata
        .iter()
        .filter(|(key, _)| {
            key.as_str() != PARQUET_FIELD_ID_META_KEY
                && !key.starts_with(super::blob::BLOB_META_KEY)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The metadata natal keeps of each of `data_type`'s nested fields, depth first.
fn nested_metadata_in(data_type: &DataType) -> Vec<BTreeMap<String, String>> {
    let mut kept = Vec::new();
    super::nested::map_fields(data_type, &mut |f| {
        kept.push(kept_metadata(f.metadata()));
        f.clone()
    });
    kept
}

/// Names natal reserves for its system columns.
pub const RESERVED_COLUMNS: [&str; 2] = ["_rowid", "_rowaddr"];

impl Schema {
    /// Assigns field ids 0.. to an Arrow schema's top-level fields.
    pub fn from_arrow(schema: &ArrowSchema) -> Result<Self> {
        let mut fields = Vec::with_capacity(schema.fields().len());
        let mut nested_metadata = Vec::with_capacity(schema.fields().len());
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
            // Nested fields' metadata is kept by field id, once they have ids.
            let data_type = super::nested::plain(field.data_type());
            if !super::type_text::stores_exactly(&data_type) {
                return Err(Error::invalid(format!(
                    "column {} has type {}, which natal's manifest cannot hold exactly",
                    field.name(),
                    field.data_type()
                )));
            }

            nested_metadata.push(nested_metadata_in(field.data_type()));
            fields.push(Field {
                nullable: field.is_nullable(),
                metadata: kept_metadata(field.metadata()),
                blob: BlobColumn::from_field(field)?,
                ..Field::new(id as u32, field.name(), data_type)
            });
        }
        // A table of no columns (SQL's `CREATE TABLE empty`) holds no rows until it has one.
        let mut schema = Self {
            next_field_id: fields.len() as u32,
            fields,
            metadata: kept_metadata(schema.metadata()),
            constraints: Vec::new(),
        };
        schema.assign_nested_ids()?;
        for (field, kept) in schema.fields.iter_mut().zip(nested_metadata) {
            field.nested_metadata = field
                .nested_ids
                .iter()
                .zip(kept)
                .filter(|(_, metadata)| !metadata.is_empty())
                .map(|(id, metadata)| (*id, metadata))
                .collect();
        }
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

    /// The user-facing Arrow schema: no field ids, the metadata given to natal.
    pub fn to_arrow(&self) -> SchemaRef {
        Arc::new(
            ArrowSchema::new(self.fields.iter().map(Field::to_arrow).collect::<Vec<_>>())
                .with_metadata(self.metadata.clone().into_iter().collect()),
        )
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

    /// True when it keeps default expressions, metadata or constraints (writer flag
    /// [`super::flags::SCHEMA_DECLARATIONS`]).
    pub fn declares_more(&self) -> bool {
        !self.metadata.is_empty()
            || !self.constraints.is_empty()
            || self.fields.iter().any(|f| {
                f.default_expression.is_some()
                    || !f.metadata.is_empty()
                    || !f.nested_metadata.is_empty()
            })
    }

    /// True when some column is a blob column (its data files have sidecars).
    pub fn has_blob_columns(&self) -> bool {
        self.fields.iter().any(|f| f.blob.is_some())
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
            // Metadata on nested fields (a Parquet file's field ids) is not the type.
            if mine.data_type != *theirs.data_type()
                && mine.data_type != super::nested::plain(theirs.data_type())
            {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_fields_are_listed_by_path_with_their_parents() {
        let data_type = super::super::nested::tests::nested();
        let mut column = Field::new(3, "c", data_type);
        column.nested_ids = (10..18).collect();
        let listed = column.nested_fields();
        let paths: Vec<String> = listed.iter().map(|f| f.path.to_string()).collect();
        assert_eq!(
            paths,
            [
                "c.a",
                "c.points",
                "c.points.element",
                "c.points.element.x",
                "c.points.element.y",
                "c.m",
                "c.m.key",
                "c.m.value"
            ]
        );
        let parents: Vec<FieldId> = listed.iter().map(|f| f.parent_id).collect();
        assert_eq!(parents, [3, 3, 11, 12, 12, 3, 15, 15]);
        assert_eq!(listed[4].position, 1);
        assert!(!listed[6].nullable);
    }
}
