//! Row patches written ([`Table::patch_rows`], seed 004's `patch_rows`): some columns of
//! some rows get new values and the rows stay where they are. Per fragment holding some of
//! the rows, one patch file holds only the changed columns of only those rows, in offset
//! order; reads merge it (`io::row_patches`). A patched row keeps its address, so nothing
//! is added to the relocation view and no index keyed by id needs an entry for it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use futures::TryStreamExt;
use roaring::RoaringBitmap;

use super::commit::{write_patches, Action, NewFragment, NewPatch};
use super::progress::ScanProgress;
use super::write::{
    delete_files, system_columns, updated_rows, BatchUpdate, FragmentWriter, RowMatch,
};
use super::{Committed, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::{Field, Schema};
use crate::rowid::{FragmentId, RowAddress, RowId};

impl Table {
    /// Gives the rows `ids` the values of `values`' columns, row `i` of `values` to
    /// `ids[i]`; each column of `values` is named as a column of the table (and cast to its
    /// type), and the row's other columns keep their values. The rows keep their ids and
    /// their addresses: what is written is one row patch per fragment holding some of them,
    /// with only these columns of only these rows, which reads merge until compaction folds
    /// it into new data files.
    ///
    /// # Errors
    /// [`Error::RowNotFound`] if an id names no live row; [`Error::InvalidInput`] for an id
    /// given twice, a row count other than the ids', an unknown column or one given twice, a
    /// value its column cannot hold (a null in a non-null column, a type that does not cast),
    /// and for what row patches do not cover yet: blob columns. A patch of an indexed
    /// column takes its fragment out of that index's segments: reads scan the fragment's
    /// rows until the index is built for it again.
    /// Nothing is written then. On a table recording change data, the rows' values before
    /// the patch are captured with it.
    pub async fn patch_rows(&self, ids: &[RowId], values: RecordBatch) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let schema = read.schema().clone();
        if values.num_rows() != ids.len() {
            return Err(Error::invalid(format!(
                "{} rows of values for {} row ids",
                values.num_rows(),
                ids.len()
            )));
        }
        let mut seen = HashSet::with_capacity(ids.len());
        if let Some(twice) = ids.iter().find(|id| !seen.insert(**id)) {
            return Err(Error::invalid(format!("row id {twice} is given twice")));
        }
        let (patched, columns) = patched_columns(&schema, &values)?;
        refused(&patched)?;
        // One lookup per id: measured faster than a take of no column (`update_rows`'s way)
        // for large patches (500K ids: ~100 ms against 277 ms, `benches/patches.rs`).
        let mut addrs = Vec::with_capacity(ids.len());
        for &id in ids {
            addrs.push(read.resolve(id).await?.ok_or(Error::RowNotFound(id))?);
        }
        (self.commit_patches(&read, &patched, &addrs, &columns, Vec::new())).await
    }

    /// Updates the rows `rows` names as row patches: `update` computes their new values (as
    /// for [`Self::update_matching`]), of which only the columns at `assigned` (positions in
    /// the table's schema) are written. Of the matched rows, only the columns at `reads`
    /// (what `update` reads) are read; the others reach `update` as nulls. The committed
    /// version, and the rows it patched.
    ///
    /// # Errors
    /// As [`Self::patch_rows`] for what patches do not cover yet, and for values the
    /// columns cannot hold.
    pub async fn patch_matching(
        &self,
        rows: RowMatch,
        (assigned, reads): (&[usize], &[usize]),
        update: BatchUpdate<'_>,
    ) -> Result<(Committed, u64)> {
        let read = self.read_snapshot().await?;
        let schema = read.schema().clone();
        let (positions, patched) = assigned_fields(&schema, assigned)?;
        refused(&patched)?;
        let mut progress = ScanProgress::new(&self.options.progress, "updating", &read);
        let read_names: Vec<String> = (schema.fields.iter().enumerate())
            .filter(|(p, _)| reads.contains(p))
            .map(|(_, f)| f.name.clone())
            .collect();
        let user = schema.to_arrow();
        let mut scan = read
            .scan(progress.counting(rows.scan(Some(read_names))))
            .await?;
        let patch_schema = patched.to_arrow();
        let mut addrs = Vec::new();
        let mut pieces: Vec<RecordBatch> = Vec::new();
        while let Some(matched) = scan.try_next().await? {
            if matched.num_rows() == 0 {
                continue;
            }
            let (_, at) = system_columns(&matched)?;
            let matched = full_width(&user, &matched)?;
            let updated = updated_rows(update, &matched)?;
            pieces.push(patch_piece(&updated, &positions, &patched, &patch_schema)?);
            addrs.extend(at);
            progress.matched(matched.num_rows());
        }
        drop(progress);
        let values = arrow::compute::concat_batches(&patch_schema, &pieces)?;
        let committed =
            (self.commit_patches(&read, &patched, &addrs, values.columns(), Vec::new())).await?;
        Ok((committed, addrs.len() as u64))
    }

    /// Commits `updated` (rows of the table's user columns, each with the id and address of
    /// the row it replaces, as [`RowChangeSet::updated`](super::RowChangeSet) holds them) as
    /// row patches of their columns at `assigned` (positions in the table's schema; the
    /// other columns are not written), and `inserted` as new rows, in one version.
    ///
    /// # Errors
    /// As [`Self::patch_rows`] for what patches do not cover yet, and for values the
    /// columns cannot hold.
    pub async fn patch_updated(
        &self,
        assigned: &[usize],
        updated: Vec<(RecordBatch, Vec<(RowId, RowAddress)>)>,
        inserted: Vec<RecordBatch>,
    ) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let (positions, patched) = assigned_fields(read.schema(), assigned)?;
        refused(&patched)?;
        let patch_schema = patched.to_arrow();
        let mut addrs = Vec::new();
        let mut pieces = Vec::with_capacity(updated.len());
        for (batch, rows) in &updated {
            if batch.num_rows() != rows.len() {
                return Err(Error::invalid(format!(
                    "{} updated rows with {} ids",
                    batch.num_rows(),
                    rows.len()
                )));
            }
            pieces.push(patch_piece(batch, &positions, &patched, &patch_schema)?);
            addrs.extend(rows.iter().map(|&(_, addr)| addr));
        }
        let mut seen = HashSet::with_capacity(addrs.len());
        if let Some(twice) = addrs.iter().find(|a| !seen.insert(**a)) {
            return Err(Error::invalid(format!("row at {twice:?} is updated twice")));
        }
        let values = arrow::compute::concat_batches(&patch_schema, &pieces)?;
        let target = read.manifest().fragment_row_target();
        let mut writer = FragmentWriter::new(&self.store, read.schema(), target, true);
        let written = async {
            for batch in inserted {
                writer.push_new(batch).await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        let fragments = writer.finish_after(written).await?;
        (self.commit_patches(&read, &patched, &addrs, values.columns(), fragments)).await
    }

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

    /// Writes `columns` (of `patched`'s fields; row `i` the new values of the row at
    /// `addrs[i]`, each named once) as one patch per fragment, and commits them on `read`
    /// with `fragments` of new rows (deleted with the patches if the commit fails).
    async fn commit_patches(
        &self,
        read: &Snapshot,
        patched: &Schema,
        addrs: &[RowAddress],
        columns: &[ArrayRef],
        fragments: Vec<NewFragment>,
    ) -> Result<Committed> {
        let patches = match self.written_patches(patched, addrs, columns).await {
            Ok(patches) => patches,
            Err(e) => {
                delete_files(
                    &self.store,
                    read.schema(),
                    fragments.iter().map(|f| &f.file),
                )
                .await;
                return Err(e);
            }
        };
        match fragments.is_empty() {
            true => {
                self.commit(read, Action::Patch { patches, fragments })
                    .await
            }
            // New rows: small fragments are merged after, as after any write.
            false => {
                let action = Action::Patch { patches, fragments };
                self.commit_write_then_merge(read, action, None).await
            }
        }
    }
}

impl Table {
    /// Writes `columns` (of `patched`'s fields; row `i` the new values of the row at
    /// `addrs[i]`, each named once) as one patch file per fragment holding some of the rows,
    /// its rows in offset order; nothing is left written if it fails.
    async fn written_patches(
        &self,
        patched: &Schema,
        addrs: &[RowAddress],
        columns: &[ArrayRef],
    ) -> Result<Vec<NewPatch>> {
        // The rows of `columns` per fragment, with their offsets.
        let mut by_fragment: BTreeMap<FragmentId, Vec<(u32, u32)>> = BTreeMap::new();
        for (position, addr) in addrs.iter().enumerate() {
            (by_fragment.entry(addr.fragment_id()).or_default())
                .push((addr.offset(), position as u32));
        }
        let batches = (by_fragment.into_iter())
            .map(|(fragment, mut at)| {
                at.sort_unstable();
                let positions = UInt32Array::from_iter_values(at.iter().map(|&(_, p)| p));
                let taken: Vec<ArrayRef> = (columns.iter())
                    .map(|c| arrow::compute::take(c.as_ref(), &positions, None))
                    .collect::<std::result::Result<_, _>>()?;
                let batch = RecordBatch::try_new(patched.to_arrow(), taken)?;
                let offsets: RoaringBitmap = at.iter().map(|&(offset, _)| offset).collect();
                Ok((fragment, batch, offsets))
            })
            .collect::<Result<Vec<_>>>()?;
        write_patches(&self.store, patched, batches).await
    }
}

/// An update's rows taken as row patches while the columns they change stay a small share
/// of the table's bytes: per set of changed columns, their new values and the rows' addresses.
pub(super) struct Patching {
    most: f64,
    /// Every column some taken row changed, by position.
    changed: BTreeSet<usize>,
    groups: BTreeMap<Vec<usize>, (Vec<RecordBatch>, Vec<RowAddress>)>,
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
        let mut every = self.changed.clone();
        every.extend(changed.iter().copied());
        let field_ids: Vec<u32> = every.iter().map(|&p| schema.fields[p].id).collect();
        if !every.is_empty() && !read.patches_suit(&field_ids, self.most) {
            return Ok(false);
        }
        self.changed = every;
        self.ids.extend_from_slice(ids);
        if changed.is_empty() {
            return Ok(true);
        }
        let (positions, patched) = assigned_fields(schema, &changed)?;
        let piece = patch_piece(updated, &positions, &patched, &patched.to_arrow())?;
        let (pieces, at) = self.groups.entry(positions).or_default();
        pieces.push(piece);
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
        let mut patches: Vec<NewPatch> = Vec::new();
        for (positions, (pieces, addrs)) in self.groups {
            let (_, patched) = assigned_fields(read.schema(), &positions)?;
            let written = match arrow::compute::concat_batches(&patched.to_arrow(), &pieces) {
                Ok(values) => (table.written_patches(&patched, &addrs, values.columns())).await,
                Err(e) => Err(e.into()),
            };
            match written {
                Ok(written) => patches.extend(written),
                Err(e) => {
                    let files = patches.iter().map(|p| &p.file);
                    delete_files(&table.store, read.schema(), files).await;
                    return Err(e);
                }
            }
        }
        if patches.is_empty() {
            return Ok(Committed::unchanged(read, Default::default()));
        }
        let action = Action::Patch {
            patches,
            fragments: Vec::new(),
        };
        table.commit(read, action).await
    }
}

