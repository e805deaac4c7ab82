//! What a new table declares beyond its columns' names and types: column defaults and
//! PRIMARY KEY / UNIQUE constraints (SQL's `CREATE TABLE t (a INT PRIMARY KEY, b INT
//! DEFAULT 500)`). Arrow field and schema metadata ride on the Arrow schema itself.

use crate::error::{Error, Result};
use crate::format::{Constraint, ConstraintKind, FieldId, Schema};

/// A column's default: what rows written without the column get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnDefault {
    /// A value, as text cast to the column's type (`DEFAULT 500`, `DEFAULT 'text'`).
    Value(String),
    /// An expression each INSERT plans and evaluates (`DEFAULT now()`), as SQL text.
    Expression(String),
}

/// A constraint over columns, named by column: kept and reported to query engines, not
/// enforced (as DataFusion does not enforce them for its own tables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableConstraint {
    /// `PRIMARY KEY (...)`.
    PrimaryKey(Vec<String>),
    /// `UNIQUE (...)`.
    Unique(Vec<String>),
}

/// Defaults and constraints for [`super::Table::create_declared`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declarations {
    /// Columns' defaults, by column name.
    pub defaults: Vec<(String, ColumnDefault)>,
    /// The table's constraints.
    pub constraints: Vec<TableConstraint>,
}

impl Declarations {
    /// Puts the declarations into `schema`; a column that is not there, a value default
    /// that is not of its column's type, or a constraint over no columns is an error.
    pub(crate) fn apply_to(&self, schema: &mut Schema) -> Result<()> {
        for (name, default) in &self.defaults {
            let field = schema
                .fields
                .iter_mut()
                .find(|f| f.name == *name)
                .ok_or_else(|| Error::invalid(format!("a default for no column '{name}'")))?;
            match default {
                ColumnDefault::Value(text) => field.default_value = Some(text.clone()),
                ColumnDefault::Expression(sql) => field.default_expression = Some(sql.clone()),
            }
            field.default_array()?;
        }
        for constraint in &self.constraints {
            let (kind, names) = match constraint {
                TableConstraint::PrimaryKey(names) => (ConstraintKind::PrimaryKey, names),
                TableConstraint::Unique(names) => (ConstraintKind::Unique, names),
            };
            if names.is_empty() {
                return Err(Error::invalid("a constraint needs at least one column"));
            }
            let field_ids = names
                .iter()
                .map(|name| {
                    schema.field_by_name(name).map(|f| f.id).ok_or_else(|| {
                        Error::invalid(format!("a constraint names no column '{name}'"))
                    })
                })
                .collect::<Result<Vec<FieldId>>>()?;
            schema.constraints.push(Constraint { kind, field_ids });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};

    use super::*;

    fn schema() -> Schema {
        Schema::from_arrow(&ArrowSchema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Int32, true),
        ]))
        .expect("a schema")
    }

    #[test]
    fn declarations_land_on_their_columns_by_field_id() {
        let mut s = schema();
        Declarations {
            defaults: vec![
                ("b".into(), ColumnDefault::Value("500".into())),
                ("a".into(), ColumnDefault::Expression("now()".into())),
            ],
            constraints: vec![
                TableConstraint::PrimaryKey(vec!["b".into(), "a".into()]),
                TableConstraint::Unique(vec!["a".into()]),
            ],
        }
        .apply_to(&mut s)
        .expect("applies");
        assert_eq!(s.fields[1].default_value.as_deref(), Some("500"));
        assert_eq!(s.fields[0].default_expression.as_deref(), Some("now()"));
        assert_eq!(s.constraints[0].field_ids, [1, 0]);
        assert_eq!(s.constraints[1].kind, ConstraintKind::Unique);
        assert!(s.declares_more());
    }

    #[test]
    fn declarations_naming_what_is_not_there_are_refused() {
        let refused = |d: Declarations| d.apply_to(&mut schema()).is_err();
        assert!(refused(Declarations {
            defaults: vec![("z".into(), ColumnDefault::Value("1".into()))],
            ..Default::default()
        }));
        assert!(refused(Declarations {
            defaults: vec![("b".into(), ColumnDefault::Value("five".into()))],
            ..Default::default()
        }));
        assert!(refused(Declarations {
            constraints: vec![TableConstraint::Unique(vec!["z".into()])],
            ..Default::default()
        }));
        assert!(refused(Declarations {
            constraints: vec![TableConstraint::PrimaryKey(vec![])],
            ..Default::default()
        }));
    }
}
