//! [`TablePath`]: a validated path relative to the table root. Every path read from a
//! manifest goes through [`TablePath::parse`], so no stored path can reach outside the table.

use std::fmt;

use crate::error::{Error, Result};

/// The directories a manifest may reference.
const ALLOWED_ROOTS: [&str; 6] = [
    "data",
    "_deletions",
    "_relocations",
    "_rowids",
    "_fragments",
    "_indices",
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TablePath(String);

impl TablePath {
    /// Accepts `data/...`, `_deletions/...`, `_relocations/...`, `_rowids/...`, `_fragments/...` and `_indices/...` paths
    /// made of plain segments; refuses absolute paths, `..`, `.`, empty segments, backslashes,
    /// schemes and control characters.
    pub fn parse(path: &str) -> Result<Self> {
        let escapes = || Error::PathEscapesTable {
            path: path.to_string(),
        };
        if path.is_empty()
            || path.starts_with('/')
            || path.contains('\\')
            || path.contains(':')
            || path.chars().any(char::is_control)
        {
            return Err(escapes());
        }
        let mut segments = path.split('/');
        let root = segments.next().ok_or_else(escapes)?;
        if !ALLOWED_ROOTS.contains(&root) {
            return Err(escapes());
        }
        let mut rest = 0;
        for segment in segments {
            if segment.is_empty() || segment == "." || segment == ".." {
                return Err(escapes());
            }
            rest += 1;
        }
        if rest == 0 {
            return Err(escapes());
        }
        Ok(Self(path.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TablePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_escapes() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "data/../../x",
            "data/./x",
            "data//x",
            "data",
            "other/x",
            "s3://bucket/x",
            "data\\..\\x",
            "data/x\n",
        ] {
            assert!(
                matches!(TablePath::parse(bad), Err(Error::PathEscapesTable { .. })),
                "{bad:?} was accepted"
            );
        }
        assert!(TablePath::parse("data/abc.parquet").is_ok());
        assert!(TablePath::parse("_deletions/1-2-x.bin").is_ok());
    }
}