/// The patch share of a table that sets none, where the session sets none either: an update
/// of columns holding at most a tenth of the table's bytes (a label, a score, a flag beside
/// embeddings or documents) writes row patches. Reads of whole rows through one patch
/// generation cost about what the folded table's do; reads of only the patched column cost
/// more (BENCHMARKS.md), which compaction folds away.
pub const DEFAULT_PATCH_MAX_SHARE: f64 = 0.1;

impl Table {
    /// Sets (`Some`, in `0..=1`) or clears the table's patch share
    /// ([`crate::format::Manifest::patch_max_share`]): an update writes row patches when the
    /// columns it changes hold at most this share of the table's bytes. Publishes nothing
    /// when the table already has it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a share outside `0..=1`.
    pub async fn set_patch_max_share(&self, share: Option<f64>) -> Result<Committed> {
        check_patch_share(share)?;
        let read = self.read_snapshot().await?;
        if read.manifest().patch_max_share == share {
            return Ok(Committed::unchanged(&read, Default::default()));
        }
        self.commit(&read, Action::SetPatchMaxShare { share }).await
    }
}

impl Snapshot {
    /// The patch share an update of this version uses when its session sets none: the
    /// table's, or [`DEFAULT_PATCH_MAX_SHARE`].
    pub fn patch_max_share(&self) -> f64 {
        (self.manifest().patch_max_share).unwrap_or(DEFAULT_PATCH_MAX_SHARE)
    }

