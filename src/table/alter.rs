//! Schema changes on a table: one version each, no data file written (see
//! `format/schema_change.rs` for what is allowed and `commit/schema.rs` for how it lands).

use super::commit::Action;
use super::{Committed, RowChanges, Table};
use crate::error::{Error, Result};
use crate::format::SchemaChange;

impl Table {
    /// Changes the schema as `changes` say, in order, publishing one version for all of
    /// them (none when they change nothing: a column already of that type, or already
    /// nullable). Older versions keep the schema they were written with. A refused change is
    /// [`Error::SchemaChange`] naming it, and commits nothing.
    pub async fn alter(&self, changes: Vec<SchemaChange>) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let from = read.manifest().schema.clone();
        let mut to = from.clone();
        for change in &changes {
            let Some(next) = to.changed_by(change)? else {
                continue;
            };
            if let SchemaChange::SetDataType { name, .. } = change {
                let field_id = to.field_by_name(name).map(|f| f.id);
                let indexes = &read.manifest().indexes.segments;
                if let Some(index) = indexes.iter().find(|s| Some(s.field_id) == field_id) {
                    return Err(Error::SchemaChange {
                        change: change.to_string(),
                        reason: format!(
                            "index {} is on the column: drop it first (natal_drop_index)",
                            index.name
                        ),
                    });
                }
            }
            to = next;
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
