//! A version's captured fragments whose row ids are another fragment's of the version (an
//! update's capture shares its new fragment's ids): found when stored (`convert.rs` stores
//! them without ids, naming the fragment), linked again once the fragment list is loaded.

use std::sync::Arc;

use super::{FragmentRowIds, Manifest};
use crate::error::{Error, Result};
use crate::rowid::FragmentId;

impl Manifest {
    /// Gives the captured fragments read without row ids the ids of the fragments they name
    /// (see [`Self::unlinked_change_data`]), once `fragments` is loaded.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a named fragment is not this version's or holds other rows.
    pub(crate) fn link_change_data(&mut self, path: &str) -> Result<()> {
        for (captured, fragment) in std::mem::take(&mut self.unlinked_change_data) {
            let ids = self.fragment(fragment).and_then(|f| {
                let sequence = f.row_ids.sequence()?;
                Some((f.physical_rows, sequence.clone()))
            });
            let target = (self.change_data.iter_mut().flatten()).find(|c| c.id == captured);
            match (ids, target) {
                (Some((rows, ids)), Some(target)) if rows == target.physical_rows => {
                    target.row_ids = FragmentRowIds::Inline(ids);
                }
                _ => {
                    return Err(Error::corrupt(
                        path,
                        format!(
                            "change data fragment {captured} names the row ids of fragment \
                             {fragment}, which does not hold as many carried rows"
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    /// The captured fragments whose row ids are those of a fragment this version added (an
    /// update's captures, whose rows come as it wrote them): (captured, fragment), stored as
    /// such rather than twice.
    pub(crate) fn shared_change_data_ids(&self) -> Vec<(FragmentId, FragmentId)> {
        let added = |id: &FragmentId| self.fragment(*id);
        let mut shared = Vec::new();
        for captured in self.change_data.iter().flatten() {
            let Some(ids) = captured.row_ids.sequence() else {
                continue;
            };
            let same = (self.transaction.fragments_added.iter().filter_map(added))
                .find(|f| f.row_ids.sequence().is_some_and(|s| Arc::ptr_eq(s, ids)));
            if let Some(fragment) = same {
                shared.push((captured.id, fragment.id));
            }
        }
        shared
    }
}