    /// Whether an update of the columns `field_ids` writes row patches under the patch share
    /// `most`: patches can hold them and they hold at most that share of the bytes.
    pub fn patches_suit(&self, field_ids: &[u32], most: f64) -> bool {
        let share = || self.patch_share(field_ids);
        !field_ids.is_empty() && most > 0.0 && share().is_some_and(|share| share <= most)
    }

    /// The share of this version's bytes (before compression, by the statistics of its data
    /// files and row patches) the columns `field_ids` hold: what a patch of them writes of what a rewrite of the
    /// rows writes. `None` when patches cannot hold them yet (a blob column) or the files
    /// do not say.
    pub fn patch_share(&self, field_ids: &[u32]) -> Option<f64> {
        let schema = self.schema();
        let fields = (field_ids.iter())
            .map(|&id| schema.field_by_id(id).cloned())
            .collect::<Option<Vec<Field>>>()?;
        if refused(&patch_schema(schema, fields)).is_err() {
            return None;
        }
        let every = schema.field_ids();
        let fragments = &self.manifest().fragments;
        let bytes = |ids: &[u32]| {
            fragments
                .iter()
                .map(|f| f.uncompressed_bytes_read(ids))
                .sum::<u64>()
        };
        let total = bytes(&every);
        (total > 0).then(|| bytes(field_ids) as f64 / total as f64)
    }
}

