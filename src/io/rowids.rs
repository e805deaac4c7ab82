//! Row-id files: a fragment's [`RowIdSequence`] in `_rowids/<uuid>.bin` when it is too large
//! to ride inline in every manifest (DESIGN.md §2 "Large tables"). A commit that carries rows
//! writes their ids once; later manifests only name the file, so a commit's bytes follow its
//! change rather than the table's history.
//!
//! A decoded manifest or fragment segment is [`Unresolved`] until
//! [`TableStore::resolve_row_ids`] has read the files it names (concurrently, cached per
//! handle: files are immutable);
//! [`TableStore::publish_manifest`] stores the sequences that need a file first.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use super::store::CONCURRENT_FILE_LOADS;
use super::TableStore;
use crate::error::Result;
use crate::format::{
    decode_row_id_file, encode_row_id_file, FragmentRowIds, Manifest, RowIdFile, RowIdsRead,
    Unresolved,
};
use crate::rowid::RowIdSequence;

impl TableStore {
    /// Reads the row-id files `unresolved` names (concurrently, each through the cache),
    /// then builds it.
    pub(crate) async fn resolve_row_ids<T>(&self, unresolved: Unresolved<T>) -> Result<T> {
        // Owned, not borrowed: a stream over borrowed items makes the futures above it
        // lose `Send` (a higher-ranked lifetime the compiler cannot prove general).
        let wanted = unresolved.row_id_files().to_vec();
        self.note_storage_bases(unresolved.bases());
        let read: RowIdsRead = futures::stream::iter(wanted)
            .map(|wanted| async move {
                let sequence = self.read_row_ids(&wanted.file, wanted.rows).await?;
                Ok::<_, crate::error::Error>((wanted.file.path.clone(), sequence))
            })
            .buffer_unordered(CONCURRENT_FILE_LOADS)
            .try_collect()
            .await?;
        unresolved.resolve(&read)
    }

    /// Writes a file for every sequence larger than `inline_limit` bytes that has none yet.
    pub(crate) async fn store_row_ids(
        &self,
        manifest: &mut Manifest,
        inline_limit: usize,
    ) -> Result<()> {
        for fragment in &mut manifest.fragments {
            let FragmentRowIds::Inline(sequence) = &fragment.row_ids else {
                continue; // native, or in a file already
            };
            if sequence.encoded_len() <= inline_limit {
                continue;
            }
            let sequence = sequence.clone();
            let bytes = encode_row_id_file(&sequence);
            let (path, size_bytes) = self
                .put_fragment_file("_rowids", fragment.id, bytes)
                .await?;
            self.row_ids.insert(path.as_str(), sequence.clone());
            let file = RowIdFile { path, size_bytes };
            fragment.row_ids = FragmentRowIds::Stored { file, sequence };
        }
        Ok(())
    }

    async fn read_row_ids(&self, file: &RowIdFile, rows: u32) -> Result<Arc<RowIdSequence>> {
        let load = async {
            let bytes = self
                .get_sized(&self.path(&file.path), file.size_bytes)
                .await?;
            Ok(Arc::new(decode_row_id_file(
                file.path.as_str(),
                &bytes,
                rows,
            )?))
        };
        self.row_ids.get_or_load(file.path.as_str(), load).await
    }
}
