//! Row patches written ([`Table::patch_rows`], seed 004's `patch_rows`): some columns of
//! some rows get new values and the rows stay where they are. Per fragment holding some of
//! the rows, one patch file holds only the changed columns of only those rows, in offset
//! order; reads merge it (`io::row_patches`). A patched row keeps its address, so nothing
//! is added to the relocation view and no index keyed by id needs an entry for it.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use futures::TryStreamExt;

use super::commit::Action;
use super::patching::{assigned_fields, cast_to, patch_piece, patch_schema, PatchGroup};
use super::progress::ScanProgress;
use super::write::{system_columns, updated_rows, BatchUpdate, FragmentWriter, RowMatch};
use super::{Committed, RowChangeSet, Snapshot, Table};
use crate::error::{Error, Result};
use crate::format::{Field, Schema};
use crate::rowid::RowId;

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
        let values = PatchGroup {
            schema: patched,
            addrs,
            columns,
        };
        (self.commit_patches(&read, vec![values], Vec::new(), Vec::new())).await
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
        let rows = addrs.len() as u64;
        let values = PatchGroup::of(patched, addrs, &pieces)?;
        let committed = (self.commit_patches(&read, vec![values], Vec::new(), Vec::new())).await?;
        Ok((committed, rows))
    }

    /// Commits `changes` as one version with its updates written as row patches of the
    /// columns at `assigned` (positions in the table's schema; the updated batches' other
    /// columns are not written): what [`Self::commit_changes`] commits, for an update of a
    /// few columns (a MERGE's). Deleted rows become tombstones and inserted rows new rows,
    /// as there.
    ///
    /// # Errors
    /// As [`Self::patch_rows`] for what patches do not cover yet, and for values the
    /// columns cannot hold; a row named twice (updated twice, or updated and deleted) is
    /// `InvalidInput`. Nothing is written then.
    pub async fn patch_changes(
        &self,
        assigned: &[usize],
        changes: RowChangeSet,
    ) -> Result<Committed> {
        let rows = changes.changed_rows()?;
        let RowChangeSet {
            deleted,
            updated,
            inserted,
        } = changes;
        let read = self.read_snapshot().await?;
        let (positions, patched) = assigned_fields(read.schema(), assigned)?;
        refused(&patched)?;
        let patch_schema = patched.to_arrow();
        let addrs = rows[deleted.len()..]
            .iter()
            .map(|&(_, addr)| addr)
            .collect();
        let pieces = (updated.iter())
            .map(|(batch, _)| patch_piece(batch, &positions, &patched, &patch_schema))
            .collect::<Result<Vec<_>>>()?;
        let values = PatchGroup::of(patched, addrs, &pieces)?;
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
        (self.commit_patches(&read, vec![values], fragments, deleted)).await
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
