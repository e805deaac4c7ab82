//! Deletion files on the store: written under derived names, read (and cached) per file,
//! unioned per fragment and folded as commits add to them. Their bytes are
//! `format::deletion`'s.

use std::sync::Arc;

use bytes::Bytes;
use roaring::RoaringBitmap;

use super::TableStore;
use crate::error::{Error, Result};
use crate::format::{
    decode_deletions, encode_deletions, DeletionFile, DeletionVector, DerivedName, Fragment,
};
use crate::rowid::FragmentId;

impl TableStore {
    /// Writes a fragment's deletion vector as a new file (files are never rewritten), named
    /// for the fragment and `version` ([`DerivedName::DELETION`]); `moved_rows` of its rows
    /// were moved rather than deleted outright.
    pub async fn write_deletions(
        &self,
        fragment: FragmentId,
        version: u64,
        bitmap: &RoaringBitmap,
        moved_rows: u64,
    ) -> Result<DeletionFile> {
        let bytes = Bytes::from(encode_deletions(bitmap));
        let path = self
            .put_derived(DerivedName::DELETION, fragment, version, bytes)
            .await?;
        Ok(DeletionFile {
            path,
            deleted_rows: bitmap.len(),
            moved_rows: moved_rows.min(bitmap.len()),
        })
    }

    /// The deleted offsets of a fragment, `None` if it has none.
    pub async fn fragment_deletions(
        &self,
        fragment: &Fragment,
    ) -> Result<Option<Arc<RoaringBitmap>>> {
        match &fragment.deletion {
            None => Ok(None),
            Some(vector) => Ok(Some(
                self.read_deletions(vector, fragment.physical_rows).await?,
            )),
        }
    }

    /// The deletions that can hide a row reached through the relocation view (an id's newest
    /// address): none when every deletion of the fragment was a move, since a moved row's id
    /// leads past its old copies.
    pub async fn outright_deletions(
        &self,
        fragment: &Fragment,
    ) -> Result<Option<Arc<RoaringBitmap>>> {
        match &fragment.deletion {
            Some(vector) if vector.only_moves() => Ok(None),
            _ => self.fragment_deletions(fragment).await,
        }
    }

    /// A fragment's deleted offsets: the union of its files (each cached: files are never
    /// rewritten).
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a damaged file or files that overlap.
    pub async fn read_deletions(
        &self,
        vector: &DeletionVector,
        physical_rows: u32,
    ) -> Result<Arc<RoaringBitmap>> {
        let (first, rest) = (vector.first(), vector.deltas());
        if rest.is_empty() {
            return self.read_deletion_file(first, physical_rows).await;
        }
        // The union is cached too, under the list of its files: takes and masks ask for a
        // fragment's deletions once per row.
        let key: Vec<&str> = vector.files().map(|f| f.path.as_str()).collect();
        let key = key.join("|");
        let load = async {
            // Every file of the vector in flight at once: a cold read costs one round trip.
            let (mut union, rest) = futures::future::try_join(
                self.read_deletion_file(first, physical_rows),
                futures::future::try_join_all(rest.iter().map(|file| async move {
                    Ok::<_, Error>((file, self.read_deletion_file(file, physical_rows).await?))
                })),
            )
            .await?;
            for (file, more) in rest {
                if !union.is_disjoint(&more) {
                    return Err(Error::corrupt(
                        file.path.as_str(),
                        "deletes offsets an older deletion file already deletes",
                    ));
                }
                union = Arc::new(union.as_ref() | more.as_ref());
            }
            Ok(union)
        };
        self.deletions.get_or_load(&key, load).await
    }

    /// Adds `fresh` (offsets not yet deleted, `moved_rows` of them moves) to a fragment's
    /// deletions: writes them as a new file, folding in the newest files while they are at
    /// most twice its size. Files then grow geometrically: a fragment keeps O(log n) files and
    /// each offset is rewritten O(log n) times, so a commit writes about what it deleted
    /// rather than all the fragment's history.
    pub async fn add_deletions(
        &self,
        current: Option<&DeletionVector>,
        fragment: FragmentId,
        version: u64,
        (fresh, moved_rows): (&RoaringBitmap, u64),
        physical_rows: u32,
    ) -> Result<DeletionVector> {
        let mut files = current.map(|d| d.clone().into_files()).unwrap_or_default();
        let mut pending = fresh.clone();
        let mut moved = moved_rows;
        while let Some(newest) = files.last() {
            if newest.deleted_rows > 2 * pending.len() {
                break;
            }
            pending |= self
                .read_deletion_file(newest, physical_rows)
                .await?
                .as_ref();
            moved += newest.moved_rows;
            files.pop();
        }
        files.push(
            self.write_deletions(fragment, version, &pending, moved)
                .await?,
        );
        let vector = DeletionVector::from_files(files);
        vector.ok_or_else(|| Error::internal("a deletion vector of no files"))
    }

    /// What changed between two deletion vectors of one fragment: the offsets `after`
    /// deletes that `before` did not, and those `before` deleted that `after` does not (a
    /// restore brings rows back). When `after` only added files to `before` (the common
    /// case: a commit appends a delta), only the added files are read.
    pub async fn deletion_change(
        &self,
        before: Option<&DeletionVector>,
        after: Option<&DeletionVector>,
        physical_rows: u32,
    ) -> Result<(RoaringBitmap, RoaringBitmap)> {
        let before_files: Vec<&DeletionFile> = before.into_iter().flat_map(|v| v.files()).collect();
        let after_files: Vec<&DeletionFile> = after.into_iter().flat_map(|v| v.files()).collect();
        if after_files.starts_with(&before_files) {
            let mut added = RoaringBitmap::new();
            for file in &after_files[before_files.len()..] {
                added |= self.read_deletion_file(file, physical_rows).await?.as_ref();
            }
            return Ok((added, RoaringBitmap::new()));
        }
        let (before, after) = futures::future::try_join(
            self.deletions_or_none(before, physical_rows),
            self.deletions_or_none(after, physical_rows),
        )
        .await?;
        Ok((
            after.as_ref() - before.as_ref(),
            before.as_ref() - after.as_ref(),
        ))
    }

    async fn deletions_or_none(
        &self,
        vector: Option<&DeletionVector>,
        physical_rows: u32,
    ) -> Result<Arc<RoaringBitmap>> {
        match vector {
            None => Ok(Arc::new(RoaringBitmap::new())),
            Some(vector) => self.read_deletions(vector, physical_rows).await,
        }
    }

    async fn read_deletion_file(
        &self,
        file: &DeletionFile,
        physical_rows: u32,
    ) -> Result<Arc<RoaringBitmap>> {
        let load = async {
            let bytes = self.get(&self.path(&file.path)).await?;
            let bitmap = decode_deletions(file.path.as_str(), &bytes, physical_rows)?;
            if bitmap.len() != file.deleted_rows {
                return Err(Error::corrupt(
                    file.path.as_str(),
                    format!(
                        "holds {} deletions, the manifest says {}",
                        bitmap.len(),
                        file.deleted_rows
                    ),
                ));
            }
            Ok(Arc::new(bitmap))
        };
        self.deletions.get_or_load(file.path.as_str(), load).await
    }
}
