//! [`TablePath`]: a validated path relative to the table root. Every path read from a
//! manifest goes through [`TablePath::parse`], so no stored path can reach outside the table.

use std::fmt;

use crate::error::{Error, Result};

/// The directories of a table a manifest may reference: every file natal writes but the
/// manifests themselves lives under one of these.
pub const TABLE_FILE_DIRS: [&str; 7] = [
    "data",
    "_deletions",
    "_relocations",
    "_rowids",
    "_lineage",
    "_fragments",
    "_indices",
];

/// A path relative to the table root, under one of [`TABLE_FILE_DIRS`], that cannot reach outside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TablePath(String);

impl TablePath {
    /// Accepts paths under [`TABLE_FILE_DIRS`] (`data/...`, `_rowids/...` and the rest)
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
        if !TABLE_FILE_DIRS.contains(&root) {
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

    /// The file `name` in the directory named by `file`'s stem (`data/x.parquet` →
    /// `data/x/<name>`): where a data file's blob sidecars live. `name` is a plain segment.
    pub(crate) fn sidecar(file: &TablePath, name: &str) -> TablePath {
        TablePath(format!("{}/{name}", Self::sidecar_dir(file).0))
    }

    /// The file `name` (a plain segment) in the directory `directory`.
    pub(crate) fn in_directory(directory: &TablePath, name: &str) -> TablePath {
        TablePath(format!("{}/{name}", directory.0))
    }

    /// The directory of `file`'s blob sidecars: its stem (`data/x.parquet` → `data/x`).
    pub(crate) fn sidecar_dir(file: &TablePath) -> TablePath {
        let stem = file
            .0
            .rsplit_once('.')
            .map_or(file.0.as_str(), |(stem, _)| stem);
        TablePath(stem.to_string())
    }

    /// The path as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `path` under storage base `base` (the manifest's [`super::StorageBase`] of that id;
    /// [`OWN_ROOT`]: the table's own root, `path` itself). In memory such a path is
    /// `_bases/<id>/<path>`, which no stored path can spell ([`TablePath::parse`] refuses
    /// it), so every reader resolves it through the base and nothing writes or deletes there.
    pub fn in_base(base: u32, path: TablePath) -> TablePath {
        match base {
            OWN_ROOT => path,
            base => TablePath(format!("{BASES_DIR}/{base}/{}", path.0)),
        }
    }

    /// The storage base this path is under ([`OWN_ROOT`] for the table's own files) and the
    /// path within that base: what a manifest stores.
    pub fn split_base(&self) -> (u32, &str) {
        let Some(rest) = self
            .0
            .strip_prefix(BASES_DIR)
            .and_then(|r| r.strip_prefix('/'))
        else {
            return (OWN_ROOT, &self.0);
        };
        // Only `in_base` spells these: a number, then a valid path.
        match rest.split_once('/') {
            Some((base, path)) => (base.parse().unwrap_or(OWN_ROOT), path),
            None => (OWN_ROOT, &self.0),
        }
    }

    /// The same file in `base`'s id space moved by `remap` (a clone naming its source's
    /// bases anew): `remap(current base)` is the new base.
    pub fn rebased(&self, remap: impl Fn(u32) -> u32) -> TablePath {
        let (base, path) = self.split_base();
        TablePath::in_base(remap(base), TablePath(path.to_string()))
    }

    /// A path as [`TablePath::parse`] accepts it, or one under a storage base as
    /// [`TablePath::in_base`] spells it (references a process made itself).
    pub(crate) fn parse_based(path: &str) -> Result<Self> {
        let Some(rest) = path
            .strip_prefix(BASES_DIR)
            .and_then(|r| r.strip_prefix('/'))
        else {
            return Self::parse(path);
        };
        let escapes = || Error::PathEscapesTable {
            path: path.to_string(),
        };
        let (spelled, inner) = rest.split_once('/').ok_or_else(escapes)?;
        let base: u32 = spelled.parse().map_err(|_| escapes())?;
        if base == OWN_ROOT || base.to_string() != spelled {
            return Err(escapes());
        }
        Ok(Self::in_base(base, Self::parse(inner)?))
    }
}

/// The storage base id of the table's own root.
pub const OWN_ROOT: u32 = 0;

/// Where, under a table's root, paths of files in other storage bases live in memory (never
/// on disk): `_bases/<id>/<path in that base>`.
pub const BASES_DIR: &str = "_bases";

/// How a writer names a file from what the manifest already records beside it: its owner (a
/// fragment, or a segment's first fragment), the version that wrote it and an attempt
/// number, as `<dir>/<owner>-<version>[-<attempt>].<ext>`. A manifest then stores two small
/// numbers where it stored a path. Writers claim names with put-if-absent and take the next
/// attempt when one is taken (a writer that lost a race, or crashed before publishing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivedName {
    dir: &'static str,
    ext: &'static str,
}

