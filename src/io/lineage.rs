//! Lineage files: a fragment's per-row last-change versions in
//! `_lineage/<fragment>-<name>.bin` when they are too many to ride in every manifest (rows
//! merged in id order interleave them). Opening a version reads none of them: the manifest
//! keeps their bounds, and [`TableStore::lineage_of`] reads a fragment's file (cached per
//! handle: files are immutable) only for what asks for those versions: lineage columns,
//! change reads and compaction, which carries rows' versions over.

use std::sync::Arc;

use super::TableStore;
use crate::error::Result;
use crate::format::{decode_lineage_file, encode_lineage_file, Lineage, Manifest};

impl TableStore {
    /// The lineage `stored` of a fragment of `rows` rows with every per-row version at
    /// hand: as the manifest keeps it, or with its last-change versions read from their file.
    pub(crate) async fn lineage_of(&self, stored: &Lineage, rows: u32) -> Result<Arc<Lineage>> {
        let Some(file) = &stored.updated_file else {
            return Ok(Arc::new(stored.clone()));
        };
        let load = async {
            let bytes = self
                .get_sized(&self.path(&file.path), file.size_bytes)
                .await?;
            let read = decode_lineage_file(file.path.as_str(), &bytes, stored, rows)?;
            Ok(Arc::new(read))
        };
        self.lineage.get_or_load(file.path.as_str(), load).await
    }

    /// Writes a file for every fragment whose last-change versions encode larger than
    /// `inline_limit` bytes and have none yet; the manifest keeps their bounds.
    pub(crate) async fn store_lineage(
        &self,
        manifest: &mut Manifest,
        inline_limit: usize,
    ) -> Result<()> {
        for fragment in &mut manifest.fragments {
            let lineage = &fragment.lineage;
            if lineage.updated_file.is_some() || lineage.encoded_updated_len() <= inline_limit {
                continue;
            }
            let bytes = encode_lineage_file(lineage);
            let (path, size_bytes) = self
                .put_fragment_file("_lineage", fragment.id, bytes)
                .await?;
            let stored = lineage.updated_stored_in(path.clone(), size_bytes);
            self.lineage
                .insert(path.as_str(), Arc::new(lineage.clone()));
            fragment.lineage = stored;
        }
        Ok(())
    }
}
