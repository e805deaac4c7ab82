//! Schema changes that rewrite no data file (seed 004 "Schema changes"): the new schema a
//! change makes of the old, or why it cannot. Data files hold values by field id, so
//! renames, drops and added nullable columns change only the manifest; a widened column is
//! cast on read, its statistics converted once where the wider type counts otherwise.

use arrow::datatypes::{DataType, TimeUnit};

use super::schema::{Field, Schema, RESERVED_COLUMNS};
use super::stats::StatValue;
use crate::error::{Error, Result};

/// One change to a table's top-level columns.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaChange {
    /// Add a nullable column (last); old rows read NULL.
    AddColumn {
        /// Its name.
        name: String,
        /// Its type.
        data_type: DataType,
    },
    /// Drop a column: it leaves reads now, its bytes at the next compaction.
    DropColumn {
        /// Its name.
        name: String,
    },
    /// Rename a column.
    RenameColumn {
        /// Its name now.
        from: String,
        /// Its new name.
        to: String,
    },
    /// Widen a column's type without loss (see [`widens`]).
    SetDataType {
        /// The column.
        name: String,
        /// Its wider type.
        data_type: DataType,
    },
    /// Let a NOT NULL column hold nulls.
    DropNotNull {
        /// The column.
        name: String,
    },
}

impl std::fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaChange::AddColumn { name, data_type } => {
                write!(f, "ADD COLUMN {name} {data_type}")
            }
            SchemaChange::DropColumn { name } => write!(f, "DROP COLUMN {name}"),
            SchemaChange::RenameColumn { from, to } => write!(f, "RENAME COLUMN {from} TO {to}"),
            SchemaChange::SetDataType { name, data_type } => {
                write!(f, "ALTER COLUMN {name} SET DATA TYPE {data_type}")
            }
            SchemaChange::DropNotNull { name } => write!(f, "ALTER COLUMN {name} DROP NOT NULL"),
        }
    }
}

/// Whether every value of `from` is a value of `to`, read by a cast: Iceberg's and Delta's
/// promotions (integers to wider integers of the same signedness, small integers and
/// float32 to float64, decimal precision at the same scale, integers to decimals with room
/// for their digits, date32 to timestamp(µs) without a time zone).
pub fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let signed_rank = |t: &DataType| match t {
        Int8 => Some(1),
        Int16 => Some(2),
        Int32 => Some(3),
        Int64 => Some(4),
        _ => None,
    };
    let unsigned_rank = |t: &DataType| match t {
        UInt8 => Some(1),
        UInt16 => Some(2),
        UInt32 => Some(3),
        UInt64 => Some(4),
        _ => None,
    };
    let digits = |t: &DataType| match t {
        Int8 => Some(3),
        Int16 => Some(5),
        Int32 => Some(10),
        Int64 => Some(19),
        _ => None,
    };
    match (from, to) {
        (a, b) if signed_rank(a).is_some() && signed_rank(b).is_some() => {
            signed_rank(a) < signed_rank(b)
        }
        (a, b) if unsigned_rank(a).is_some() && unsigned_rank(b).is_some() => {
            unsigned_rank(a) < unsigned_rank(b)
        }
        (Int8 | Int16 | Int32 | Float16 | Float32, Float64) => true,
        (Float16, Float32) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => s1 == s2 && p2 > p1,
        (int, Decimal128(p, s)) => digits(int).is_some_and(|d| i16::from(*p) - i16::from(*s) >= d),
        (Date32, Timestamp(TimeUnit::Microsecond, None)) => true,
        _ => false,
    }
}

/// A statistic of a column written as `from`, in the terms of `to` after a widening; `None`
/// when it cannot be carried (the column then has no bound there, which prunes nothing).
pub fn widen_stat(value: StatValue, from: &DataType, to: &DataType) -> Option<StatValue> {
    const MICROS_PER_DAY: i64 = 86_400_000_000;
    match (from, to, value) {
        (
            DataType::Date32,
            DataType::Timestamp(TimeUnit::Microsecond, None),
            StatValue::Int(days),
        ) => days.checked_mul(MICROS_PER_DAY).map(StatValue::Int),
        // Integers keep their family's value; a float64 or decimal bound of an integer is
        // the same number (pruning casts it to the column's type).
        (_, _, value) => Some(value),
    }
}

