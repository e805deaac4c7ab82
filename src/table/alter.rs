//! Schema changes on a table: one version each, no data file written (see
//! `format/schema_change.rs` for what is allowed and `commit/schema.rs` for how it lands).

use super::commit::Action;
use super::{Committed, RowChanges, Table};
use crate::error::Result;
use crate::format::SchemaChange;

impl Table {
    /// Changes the schema as `changes` say, in order, publishing one version for all of
    /// them (none when they change nothing: a column already of that type, or already
    /// nullable). Older versions keep the schema they were written with. A refused change is
    /// [`Error::SchemaChange`](crate::Error::SchemaChange) naming it, and commits nothing;
    /// so is widening an indexed column (checked as the change is applied, so an index
    /// built meanwhile counts too).
    pub async fn alter(&self, changes: Vec<SchemaChange>) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let from = read.manifest().schema.clone();
        let mut to = from.clone();
        for change in &changes {
            if let Some(next) = to.changed_by(change)? {
                to = next;
            }
        }
        if to == from {
            return Ok(Committed::unchanged(&read, RowChanges::default()));
        }
        self.commit(
            &read,
            Action::AlterSchema {
                from: Box::new(from),
                to: Box::new(to),
            },
        )
        .await
    }
}