/// `share`, if it is one, as a patch share: [`Error::InvalidInput`] out of `0..=1`.
pub(super) fn check_patch_share(share: Option<f64>) -> Result<()> {
    match share.filter(|&s| !crate::format::is_patch_share(s)) {
        Some(share) => Err(Error::invalid(format!(
            "a patch share is between 0 and 1, not {share}"
        ))),
        None => Ok(()),
    }
}

/// `read` (some of the table's user columns, then `_rowid` and `_rowaddr`) as every user
/// column of `user`, those not read as nulls, then the system columns.
fn full_width(user: &arrow::datatypes::SchemaRef, read: &RecordBatch) -> Result<RecordBatch> {
    let rows = read.num_rows();
    let mut fields: Vec<arrow::datatypes::FieldRef> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for field in user.fields() {
        match read.column_by_name(field.name()) {
            Some(column) => {
                fields.push(read.schema().field_with_name(field.name())?.clone().into());
                columns.push(column.clone());
            }
            None => {
                fields.push(Arc::new(field.as_ref().clone().with_nullable(true)));
                columns.push(arrow::array::new_null_array(field.data_type(), rows));
            }
        }
    }
    let schema = read.schema();
    for name in [super::scan_request::ROW_ID, super::scan_request::ROW_ADDR] {
        let index = schema.index_of(name)?;
        fields.push(schema.fields()[index].clone());
        columns.push(read.column(index).clone());
    }
    let schema = arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone());
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// Why patches of `patched`'s columns cannot be written yet, if they cannot: one is a blob
/// column. (A patch of an indexed column uncovers its fragment in that index's segments,
/// `IndexSection::uncover`, so readers scan the fragment until it is indexed again.)
fn refused(patched: &Schema) -> Result<()> {
    if let Some(blob) = patched.fields.iter().find(|f| f.blob.is_some()) {
        return Err(Error::invalid(format!(
            "column {} is a blob column, which row patches do not hold yet: update the rows \
             instead",
            blob.name
        )));
    }
    Ok(())
}

/// The columns at `positions` of `updated` (rows of the table's user columns), as the patch
/// files of `patched` hold them (cast to their types), in a batch of `patch_schema`.
fn patch_piece(
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
fn assigned_fields(schema: &Schema, assigned: &[usize]) -> Result<(Vec<usize>, Schema)> {
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
fn patch_schema(schema: &Schema, fields: Vec<Field>) -> Schema {
    // The constraints name columns a patch may not hold: its files have no need of them.
    Schema {
        fields,
        constraints: Vec::new(),
        ..schema.clone()
    }
}

/// The table's columns `values` names (in table order, with their ids: the patch files'
/// schema) and `values`' columns cast to their types, in that order.
fn patched_columns(schema: &Schema, values: &RecordBatch) -> Result<(Schema, Vec<ArrayRef>)> {
    let given = values.schema();
    let mut named: Vec<(usize, &Field, ArrayRef)> = Vec::new();
    for (column, field) in values.columns().iter().zip(given.fields()) {
        let name = field.name();
        let Some((position, target)) =
            (schema.fields.iter().enumerate()).find(|(_, f)| &f.name == name)
        else {
            return Err(Error::invalid(format!("no column named {name} to patch")));
        };
        if named.iter().any(|(p, _, _)| *p == position) {
            return Err(Error::invalid(format!("column {name} is given twice")));
        }
        let cast = cast_to(column, target)?;
        named.push((position, target, cast));
    }
    if named.is_empty() {
        return Err(Error::invalid("no column to patch"));
    }
    named.sort_by_key(|(position, _, _)| *position);
    let patched = patch_schema(schema, named.iter().map(|(_, f, _)| (*f).clone()).collect());
    Ok((patched, named.into_iter().map(|(_, _, c)| c).collect()))
}

/// `column` as `target`'s type, its values checked against `target`'s nullability.
fn cast_to(column: &ArrayRef, target: &Field) -> Result<ArrayRef> {
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
