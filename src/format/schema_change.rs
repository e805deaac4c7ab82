//! Schema changes that rewrite no data file (seed 004 "Schema changes"): the new schema a
//! change makes of the old, or why it cannot. Data files hold values by field id, so
//! renames, drops and added nullable columns change only the manifest; a widened column is
//! cast on read, its statistics converted once where the wider type counts otherwise.

use arrow::datatypes::{DataType, TimeUnit};

use super::stats::StatValue;
use crate::error::{Error, Result};

/// A column, or a field inside one: the column's name, then each field's name inward. A
/// list's element is `element` (or its Arrow name), a map's key and value `key` and
/// `value`, as Iceberg names them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath(Vec<String>);

impl FieldPath {
    /// The path of these names, outermost first.
    pub fn new(names: Vec<String>) -> Self {
        Self(names)
    }

    /// Reads `a.b.c`; a name holding a dot or a double quote is written in double quotes,
    /// a quote inside doubled (`"a.b".c`).
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| Error::invalid(format!("bad field path '{text}': {why}"));
        let mut names = Vec::new();
        let mut chars = text.chars().peekable();
        loop {
            let mut name = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            name.push('"');
                        }
                        Some('"') => break,
                        Some(c) => name.push(c),
                        None => return Err(bad("an unclosed quote")),
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == '.' {
                        break;
                    }
                    if c == '"' {
                        return Err(bad("a quote inside a name (quote the whole name)"));
                    }
                    name.push(c);
                    chars.next();
                }
            }
            if name.is_empty() {
                return Err(bad("an empty name"));
            }
            names.push(name);
            match chars.next() {
                None => return Ok(Self(names)),
                Some('.') => continue,
                Some(_) => return Err(bad("a quoted name must end at a dot")),
            }
        }
    }

    /// The names, outermost first.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// The column it lies in.
    pub fn column(&self) -> &str {
        self.0.first().map_or("", String::as_str)
    }

    /// Whether it names a column (not a field inside one).
    pub fn is_column(&self) -> bool {
        self.0.len() == 1
    }
}

/// A top-level column's name: the path to it.
impl From<&str> for FieldPath {
    fn from(name: &str) -> Self {
        Self(vec![name.to_string()])
    }
}

impl From<String> for FieldPath {
    fn from(name: String) -> Self {
        Self(vec![name])
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            if name.contains(['.', '"']) {
                write!(f, "\"{}\"", name.replace('"', "\"\""))?;
            } else {
                f.write_str(name)?;
            }
        }
        Ok(())
    }
}

/// Where a moved column or field goes among its siblings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// Before all of them.
    First,
    /// Right after the one of this name.
    After(String),
}

/// One change to a table's columns, or to fields inside them.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaChange {
    /// Add a nullable column (last), or a nullable field (last) inside a struct; old rows
    /// read NULL.
    AddColumn {
        /// Its path (a struct's, then its name).
        name: FieldPath,
        /// Its type.
        data_type: DataType,
    },
    /// Add a nullable blob column (last): `LargeBinary`, its values placed as `blob` says
    /// (SQL's `ADD COLUMN c BLOB`); old rows read NULL.
    AddBlobColumn {
        /// Its name (a column: blob fields inside structs are not supported).
        name: FieldPath,
        /// How its values are placed.
        blob: super::blob::BlobColumn,
    },
    /// Place a blob column's later values by new thresholds; values written before stay
    /// where they are (each descriptor says where).
    SetBlobOptions {
        /// The blob column.
        name: FieldPath,
        /// Its thresholds from now on.
        blob: super::blob::BlobColumn,
    },
    /// Drop a column or a struct's field: it leaves reads now, its bytes at the next
    /// compaction.
    DropColumn {
        /// Its path.
        name: FieldPath,
    },
    /// Rename a column or a struct's field.
    RenameColumn {
        /// Its path now.
        from: FieldPath,
        /// Its new name.
        to: String,
    },
    /// Widen a column's or a nested field's type without loss (see [`widens`]).
    SetDataType {
        /// Its path.
        name: FieldPath,
        /// Its wider type.
        data_type: DataType,
    },
    /// Let a NOT NULL column or nested field hold nulls.
    DropNotNull {
        /// Its path.
        name: FieldPath,
    },
    /// Move a column, or a struct's field, among its siblings.
    Move {
        /// Its path.
        name: FieldPath,
        /// Where it goes.
        to: Position,
    },
}

impl std::fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaChange::AddColumn { name, data_type } => {
                write!(f, "ADD COLUMN {name} {data_type}")
            }
            SchemaChange::AddBlobColumn { name, .. } => write!(f, "ADD COLUMN {name} BLOB"),
            SchemaChange::SetBlobOptions { name, blob } => write!(
                f,
                "ALTER COLUMN {name} SET BLOB OPTIONS (inline_limit {}, dedicated_threshold {}, \
                 pack_file_size {})",
                blob.inline_limit, blob.dedicated_threshold, blob.pack_file_size
            ),
            SchemaChange::DropColumn { name } => write!(f, "DROP COLUMN {name}"),
            SchemaChange::RenameColumn { from, to } => write!(f, "RENAME COLUMN {from} TO {to}"),
            SchemaChange::SetDataType { name, data_type } => {
                write!(f, "ALTER COLUMN {name} SET DATA TYPE {data_type}")
            }
            SchemaChange::DropNotNull { name } => write!(f, "ALTER COLUMN {name} DROP NOT NULL"),
            SchemaChange::Move { name, to } => match to {
                Position::First => write!(f, "ALTER COLUMN {name} FIRST"),
                Position::After(sibling) => write!(f, "ALTER COLUMN {name} AFTER {sibling}"),
            },
        }
    }
}

impl SchemaChange {
    /// The column or field it changes.
    pub fn path(&self) -> &FieldPath {
        match self {
            SchemaChange::AddColumn { name, .. }
            | SchemaChange::AddBlobColumn { name, .. }
            | SchemaChange::SetBlobOptions { name, .. }
            | SchemaChange::DropColumn { name }
            | SchemaChange::SetDataType { name, .. }
            | SchemaChange::DropNotNull { name }
            | SchemaChange::Move { name, .. } => name,
            SchemaChange::RenameColumn { from, .. } => from,
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

#[cfg(test)]
mod tests {
    use super::*;

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
