//! Checks of a decoded manifest against itself and its schema: what a corrupt or
//! hand-edited manifest gets refused for (again once `io/` has loaded fragments kept in
//! segment files).

use super::{Fragment, Manifest};
use crate::error::{Error, Result};

impl Manifest {
    /// Checks the fragment list against itself and the schema (again once `io/` has
    /// loaded fragments kept in segment files).
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        let corrupt = |reason: String| Err(Error::corrupt(path, reason));
        for field in &self.schema.fields {
            if let Err(e) = field.default_array() {
                return corrupt(e.to_string());
            }
        }
        self.validate_bases(path)?;
        for pair in self.fragments.windows(2) {
            if pair[0].id >= pair[1].id {
                return corrupt(format!(
                    "fragment ids not strictly increasing at {}",
                    pair[1].id
                ));
            }
        }
        if let Some(last) = self.fragments.last() {
            if self.max_fragment_id.is_none_or(|max| last.id > max) {
                return corrupt(format!("fragment {} is above max_fragment_id", last.id));
            }
        }
        for fragment in &self.fragments {
            self.validate_fragment(fragment, path)?;
        }
        for captured in self.change_data.iter().flatten() {
            self.validate_fragment(captured, path)?;
            if self
                .unlinked_change_data
                .iter()
                .any(|&(c, _)| c == captured.id)
            {
                continue; // checked once linked
            }
            let inline = captured.row_ids.sequence().is_some()
                && captured.row_ids.file().is_none()
                && captured.deletion.is_none();
            if !inline || self.max_fragment_id.is_none_or(|max| captured.id > max) {
                return corrupt(format!(
                    "change data fragment {} is not a fragment of captured rows",
                    captured.id
                ));
            }
        }
        Ok(())
    }

    /// Checks one fragment against itself and the schema.
    fn validate_fragment(&self, fragment: &Fragment, path: &str) -> Result<()> {
        let corrupt = |reason: String| Err(Error::corrupt(path, reason));
        if fragment.files.is_empty() {
            return corrupt(format!("fragment {} has no data files", fragment.id));
        }
        for file in &fragment.files {
            if file.row_count != fragment.physical_rows as u64 {
                return corrupt(format!(
                    "fragment {} has {} rows but file {} has {}",
                    fragment.id, fragment.physical_rows, file.path, file.row_count
                ));
            }
        }
        // A dropped column's id stays in its files (and its patches') until they are
        // rewritten.
        let next_id = self.schema.next_field_id;
        for file in fragment
            .files
            .iter()
            .chain(fragment.patches.iter().map(|p| &p.file))
        {
            if let Some(id) = file.field_ids.iter().find(|id| **id >= next_id) {
                return corrupt(format!(
                    "file {} names field id {id}, which the schema never assigned (its \
                     next is {next_id})",
                    file.path
                ));
            }
        }
        if let Some(patch) = fragment.patches.iter().find(|p| p.version > self.version) {
            return corrupt(format!(
                "fragment {} has a row patch ({}) of a later version",
                fragment.id, patch.file.path
            ));
        }
        if let Some(seq) = fragment.row_ids.sequence() {
            if seq.len() != fragment.physical_rows as usize {
                return corrupt(format!(
                    "fragment {} has {} rows but a row-id sequence of {}",
                    fragment.id,
                    fragment.physical_rows,
                    seq.len()
                ));
            }
        }
        if let Some(deletion) = &fragment.deletion {
            if deletion.deleted_rows() > fragment.physical_rows as u64 {
                return corrupt(format!(
                    "fragment {} deletes more rows than it has",
                    fragment.id
                ));
            }
        }
        Ok(())
    }
}
