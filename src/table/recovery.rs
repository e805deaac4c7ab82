//! Recovering from a damaged latest version: its manifest, or a file it needs, cannot be
//! read, so nothing can be committed on top of it, while older versions still read. A
//! restore then publishes the version after the damaged one with an older version's rows,
//! and with high-water marks (fragment ids, index segment numbers) above anything the
//! damaged version could have handed out, though its own marks are unreadable.
//!
//! How the marks are bounded: every fragment a version adds has a data file of its own,
//! which no readable version references (the damaged version is the only one that could).
//! So the damaged version allocated at most as many fragment ids past the readable versions'
//! mark as there are unreferenced data files, and at most as many index segments per name
//! as there are unreferenced index files. Orphans of failed writes only raise the bound:
//! ids are skipped, never reused. A fragment id in the name of an unreferenced deletion,
//! row-id or segment file raises it too.

use std::collections::HashSet;

use super::maintenance::referenced_files;
use super::{Committed, Table};
use crate::error::{Error, Result};
use crate::format::{Manifest, Operation, TransactionSummary};
use crate::rowid::FragmentId;

impl Table {
    /// Publishes version `latest + 1` holding `from`'s rows, over a latest version that
    /// cannot be read (see the module header for the marks it derives).
    pub(super) async fn restore_over_damaged(
        &self,
        latest: u64,
        from: Manifest,
    ) -> Result<Committed> {
        let mut next = from.clone();
        next.change_data = None;
        let mut referenced = HashSet::new();
        for (version, _) in self.store.list_versions().await? {
            match self.store.read_manifest(version).await {
                Ok(readable) => {
                    referenced_files(&readable, &mut referenced);
                    next.max_fragment_id = next.max_fragment_id.max(readable.max_fragment_id);
                    next.indexes.keep_marks_of(&readable.indexes);
                }
                // The damaged version, another damaged one, or one removed meanwhile.
                Err(Error::Corrupt { .. } | Error::VersionNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let unreferenced = self.unreferenced_files(&referenced).await?;
        let count_in = |dir: &str| {
            unreferenced
                .iter()
                .filter(|path| path.split('/').next() == Some(dir))
                .count() as u64
        };
        let named = unreferenced
            .iter()
            .filter_map(|path| fragment_id_in_name(path));
        next.max_fragment_id = next.max_fragment_id.max(named.max());
        next.max_fragment_id = raised_by(next.max_fragment_id, count_in("data"))?;
        next.indexes.raise_marks_by(count_in("_indices"));

        next.version = latest + 1;
        next.parent_version = Some(latest);
        next.timestamp_micros = chrono::Utc::now()
            .timestamp_micros()
            .max(from.timestamp_micros + 1);
        next.transaction = TransactionSummary {
            operation: Operation::Restore,
            read_version: latest,
            rows_added: from.live_rows(),
            rows_removed: 0,
            fragments_removed: Vec::new(),
            fragments_added: Vec::new(),
            uuid: String::new(),
            origin: None,
        };
        if !self
            .store
            .publish_manifest(&mut next, &self.options.layout)
            .await?
        {
            return Err(Error::Conflict {
                operation: Operation::Restore,
                read_version: latest,
                other: None,
                other_version: latest + 1,
                reason: "another writer published a version after the damaged one".into(),
            });
        }
        Ok(Committed::of(&next))
    }

    /// The files under the table's own directories that `referenced` does not name, as
    /// table-relative paths.
    async fn unreferenced_files(&self, referenced: &HashSet<String>) -> Result<Vec<String>> {
        Ok(self
            .store
            .list_table_files()
            .await?
            .into_iter()
            .map(|(relative, _)| relative)
            .filter(|relative| !super::maintenance::is_referenced(relative, referenced))
            .collect())
    }
}

/// The fragment id a file's name starts with: deletion, row-id and lineage files and
/// fragment segments are named `<fragment>-...` (`None` for other files).
fn fragment_id_in_name(path: &str) -> Option<FragmentId> {
    let (dir, name) = path.split_once('/')?;
    if !matches!(dir, "_deletions" | "_rowids" | "_lineage" | "_fragments") {
        return None;
    }
    name.split(['-', '.']).next()?.parse().ok()
}

/// A fragment-id mark `count` ids past `mark` (`None`: no id handed out yet).
fn raised_by(mark: Option<FragmentId>, count: u64) -> Result<Option<FragmentId>> {
    let next = match mark {
        _ if count == 0 => return Ok(mark),
        None => count - 1,
        Some(mark) => u64::from(mark) + count,
    };
    FragmentId::try_from(next)
        .map(Some)
        .map_err(|_| Error::internal("fragment ids past u32::MAX"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_skip_every_id_the_damaged_version_could_hold() {
        assert_eq!(raised_by(None, 0).unwrap(), None);
        assert_eq!(raised_by(None, 3).unwrap(), Some(2));
        assert_eq!(raised_by(Some(7), 0).unwrap(), Some(7));
        assert_eq!(raised_by(Some(7), 2).unwrap(), Some(9));
        assert!(raised_by(Some(u32::MAX), 1).is_err());
        assert_eq!(fragment_id_in_name("_deletions/12-0005.bin"), Some(12));
        assert_eq!(fragment_id_in_name("_rowids/4-abc.bin"), Some(4));
        assert_eq!(fragment_id_in_name("_lineage/7-abc.bin"), Some(7));
        assert_eq!(fragment_id_in_name("_fragments/16.bin"), Some(16));
        assert_eq!(fragment_id_in_name("data/123.parquet"), None);
        assert_eq!(fragment_id_in_name("_deletions/x.bin"), None);
    }
}
