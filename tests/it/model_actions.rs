//! What the model test runs: the actions its plans make of operations, and running one on
//! a table (its writes padded to the schema they plan against).

use std::sync::Arc;

use arrow::array::AsArray;

use natal::internals::format::Schema;
use natal::{CompactOptions, RowId, RowMatch, Table};

use crate::common::{batch, key_matches, KeyModulo};
use crate::model_schema::{pad, padded_update};

/// The index the model test builds, on `val` (the column updates change).
pub const INDEX: &str = "val_idx";

/// Rows inserted (key, val) and ids deleted beside a patch, in its version (a MERGE's).
pub type Beside = (Vec<(i64, i64)>, Vec<u64>);

#[derive(Debug)]
pub enum Action {
    Append(Vec<(i64, i64)>),
    DeleteWhere(u8, u8, bool),
    DeleteIds(Vec<u64>),
    Update(u8, u8, i64, bool),
    UpdateIds(Vec<u64>, i64),
    /// Rows (id, (key, new val)): `val` and `name` patched (and the delta that made the
    /// new `val`, for a table that refuses patches), by id (`patch_rows`) or, with rows
    /// inserted and ids deleted beside them, from whole updated rows (`patch_changes`, as
    /// a MERGE writes them).
    PatchIds(Vec<(u64, (i64, i64))>, i64, Option<Beside>),
    Upsert(Vec<(i64, i64)>),
    /// Rows deleted, updated (id, new key and val) and inserted in one commit.
    Changes {
        deleted: Vec<u64>,
        updated: Vec<(u64, (i64, i64))>,
        inserted: Vec<(i64, i64)>,
    },
    Compact(u64, bool),
    Checkpoint,
    ChangeDataFeed(bool),
    Index,
    Overwrite(Vec<(i64, i64)>),
    Restore(u64),
    Alter(Vec<natal::SchemaChange>),
    /// Add a column of this name and type holding each row's key.
    AddValued(String, arrow::datatypes::DataType),
}

/// What an operation reported: the version it left the table at, and whether it published it.
pub struct Ran {
    pub version: u64,
    pub published: bool,
}

impl<F> From<natal::Committed<F>> for Ran {
    fn from(committed: natal::Committed<F>) -> Self {
        Self {
            version: committed.version,
            published: committed.published,
        }
    }
}