fn refused(change: &SchemaChange, reason: impl Into<String>) -> Error {
    Error::SchemaChange {
        change: change.to_string(),
        reason: reason.into(),
    }
}

impl Schema {
    /// The schema `change` makes of this one; `None` when it would change nothing (the
    /// column already has that type or is already nullable).
    pub fn changed_by(&self, change: &SchemaChange) -> Result<Option<Schema>> {
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
        match change {
            SchemaChange::AddColumn { name, data_type } => {
                check_new_name(name)?;
                if !super::type_text::stores_exactly(data_type) {
                    return Err(refused(
                        change,
                        format!("natal's manifest cannot hold the type {data_type} exactly"),
                    ));
                }
                next.fields.push(Field {
                    id: next.next_field_id,
                    name: name.clone(),
                    data_type: data_type.clone(),
                    nullable: true,
                    default_value: None,
                });
                next.next_field_id = next
                    .next_field_id
                    .checked_add(1)
                    .ok_or_else(|| refused(change, "the table has used every field id"))?;
            }
            SchemaChange::DropColumn { name } => {
                let at = position(name)?;
                if self.fields.len() == 1 {
                    return Err(refused(change, "a table keeps at least one column"));
                }
                next.fields.remove(at);
            }
            SchemaChange::RenameColumn { from, to } => {
                let at = position(from)?;
                if from == to {
                    return Ok(None);
                }
                check_new_name(to)?;
                next.fields[at].name = to.clone();
            }
            SchemaChange::SetDataType { name, data_type } => {
                let at = position(name)?;
                let from = &self.fields[at].data_type;
                if from == data_type {
                    return Ok(None);
                }
                if !widens(from, data_type) {
                    return Err(refused(
                        change,
                        format!(
                            "{from} to {data_type} is not a lossless widening (natal widens \
                             integers to wider integers of the same signedness, small \
                             integers and floats to Float64, decimals to more digits at the \
                             same scale, integers to decimals with room for their digits, \
                             Date32 to Timestamp(µs), TIMESTAMP(6) in SQL)"
                        ),
                    ));
                }
                next.fields[at].data_type = data_type.clone();
            }
            SchemaChange::DropNotNull { name } => {
                let at = position(name)?;
                if self.fields[at].nullable {
                    return Ok(None);
                }
                next.fields[at].nullable = true;
            }
        }
        Ok(Some(next))
    }
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

    #[test]
    fn widenings_are_the_lossless_promotions() {
        use DataType::*;
        for (from, to) in [
            (Int8, Int64),
            (Int32, Int64),
            (UInt16, UInt32),
            (Int32, Float64),
            (Float32, Float64),
            (Decimal128(9, 2), Decimal128(12, 2)),
            (Int32, Decimal128(12, 2)),
            (Int64, Decimal128(19, 0)),
            (Date32, Timestamp(TimeUnit::Microsecond, None)),
        ] {
            assert!(widens(&from, &to), "{from} -> {to}");
        }
        for (from, to) in [
            (Int64, Int32),
            (Int32, UInt64),
            (UInt32, Int64),
            (Int64, Float64),
            (Float64, Float32),
            (Decimal128(9, 2), Decimal128(12, 3)),
            (Int32, Decimal128(10, 2)),
            (Date32, Timestamp(TimeUnit::Microsecond, Some("UTC".into()))),
            (Utf8, LargeUtf8),
        ] {
            assert!(!widens(&from, &to), "{from} -> {to}");
        }
    }

    #[test]
    fn a_date_bound_becomes_a_timestamp_bound() {
        let to = DataType::Timestamp(TimeUnit::Microsecond, None);
        assert_eq!(
            widen_stat(StatValue::Int(2), &DataType::Date32, &to),
            Some(StatValue::Int(2 * 86_400_000_000))
        );
        assert_eq!(
            widen_stat(StatValue::Int(i64::MAX), &DataType::Date32, &to),
            None
        );
        assert_eq!(
            widen_stat(StatValue::Int(7), &DataType::Int32, &DataType::Int64),
            Some(StatValue::Int(7))
        );
    }
}
