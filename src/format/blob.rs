//! Blob columns (seed 003): a Binary or LargeBinary column whose values data files hold as
//! descriptors — `kind`, `position`, `size`, `blob_id`, `blob_uri` — with the bytes inline
//! (small values), in a shared *packed* sidecar, in a *dedicated* sidecar of their own, or at
//! an *external* URI the user gave. Sidecars live under the containing data file's stem:
//! `data/<stem>/<encoded blob id>.blob`.
//!
//! Here: a column's thresholds, the descriptor's Arrow type in data files, descriptor kinds
//! and sidecar names. Writing and reading the bytes is `io`'s.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, Fields};

use super::path::TablePath;
use crate::error::{Error, Result};

/// Field metadata that declares a Binary or LargeBinary field a blob column (value `true`).
pub const BLOB_META_KEY: &str = "natal.blob";
/// Field metadata: values below this many bytes stay inside the data file.
pub const BLOB_INLINE_LIMIT_META_KEY: &str = "natal.blob.inline_limit";
/// Field metadata: values of at least this many bytes get a sidecar of their own.
pub const BLOB_DEDICATED_THRESHOLD_META_KEY: &str = "natal.blob.dedicated_threshold";
/// Field metadata: a packed sidecar is rolled over once it holds this many bytes.
pub const BLOB_PACK_FILE_SIZE_META_KEY: &str = "natal.blob.pack_file_size";

/// How a blob column places its values, by size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobColumn {
    /// Values below this many bytes are stored inline, in the data file (default 64 KiB).
    pub inline_limit: u64,
    /// Values of at least this many bytes get a dedicated sidecar; the sizes between
    /// `inline_limit` and this are packed (default 4 MiB).
    pub dedicated_threshold: u64,
    /// A packed sidecar takes values until it holds this many bytes, then the next one
    /// starts (default 64 MiB).
    pub pack_file_size: u64,
}

impl Default for BlobColumn {
    fn default() -> Self {
        Self {
            inline_limit: 64 * 1024,
            dedicated_threshold: 4 * 1024 * 1024,
            pack_file_size: 64 * 1024 * 1024,
        }
    }
}

impl BlobColumn {
    /// Refuses thresholds out of order (inline above dedicated) and an empty packed
    /// sidecar size, naming the column.
    pub fn validate(&self, column: &str) -> Result<()> {
        if self.inline_limit > self.dedicated_threshold {
            return Err(Error::invalid(format!(
                "blob column {column}: inline_limit {} is above dedicated_threshold {}; \
                 values below inline_limit stay inline, values from dedicated_threshold on \
                 get their own sidecar, so inline_limit ≤ dedicated_threshold",
                self.inline_limit, self.dedicated_threshold
            )));
        }
        if self.pack_file_size == 0 {
            return Err(Error::invalid(format!(
                "blob column {column}: pack_file_size must be above 0"
            )));
        }
        Ok(())
    }

    /// Where a value of `size` bytes goes.
    pub fn kind_for(&self, size: u64) -> BlobKind {
        if size < self.inline_limit {
            BlobKind::Inline
        } else if size < self.dedicated_threshold {
            BlobKind::Packed
        } else {
            BlobKind::Dedicated
        }
    }

    /// The blob declaration of an Arrow field (`natal.blob` metadata, thresholds from the
    /// other `natal.blob.*` keys, defaults for the rest), if it has one; a declaration on
    /// a type other than Binary or LargeBinary, or a threshold that is not a number, is an
    /// error naming the field.
    pub fn from_field(field: &ArrowField) -> Result<Option<Self>> {
        let (column, data_type, options) = (field.name(), field.data_type(), field.metadata());
        let declared = match options.get(BLOB_META_KEY).map(|v| v.trim()) {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "column {column}: {BLOB_META_KEY} is '{other}', not true or false"
                )))
            }
        };
        if !declared {
            return Ok(None);
        }
        if !matches!(data_type, DataType::Binary | DataType::LargeBinary) {
            return Err(Error::invalid(format!(
                "column {column} is declared a blob column but has type {data_type}: blob \
                 columns are Binary or LargeBinary (SQL BYTEA)"
            )));
        }
        let mut blob = Self::default();
        for (key, slot) in [
            (BLOB_INLINE_LIMIT_META_KEY, &mut blob.inline_limit),
            (
                BLOB_DEDICATED_THRESHOLD_META_KEY,
                &mut blob.dedicated_threshold,
            ),
            (BLOB_PACK_FILE_SIZE_META_KEY, &mut blob.pack_file_size),
        ] {
            if let Some(text) = options.get(key) {
                *slot = text.trim().parse().map_err(|_| {
                    Error::invalid(format!(
                        "column {column}: {key} is '{text}', not a number of bytes"
                    ))
                })?;
            }
        }
        blob.validate(column)?;
        Ok(Some(blob))
    }

    /// The field metadata that declares these thresholds (what [`BlobColumn::from_field`]
    /// reads).
    pub fn to_metadata(&self) -> HashMap<String, String> {
        HashMap::from([
            (BLOB_META_KEY.to_string(), "true".to_string()),
            (
                BLOB_INLINE_LIMIT_META_KEY.to_string(),
                self.inline_limit.to_string(),
            ),
            (
                BLOB_DEDICATED_THRESHOLD_META_KEY.to_string(),
                self.dedicated_threshold.to_string(),
            ),
            (
                BLOB_PACK_FILE_SIZE_META_KEY.to_string(),
                self.pack_file_size.to_string(),
            ),
        ])
    }
}

/// Where a blob value's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlobKind {
    /// In the data file, in the descriptor's `inline` bytes.
    Inline,
    /// Bytes `position..position + size` of the packed sidecar `blob_id`.
    Packed,
    /// The whole of the dedicated sidecar `blob_id` (`size` bytes).
    Dedicated,
    /// At `blob_uri`, bytes `position..position + size`; natal never copies or deletes it.
    External,
}

