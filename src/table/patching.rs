//! Row patches as updates write them: the cells an update changed, found by comparing its
//! new values with the rows it read ([`Patching`], for `update_rows`, `update_where` and
//! `update_matching`), and what every patch writer shares: the values cut into one patch
//! file per fragment and committed ([`Table::commit_patches`]), the patched columns' schema,
//! values cast to their types.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use roaring::RoaringBitmap;

use super::commit::{delete_files, write_patches, Action, NewFragment, NewPatch};
use super::{Committed, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::{Field, Schema};
use crate::rowid::{FragmentId, RowAddress, RowId};

impl Table {
    /// Commits `updated` (the new values of `found`'s rows at `addrs`, all user columns, as
    /// an update closure computed them) as row patches of the columns whose values changed,
    /// when those hold at most the table's patch share of its bytes and patches can hold
    /// them (nothing is published when no value changed); `None`, with nothing written,
    /// when the rows are to be rewritten instead.
    pub(super) async fn patch_if_narrow(
        &self,
        read: &Snapshot,
        (found, updated): (&RecordBatch, &RecordBatch),
        (ids, addrs): (&[RowId], &[RowAddress]),
    ) -> Result<Option<Committed>> {
        let Some(mut patching) = Patching::new(read.patch_max_share()) else {
            return Ok(None);
        };
        match patching.take(read, (found, updated), (ids, addrs))? {
            true => Ok(Some(patching.commit(self, read).await?)),
            false => Ok(None),
        }
    }
}

/// New values of some rows as row patches of some columns: the patched columns' schema,
/// the rows' addresses (each named once) and their values, row `i` of the row at `addrs[i]`.
pub(super) struct PatchGroup {
    pub schema: Schema,
    pub addrs: Vec<RowAddress>,
    pub columns: Vec<ArrayRef>,
}

impl PatchGroup {
    /// The rows at `addrs` with the values of `pieces` (batches of `schema`'s columns, in
    /// the order of `addrs`).
    pub(super) fn of(
        schema: Schema,
        addrs: Vec<RowAddress>,
        pieces: &[RecordBatch],
    ) -> Result<Self> {
        let values = arrow::compute::concat_batches(&schema.to_arrow(), pieces)?;
        Ok(Self {
            schema,
            addrs,
            columns: values.columns().to_vec(),
        })
    }

    /// Its rows cut per fragment holding some, each in offset order, with their offsets.
    fn per_fragment(&self) -> Result<Vec<(FragmentId, RecordBatch, RoaringBitmap)>> {
        let mut by_fragment: BTreeMap<FragmentId, Vec<(u32, u32)>> = BTreeMap::new();
        for (position, addr) in self.addrs.iter().enumerate() {
            (by_fragment.entry(addr.fragment_id()).or_default())
                .push((addr.offset(), position as u32));
        }
        (by_fragment.into_iter())
            .map(|(fragment, mut at)| {
                at.sort_unstable();
                let positions = UInt32Array::from_iter_values(at.iter().map(|&(_, p)| p));
                let taken: Vec<ArrayRef> = (self.columns.iter())
                    .map(|c| arrow::compute::take(c.as_ref(), &positions, None))
                    .collect::<std::result::Result<_, _>>()?;
                let batch = RecordBatch::try_new(self.schema.to_arrow(), taken)?;
                let offsets: RoaringBitmap = at.iter().map(|&(offset, _)| offset).collect();
                Ok((fragment, batch, offsets))
            })
            .collect()
    }
}

impl Table {
    /// Writes `groups` as one patch file per group and fragment holding some of its rows,
    /// and commits them on `read` with `fragments` of new rows and the deletes of `deleted`,
    /// in one version; every file written (the fragments' too) is deleted if it fails.
    /// Publishes nothing when there is nothing to write.
    pub(super) async fn commit_patches(
        &self,
        read: &Snapshot,
        groups: Vec<PatchGroup>,
        fragments: Vec<NewFragment>,
        deleted: Vec<(RowId, RowAddress)>,
    ) -> Result<Committed> {
        let mut patches: Vec<NewPatch> = Vec::new();
        for group in groups {
            let written = match group.per_fragment() {
                Ok(batches) => write_patches(&self.store, &group.schema, batches).await,
                Err(e) => Err(e),
            };
            match written {
                Ok(written) => patches.extend(written),
                Err(e) => {
                    let files =
                        (patches.iter().map(|p| &p.file)).chain(fragments.iter().map(|f| &f.file));
                    delete_files(&self.store, read.schema(), files).await;
                    return Err(e);
                }
            }
        }
        let merges = !fragments.is_empty();
        let action = Action::Patch {
            patches,
            fragments,
            deleted,
        };
        if action.changes_nothing() {
            return Ok(Committed::unchanged(read, Default::default()));
        }
        match merges {
            false => self.commit(read, action).await,
            // New rows: small fragments are merged after, as after any write.
            true => self.commit_write_then_merge(read, action, None).await,
        }
    }
}

/// An update's rows taken as row patches while the columns they change stay a small share
/// of the table's bytes: per set of changed columns (positions), the patch files' schema,
/// their new values and the rows' addresses.
pub(super) struct Patching {
    most: f64,
    /// Every column some taken row changed, by position.
    changed: BTreeSet<usize>,
    groups: BTreeMap<Vec<usize>, (Schema, Vec<RecordBatch>, Vec<RowAddress>)>,
    ids: Vec<RowId>,
}

impl Patching {
    /// Patches under the share `most`; `None` when it is 0 (the update rewrites).
    pub(super) fn new(most: f64) -> Option<Self> {
        (most > 0.0).then(|| Self {
            most,
            changed: BTreeSet::new(),
            groups: BTreeMap::new(),
            ids: Vec::new(),
        })
    }

    /// Takes `updated` (the new values of `matched`'s rows `ids` at `addrs`, every user
    /// column) as patches of the columns whose values changed; false, taking nothing, when
    /// those and the columns taken before hold more than the share or cannot be patched.
    pub(super) fn take(
        &mut self,
        read: &Snapshot,
        (matched, updated): (&RecordBatch, &RecordBatch),
        (ids, addrs): (&[RowId], &[RowAddress]),
    ) -> Result<bool> {
        let schema = read.schema();
        let changed: Vec<usize> = (0..schema.fields.len())
            .filter(
                |&p| match (matched.columns().get(p), updated.columns().get(p)) {
                    (Some(before), Some(after)) => before.to_data() != after.to_data(),
                    _ => true,
                },
            )
            .collect();
        // The share is weighed again only when a column joins those changed so far.
        if changed.iter().any(|p| !self.changed.contains(p)) {
            let mut every = self.changed.clone();
            every.extend(changed.iter().copied());
            let field_ids: Vec<u32> = every.iter().map(|&p| schema.fields[p].id).collect();
            if !read.patches_suit(&field_ids, self.most) {
                return Ok(false);
            }
            self.changed = every;
        }
        self.ids.extend_from_slice(ids);
        if changed.is_empty() {
            return Ok(true);
        }
        // `changed` is ascending, as `assigned_fields` orders a group's columns.
        let (patched, pieces, at) = match self.groups.entry(changed.clone()) {
            Entry::Occupied(group) => group.into_mut(),
            Entry::Vacant(new) => {
                let (_, patched) = assigned_fields(schema, &changed)?;
                new.insert((patched, Vec::new(), Vec::new()))
            }
        };
        pieces.push(patch_piece(
            updated,
            &changed,
            patched,
            &patched.to_arrow(),
        )?);
        at.extend_from_slice(addrs);
        Ok(true)
    }

    /// The rows taken so far (to rewrite them when a later batch is too wide for patches).
    pub(super) fn ids(&self) -> &[RowId] {
        &self.ids
    }

    /// Writes the patches taken and commits them on `read` in one version; publishes
    /// nothing when no value changed.
    pub(super) async fn commit(self, table: &Table, read: &Snapshot) -> Result<Committed> {
        let groups = (self.groups.into_values())
            .map(|(patched, pieces, addrs)| PatchGroup::of(patched, addrs, &pieces))
            .collect::<Result<Vec<_>>>()?;
        table
            .commit_patches(read, groups, Vec::new(), Vec::new())
            .await
    }
}

/// The columns at `positions` of `updated` (rows of the table's user columns), as the patch
/// files of `patched` hold them (cast to their types), in a batch of `patch_schema`.
pub(super) fn patch_piece(
    updated: &RecordBatch,
    positions: &[usize],
    patched: &Schema,
    patch_schema: &arrow::datatypes::SchemaRef,
) -> Result<RecordBatch> {
    let columns = (positions.iter().zip(&patched.fields))
        .map(|(&p, field)| {
            let column = updated.columns().get(p).ok_or_else(|| {
                Error::invalid(format!("an updated row has no column {}", field.name))
            })?;
            cast_to(column, field)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(patch_schema.clone(), columns)?)
}

/// The positions `assigned` names (sorted, once each) and the schema of patch files holding
/// those columns of `schema`.
pub(super) fn assigned_fields(schema: &Schema, assigned: &[usize]) -> Result<(Vec<usize>, Schema)> {
    let mut positions = assigned.to_vec();
    positions.sort_unstable();
    positions.dedup();
    let fields = (positions.iter())
        .map(|&p| schema.fields.get(p).cloned())
        .collect::<Option<Vec<Field>>>()
        .filter(|f| !f.is_empty())
        .ok_or_else(|| Error::invalid("no column of the table to patch"))?;
    Ok((positions, patch_schema(schema, fields)))
}

/// The schema of patch files holding `fields` (of `schema`, in its order).
pub(super) fn patch_schema(schema: &Schema, fields: Vec<Field>) -> Schema {
    // The constraints name columns a patch may not hold: its files have no need of them.
    Schema {
        fields,
        constraints: Vec::new(),
        ..schema.clone()
    }
}

/// `column` as `target`'s type, its values checked against `target`'s nullability.
pub(super) fn cast_to(column: &ArrayRef, target: &Field) -> Result<ArrayRef> {
    let name = &target.name;
    let cast = match column.data_type() == &target.data_type {
        true => column.clone(),
        false => {
            let options = arrow::compute::CastOptions {
                safe: false,
                ..Default::default()
            };
            arrow::compute::cast_with_options(column, &target.data_type, &options).map_err(|e| {
                Error::invalid(format!(
                    "column {name} is {}; values of type {} do not cast to it: {e}",
                    target.data_type,
                    column.data_type()
                ))
            })?
        }
    };
    if !target.nullable && cast.null_count() > 0 {
        return Err(Error::invalid(format!(
            "column {name} is NOT NULL; a patch gives it a null"
        )));
    }
    Ok(cast)
}