impl DerivedName {
    /// Deletion files: `_deletions/<fragment>-<version>.bin`.
    pub const DELETION: Self = Self {
        dir: "_deletions",
        ext: "bin",
    };
    /// Fragment segment files: `_fragments/<first fragment>-<version>.bin`.
    pub const SEGMENT: Self = Self {
        dir: "_fragments",
        ext: "bin",
    };
    /// Segment patch files: `_fragments/<first fragment>-<version>.patch`.
    pub const PATCH: Self = Self {
        dir: "_fragments",
        ext: "patch",
    };

    /// The name for `owner` written at `version`, on the writer's `attempt`th try (0 first).
    pub fn path(self, owner: u32, version: u64, attempt: u32) -> TablePath {
        let Self { dir, ext } = self;
        // Digits and dashes under a known root: always a valid table path.
        TablePath(match attempt {
            0 => format!("{dir}/{owner}-{version}.{ext}"),
            _ => format!("{dir}/{owner}-{version}-{attempt}.{ext}"),
        })
    }

    /// The version and attempt `path` was derived from for `owner`, if it is spelled exactly
    /// as [`DerivedName::path`] spells it.
    pub fn parse(self, path: &TablePath, owner: u32) -> Option<(u64, u32)> {
        let (_, within) = path.split_base();
        let name = within
            .strip_prefix(self.dir)?
            .strip_prefix(&format!("/{owner}-"))?
            .strip_suffix(self.ext)?
            .strip_suffix('.')?;
        let (version, attempt) = match name.split_once('-') {
            Some((version, attempt)) => (version.parse().ok()?, attempt.parse().ok()?),
            None => (name.parse().ok()?, 0),
        };
        (self.path(owner, version, attempt).as_str() == within).then_some((version, attempt))
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
    fn derived_names_parse_only_as_spelled() {
        let name = DerivedName::DELETION;
        assert_eq!(name.path(3, 17, 0).as_str(), "_deletions/3-17.bin");
        assert_eq!(name.path(3, 17, 2).as_str(), "_deletions/3-17-2.bin");
        for (path, owner, parsed) in [
            ("_deletions/3-17.bin", 3, Some((17, 0))),
            ("_deletions/3-17-2.bin", 3, Some((17, 2))),
            ("_deletions/3-17.bin", 4, None),
            ("_deletions/3-017.bin", 3, None),
            ("_deletions/3-17-0.bin", 3, None),
            ("_deletions/3-17-x.bin", 3, None),
            ("_deletions/3-17.patch", 3, None),
            ("_fragments/3-17.bin", 3, None),
            ("_deletions/3-AbC.bin", 3, None),
        ] {
            let path = TablePath::parse(path).unwrap();
            assert_eq!(name.parse(&path, owner), parsed, "{path}");
        }
        let patch = DerivedName::PATCH.path(8, 5, 1);
        assert_eq!(DerivedName::PATCH.parse(&patch, 8), Some((5, 1)));
        assert_eq!(DerivedName::SEGMENT.parse(&patch, 8), None);
    }

    #[test]
    fn paths_in_other_bases_are_spelled_apart_and_parse_back() {
        let path = TablePath::parse("data/x.parquet").unwrap();
        assert_eq!(TablePath::in_base(OWN_ROOT, path.clone()), path);
        let based = TablePath::in_base(3, path.clone());
        assert_eq!(based.as_str(), "_bases/3/data/x.parquet");
        assert_eq!(based.split_base(), (3, "data/x.parquet"));
        assert_eq!(path.split_base(), (OWN_ROOT, "data/x.parquet"));
        assert_eq!(TablePath::parse_based(based.as_str()).unwrap(), based);
        assert_eq!(based.rebased(|b| b + 1).as_str(), "_bases/4/data/x.parquet");
        assert_eq!(TablePath::sidecar_dir(&based).as_str(), "_bases/3/data/x");
        let deletion = TablePath::in_base(2, DerivedName::DELETION.path(5, 9, 0));
        assert_eq!(DerivedName::DELETION.parse(&deletion, 5), Some((9, 0)));
        for bad in [
            "_bases/3/x",
            "_bases/0/data/x",
            "_bases/03/data/x",
            "_bases/x/data/x",
            "_bases/3",
        ] {
            assert!(TablePath::parse_based(bad).is_err(), "{bad}");
        }
        assert!(TablePath::parse("_bases/3/data/x").is_err(), "never stored");
    }

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