impl BlobKind {
    /// Its code in a descriptor's `kind` field.
    pub fn code(self) -> u8 {
        match self {
            Self::Inline => 0,
            Self::Packed => 1,
            Self::Dedicated => 2,
            Self::External => 3,
        }
    }

    /// Its name, as `t$blobs` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::Packed => "packed",
            Self::Dedicated => "dedicated",
            Self::External => "external",
        }
    }

    /// The kind a descriptor's code names; a code this natal does not know is the data
    /// file's damage (or a newer natal's), named with the file.
    pub fn from_code(code: u8, path: &str) -> Result<Self> {
        Ok(match code {
            0 => Self::Inline,
            1 => Self::Packed,
            2 => Self::Dedicated,
            3 => Self::External,
            other => {
                return Err(Error::corrupt(
                    path,
                    format!("a blob descriptor has kind {other}, which this natal does not know"),
                ))
            }
        })
    }
}

/// The descriptor's fields, in the order data files hold them.
pub mod descriptor {
    /// The kind's code ([`super::BlobKind::code`]), UInt8.
    pub const KIND: usize = 0;
    /// Where the value starts in its sidecar or external object, UInt64.
    pub const POSITION: usize = 1;
    /// Its size in bytes, UInt64.
    pub const SIZE: usize = 2;
    /// The sidecar's file-local id, UInt32.
    pub const BLOB_ID: usize = 3;
    /// An external value's URI ("" otherwise), Utf8.
    pub const BLOB_URI: usize = 4;
    /// An inline value's bytes (null otherwise), the column's own binary type.
    pub const INLINE: usize = 5;
}

/// The Arrow type a data file holds a blob column of type `data_type` as: one descriptor
/// struct per value (null for a null value).
pub fn descriptor_type(data_type: &DataType) -> DataType {
    DataType::Struct(descriptor_fields(data_type))
}

/// The descriptor struct's fields (see [`descriptor`]).
pub fn descriptor_fields(data_type: &DataType) -> Fields {
    Fields::from(vec![
        Arc::new(ArrowField::new("kind", DataType::UInt8, false)),
        Arc::new(ArrowField::new("position", DataType::UInt64, false)),
        Arc::new(ArrowField::new("size", DataType::UInt64, false)),
        Arc::new(ArrowField::new("blob_id", DataType::UInt32, false)),
        Arc::new(ArrowField::new("blob_uri", DataType::Utf8, false)),
        Arc::new(ArrowField::new("inline", data_type.clone(), true)),
    ])
}

/// The descriptor without its inline bytes ([`descriptor::INLINE`], the last field): what a
/// read that needs only each value's kind, size and place takes from a data file (Parquet
/// reads the other fields' leaves alone), a few bytes a row whatever the values' sizes.
pub fn lean_descriptor_type(data_type: &DataType) -> DataType {
    let fields = descriptor_fields(data_type);
    DataType::Struct(fields.iter().take(descriptor::INLINE).cloned().collect())
}

/// The sidecar `blob_id` of the data file at `data_file`: `data/<stem>/<id as 8 hex
/// digits>.blob`.
pub fn sidecar_path(data_file: &TablePath, blob_id: u32) -> TablePath {
    TablePath::sidecar(data_file, &format!("{blob_id:08x}.blob"))
}

/// The data file whose stem directory holds `path`, if `path` is a sidecar
/// (`data/<stem>/<name>.blob` → `data/<stem>.parquet`).
pub fn sidecar_owner(path: &str) -> Option<String> {
    let rest = path.strip_prefix("data/")?;
    let (stem, name) = rest.split_once('/')?;
    (!stem.is_empty() && !name.contains('/') && name.ends_with(".blob"))
        .then(|| format!("data/{stem}.parquet"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_place_values_and_refuse_disorder() {
        let blob = BlobColumn {
            inline_limit: 10,
            dedicated_threshold: 100,
            pack_file_size: 1000,
        };
        assert_eq!(blob.kind_for(9), BlobKind::Inline);
        assert_eq!(blob.kind_for(10), BlobKind::Packed);
        assert_eq!(blob.kind_for(99), BlobKind::Packed);
        assert_eq!(blob.kind_for(100), BlobKind::Dedicated);
        let disordered = BlobColumn {
            inline_limit: 200,
            ..blob
        };
        assert!(disordered.validate("img").is_err());
        let field = ArrowField::new("img", DataType::Utf8, true)
            .with_metadata(HashMap::from([(BLOB_META_KEY.into(), "true".into())]));
        let error = BlobColumn::from_field(&field).unwrap_err().to_string();
        assert!(error.contains("Utf8"), "{error}");
        let field =
            ArrowField::new("img", DataType::Binary, true).with_metadata(blob.to_metadata());
        assert_eq!(BlobColumn::from_field(&field).unwrap(), Some(blob));
        for code in 0..4 {
            assert_eq!(BlobKind::from_code(code, "f").unwrap().code(), code);
        }
        assert!(BlobKind::from_code(9, "f").is_err());
    }

    #[test]
    fn sidecars_live_under_their_data_file_stem() {
        let file = TablePath::parse("data/abc.parquet").unwrap();
        let sidecar = sidecar_path(&file, 26);
        assert_eq!(sidecar.as_str(), "data/abc/0000001a.blob");
        assert_eq!(
            sidecar_owner(sidecar.as_str()).as_deref(),
            Some("data/abc.parquet")
        );
        assert_eq!(sidecar_owner("data/abc.parquet"), None);
        assert_eq!(sidecar_owner("_indices/abc/x.blob"), None);
    }
}