/// Runs `action` on `table`, whose writes plan against `schema` (padded to its extras).
pub async fn run(table: &Table, action: &Action, schema: &Arc<Schema>) -> natal::Result<Ran> {
    let batch = |rows: &[(i64, i64)]| pad(batch(rows), schema);
    let add_to_val = |delta: i64| padded_update(delta, schema.clone());
    let modulo = |m: u8, r: u8| key_matches(move |k| k.rem_euclid(m as i64) == r as i64);
    Ok(match action {
        Action::Append(rows) => table.append(vec![batch(rows)]).await?.into(),
        Action::DeleteWhere(m, r, false) => table.delete_where(modulo(*m, *r)).await?.into(),
        Action::DeleteWhere(m, r, true) => {
            let rows = RowMatch {
                filter: Some(KeyModulo::new(*m as i64, *r as i64)),
                ..Default::default()
            };
            table.delete_matching(rows).await?.into()
        }
        Action::DeleteIds(ids) => {
            let ids: Vec<RowId> = ids.iter().map(|v| RowId::from_u64(*v)).collect();
            table.delete_rows(&ids).await?.into()
        }
        Action::Update(m, r, d, false) => table
            .update_where(modulo(*m, *r), &add_to_val(*d))
            .await?
            .into(),
        Action::Update(m, r, d, true) => {
            let rows = RowMatch {
                filter: Some(KeyModulo::new(*m as i64, *r as i64)),
                blob_references: natal::BlobReferences::Stored,
                ..Default::default()
            };
            let update = crate::model_schema::carried_update(*d, schema.clone());
            // Even deltas write `val` and `name` as row patches (what an UPDATE does under
            // `natal.patch_max_share`), where the table takes them.
            if d % 2 == 0 {
                // Boxed: the model's future stays small enough for a test thread's stack.
                let every: Vec<usize> = (0..schema.fields.len()).collect();
                let patched = table.patch_matching(rows.clone(), (&[1, 2], &every), &update);
                let patched = Box::pin(patched);
                match patched.await {
                    Err(natal::Error::InvalidInput(m)) if m.contains("update the rows instead") => {
                    }
                    patched => return Ok(patched?.0.into()),
                }
            }
            table.update_matching(rows, &update).await?.into()
        }
        Action::UpdateIds(ids, d) => {
            let ids: Vec<RowId> = ids.iter().map(|v| RowId::from_u64(*v)).collect();
            table.update_rows(&ids, &add_to_val(*d)).await?.into()
        }
        Action::PatchIds(rows, d, Some((inserted, deleted))) => {
            let read = table.snapshot().await?;
            let mut at = Vec::with_capacity(rows.len());
            for id in rows.iter().map(|(id, _)| id).chain(deleted) {
                let id = RowId::from_u64(*id);
                at.push((id, read.resolve(id).await?.expect("a live row")));
            }
            let deleted = at.split_off(rows.len());
            let values: Vec<(i64, i64)> = rows.iter().map(|(_, v)| *v).collect();
            let ids: Vec<RowId> = at.iter().map(|(id, _)| *id).collect();
            // `val` and `name` of whole rows (the others as `batch` pads them: not written).
            let changes = natal::RowChangeSet {
                deleted: deleted.clone(),
                updated: vec![(batch(&values), at)],
                inserted: vec![batch(inserted)],
            };
            let patched = table.patch_changes(&[1, 2], changes);
            match Box::pin(patched).await {
                // As a MERGE where patches are refused: the updates (keeping the other
                // columns) and the inserts in one version.
                Err(natal::Error::InvalidInput(m)) if m.contains("update the rows instead") => {
                    let update = crate::model_schema::carried_update(*d, schema.clone());
                    let request = natal::ScanRequest {
                        with_row_id: true,
                        with_row_addr: true,
                        ..Default::default()
                    };
                    let found = table.snapshot().await?.take(&ids, request).await?;
                    let column = |name: &str| {
                        let column = found.column_by_name(name).expect("a system column");
                        column
                            .as_primitive::<arrow::datatypes::UInt64Type>()
                            .clone()
                    };
                    let (found_ids, found_addrs) = (column(natal::ROW_ID), column(natal::ROW_ADDR));
                    let at = (found_ids.values().iter().zip(found_addrs.values().iter()))
                        .map(|(&id, &addr)| {
                            (RowId::from_u64(id), natal::RowAddress::from_u64(addr))
                        })
                        .collect();
                    let changes = natal::RowChangeSet {
                        deleted,
                        updated: vec![(update(&found)?, at)],
                        inserted: vec![batch(inserted)],
                    };
                    table.commit_changes(changes).await?.into()
                }
                patched => patched?.into(),
            }
        }
        Action::PatchIds(rows, d, None) => {
            let ids: Vec<RowId> = rows.iter().map(|(id, _)| RowId::from_u64(*id)).collect();
            // `name` follows `val` (`common::batch`): both are patched, in the other order.
            let names = (rows.iter()).map(|(_, (key, val))| format!("n{key}-{val}"));
            let vals = rows.iter().map(|(_, (_, val))| *val);
            let values = arrow::array::RecordBatch::try_from_iter([
                (
                    "name",
                    Arc::new(arrow::array::StringArray::from_iter_values(names))
                        as arrow::array::ArrayRef,
                ),
                (
                    "val",
                    Arc::new(arrow::array::Int64Array::from_iter_values(vals)) as _,
                ),
            ])
            .expect("a batch");
            match Box::pin(table.patch_rows(&ids, values)).await {
                // What patches do not cover yet (an indexed column): the same change as
                // an update that keeps the other columns.
                Err(natal::Error::InvalidInput(m)) if m.contains("update the rows instead") => {
                    let update = crate::model_schema::carried_update(*d, schema.clone());
                    table.update_rows(&ids, &update).await?.into()
                }
                patched => patched?.into(),
            }
        }
        Action::Upsert(rows) => table.upsert("key", vec![batch(rows)]).await?.into(),
        Action::Changes {
            deleted,
            updated,
            inserted,
        } => {
            // Ids and addresses as of the version the handle plans against.
            let read = table.snapshot().await?;
            let mut at = Vec::new();
            for id in deleted.iter().chain(updated.iter().map(|(id, _)| id)) {
                let id = RowId::from_u64(*id);
                let addr = read.resolve(id).await?.expect("a live row");
                at.push((id, addr));
            }
            let updated_at = at.split_off(deleted.len());
            let values: Vec<(i64, i64)> = updated.iter().map(|(_, v)| *v).collect();
            let changes = natal::RowChangeSet {
                deleted: at,
                updated: vec![(batch(&values), updated_at)],
                inserted: vec![batch(inserted)],
            };
            table.commit_changes(changes).await?.into()
        }
        Action::Compact(target, only_small) => {
            let options = CompactOptions {
                target_rows_per_fragment: Some(*target),
                max_deleted_fraction: if *only_small { 1.0 } else { 0.2 },
                // Some compactions repack: blob values copied, not reused.
                reuse_blob_sidecars: *target % 3 != 0,
                ..Default::default()
            };
            table.compact(options).await?.into()
        }
        Action::Checkpoint => table.checkpoint().await?.into(),
        Action::ChangeDataFeed(on) => table.set_change_data_feed(*on).await?.into(),
        Action::Index => table.create_index(INDEX, "val").await?.into(),
        Action::Overwrite(rows) => table.overwrite(vec![batch(rows)]).await?.into(),
        Action::Restore(v) => table.restore(*v).await?.into(),
        Action::Alter(changes) => table.alter(changes.clone()).await?.into(),
        Action::AddValued(name, data_type) => {
            crate::model_schema::add_valued(table, name, data_type.clone())
                .await?
                .into()
        }
    })
}
