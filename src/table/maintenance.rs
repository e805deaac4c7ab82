//! Maintenance: compaction, relocation checkpoints, restore and cleanup. None of these
//! changes what any version reads; they change cost.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use roaring::RoaringBitmap;

use super::commit::{Action, CarriedRow};
use super::id_order::GroupRows;
use super::scan_request::ScanRequest;
use super::snapshot::Snapshot;
use super::write::FragmentWriter;
use super::{Committed, ProgressHandle, Table};
use crate::error::{Error, Result};
use crate::format::{Fragment, IndexSection, Lineage, Manifest};
use crate::rowid::{FragmentId, RowAddress, RowId};

/// Which fragments compaction rewrites.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Rows per output fragment; `None`: the table's fragment size.
    pub target_rows_per_fragment: Option<u64>,
    /// A fragment with at least this fraction of deleted rows is rewritten even if large.
    pub max_deleted_fraction: f64,
    /// Told the rows rewritten so far (operation `"compacting"`).
    pub progress: ProgressHandle,
    /// Blob values stay in the sidecars they are in, named by the new files' Blob Reuse
    /// Index (default). `false` copies every value moved into sidecars of the new files: a
    /// repack, after which the old sidecars go with their files at cleanup.
    pub reuse_blob_sidecars: bool,
    /// With reuse, a packed sidecar whose live values hold less than this fraction of its
    /// bytes (`t$blob_sidecars`) is repacked: the values moved are copied into the new
    /// files' sidecars, so its dead bytes go once no file names it. 0 never repacks; a
    /// dedicated sidecar (one live value, all of it) never is. Default 0.5.
    pub repack_below_live_fraction: f64,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            target_rows_per_fragment: None,
            max_deleted_fraction: 0.1,
            progress: ProgressHandle::default(),
            reuse_blob_sidecars: true,
            repack_below_live_fraction: 0.5,
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Compaction {
    /// Fragments merged away.
    pub fragments_removed: usize,
    /// Fragments written in their place.
    pub fragments_added: usize,
    /// Live rows copied into the new fragments (with their ids).
    pub rows_rewritten: u64,
    /// Deleted rows the merged fragments held, gone from storage now.
    pub deleted_rows_dropped: u64,
}

/// Which versions and files cleanup keeps.
#[derive(Debug, Clone)]
pub struct CleanupPolicy {
    /// The newest this many versions are kept (at least 1: the latest is always kept).
    pub keep_versions: usize,
    /// Versions committed less than this long ago are kept.
    pub keep_newer_than: Duration,
    /// Unreferenced files younger than this are kept: they may belong to a commit in flight.
    pub min_file_age: Duration,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        Self {
            keep_versions: 10,
            keep_newer_than: Duration::from_secs(7 * 24 * 3600),
            min_file_age: Duration::from_secs(3600),
        }
    }
}

/// What a cleanup removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CleanupReport {
    /// Manifests deleted.
    pub versions_removed: u64,
    /// Files deleted: data, deletion, row-id, segment, index and manifest files.
    pub files_removed: u64,
    /// Their bytes.
    pub bytes_removed: u64,
}

/// Whether a file (table-relative) is one of `referenced`, or a blob sidecar of one: a
/// data file's sidecars live with it, and after it while another file's reuse index names
/// them (`referenced` holds those by name).
pub(super) fn is_referenced(relative: &str, referenced: &HashSet<String>) -> bool {
    referenced.contains(relative)
        || crate::format::sidecar_owner(relative).is_some_and(|owner| referenced.contains(&owner))
}

/// The sidecars of `read` whose live values hold less than `threshold` of their bytes, by
/// directory and physical id (a pack with deleted values; a dedicated sidecar's one live
/// value is all of it).
async fn sparse_packs(read: &Snapshot, threshold: f64) -> Result<crate::io::RepackSidecars> {
    let mut sparse = crate::io::RepackSidecars::new();
    for usage in read.blob_sidecars().await? {
        if usage.live_values == 0 || usage.live_bytes as f64 >= threshold * usage.size as f64 {
            continue;
        }
        let damaged = || Error::internal(format!("{} is not a sidecar's path", usage.path));
        let (directory, name) = usage.path.rsplit_once('/').ok_or_else(damaged)?;
        let id = name.strip_suffix(".blob").ok_or_else(damaged)?;
        let id = u32::from_str_radix(id, 16).map_err(|_| damaged())?;
        sparse.insert((crate::format::TablePath::parse(directory)?, id));
    }
    Ok(sparse)
}

/// For rows of one fragment of `group` (their addresses `addrs`), the data file holding each
/// blob column of `schema` (`None` where the fragment predates it).
fn blob_sources(
    schema: &crate::format::Schema,
    group: &[Fragment],
    addrs: &arrow::array::ArrayRef,
) -> Result<Vec<Option<crate::format::DataFile>>> {
    let lost = || Error::internal("a compaction's scan lost its rows' addresses");
    let addrs = arrow::array::AsArray::as_primitive_opt::<arrow::datatypes::UInt64Type>(addrs)
        .ok_or_else(lost)?;
    let fragment_of = |addr: u64| crate::rowid::RowAddress::from_u64(addr).fragment_id();
    let Some(&first) = addrs.values().first() else {
        return Ok(vec![
            None;
            schema
                .fields
                .iter()
                .filter(|f| f.blob.is_some())
                .count()
        ]);
    };
    // A fragment is read in its own batches: one source file per column for all the rows.
    if addrs
        .values()
        .iter()
        .any(|&a| fragment_of(a) != fragment_of(first))
    {
        return Err(Error::internal("a compaction's batch mixed fragments"));
    }
    let fragment = (group.iter())
        .find(|f| f.id == fragment_of(first))
        .ok_or_else(|| Error::internal("a compaction read a fragment it did not plan"))?;
    Ok((schema.fields.iter())
        .filter(|f| f.blob.is_some())
        .map(|f| {
            fragment
                .file_holding(f.id)
                .map(|at| fragment.files[at].clone())
        })
        .collect())
}

/// Every file a manifest references, as table-relative paths.
pub(super) fn referenced_files(manifest: &Manifest, into: &mut HashSet<String>) {
    let captured = manifest.change_data.iter().flatten();
    for fragment in manifest.fragments.iter().chain(captured) {
        for file in &fragment.files {
            into.insert(file.path.as_str().to_string());
            // Sidecars of other files its values stay in.
            let reused = file.blob_reuse_index.iter().flat_map(|i| i.sources());
            for local in reused.flat_map(|source| &source.local_ids) {
                into.insert(file.sidecar(*local).as_str().to_string());
            }
        }
        for deletion in fragment.deletion.iter().flat_map(|d| d.files()) {
            into.insert(deletion.path.as_str().to_string());
        }
        if let Some(row_ids) = fragment.row_ids.file() {
            into.insert(row_ids.path.as_str().to_string());
        }
        if let Some(lineage) = &fragment.lineage.updated_file {
            into.insert(lineage.path.as_str().to_string());
        }
        for patch in &fragment.patches {
            into.insert(patch.file.path.as_str().to_string());
        }
    }
    for segment in &manifest.fragment_segments {
        into.insert(segment.path.as_str().to_string());
        if let Some(patch) = &segment.patch {
            into.insert(patch.path.as_str().to_string());
        }
    }
    if let Some(checkpoint) = &manifest.relocation_checkpoint {
        into.insert(checkpoint.path.as_str().to_string());
    }
    for segment in &manifest.indexes.segments {
        into.insert(segment.path.as_str().to_string());
    }
}

impl Table {
    /// Merges small fragments and drops deleted rows. Every row keeps its id; the moved
    /// rows become range entries in the relocation view.
    pub async fn compact(&self, options: CompactOptions) -> Result<Committed<Compaction>> {
        let read = self.read_snapshot().await?;
        let target = options
            .target_rows_per_fragment
            .unwrap_or(read.manifest().fragment_row_target())
            .clamp(1, u32::MAX as u64);
        let groups = plan_compaction(
            &read.manifest().fragments,
            &read.manifest().indexes,
            target,
            options.max_deleted_fraction,
        );
        let threshold = options.repack_below_live_fraction;
        if !(0.0..=1.0).contains(&threshold) {
            return Err(Error::invalid(format!(
                "repack_below_live_fraction is a fraction from 0 to 1, not {threshold}"
            )));
        }
        let reuse = options.reuse_blob_sidecars.then_some(threshold);
        self.rewrite_groups(&read, groups, target, (reuse, &options.progress))
            .await
    }

    /// Rewrites each group of `read`'s fragments into fragments of at most `target` rows,
    /// without deleted rows, in one commit; nothing when there are no groups. With
    /// `reuse = Some(threshold)`, blob values stay in their sidecars, but for packed ones
    /// whose live bytes are under `threshold` of their size; `None` copies them all.
    pub(super) async fn rewrite_groups(
        &self,
        read: &Snapshot,
        groups: Vec<Vec<Fragment>>,
        target: u64,
        (reuse, progress): (Option<f64>, &ProgressHandle),
    ) -> Result<Committed<Compaction>> {
        if groups.is_empty() {
            return Ok(Committed::unchanged(read, Compaction::default()));
        }
        let schema = read.schema().clone();
        let repack = match (reuse, schema.has_blob_columns()) {
            (Some(threshold), true) if threshold > 0.0 => sparse_packs(read, threshold).await?,
            _ => Default::default(),
        };
        let mut writer = FragmentWriter::new(&self.store, &schema, target, true);
        let mut inputs: Vec<Fragment> = Vec::new();
        let mut outputs_per_group: Vec<(Vec<FragmentId>, usize)> = Vec::new();
        let mut report = Compaction::default();
        let total: u64 = groups.iter().flatten().map(Fragment::live_rows).sum();
        progress.update("compacting", 0, Some(total));
        let result: Result<Committed<Compaction>> = async {
            for group in groups {
                let written_before = writer.written();
                for fragment in &group {
                    report.deleted_rows_dropped +=
                        fragment.physical_rows as u64 - fragment.live_rows();
                }
                // Rows move unchanged: each keeps its versions, which may be in files.
                let lineages: HashMap<FragmentId, Arc<Lineage>> =
                    futures::future::try_join_all(group.iter().map(|f| async {
                        let lineage = self.store.lineage_of(&f.lineage, f.physical_rows).await?;
                        Ok::<_, Error>((f.id, lineage))
                    }))
                    .await?
                    .into_iter()
                    .collect();
                // Rows move, their blob values stay: descriptors are read, and the new
                // files' reuse indexes name the sidecars the values are in.
                let reuse = reuse.is_some() && schema.has_blob_columns();
                let request = ScanRequest {
                    with_row_id: true,
                    // Addresses say where each row's lineage is.
                    with_row_addr: true,
                    fragments: Some(group.iter().map(|f| f.id).collect()),
                    blob_descriptors: reuse,
                    // Copied, an external value stays a reference to its object.
                    blob_references: crate::io::BlobReferences::External,
                    ..Default::default()
                };
                // In id order the new fragment's ids are one sorted run, which a take
                // searches once (`id_order.rs`). Blob rows come fragment by fragment:
                // their sizes are not known ahead, and reuse indexes are built per fragment.
                let by_id = !schema.has_blob_columns();
                let mut rows = GroupRows::read(read, &group, request, by_id).await?;
                while let Some(batch) = rows.next().await? {
                    let system = |i: usize, name: &str| {
                        (batch.column(schema.fields.len() + i).as_any())
                            .downcast_ref::<arrow::array::UInt64Array>()
                            .map(|c| c.values().clone())
                            .ok_or_else(|| Error::internal(format!("scan lost {name}")))
                    };
                    let (ids, addrs) = (system(0, "_rowid")?, system(1, "_rowaddr")?);
                    let ids = (ids.iter().zip(addrs.iter()))
                        .map(|(&id, &addr)| {
                            let (id, addr) = (RowId::from_u64(id), RowAddress::from_u64(addr));
                            let lineage = lineages.get(&addr.fragment_id()).map(AsRef::as_ref);
                            Some(CarriedRow::moved_from(lineage, id, addr))
                        })
                        .collect();
                    report.rows_rewritten += batch.num_rows() as u64;
                    let user = batch.project(&(0..schema.fields.len()).collect::<Vec<_>>())?;
                    match reuse {
                        true => {
                            let addrs = batch.column(schema.fields.len() + 1);
                            let sources = blob_sources(&schema, &group, addrs)?;
                            writer.push_described(user, ids, &sources, &repack).await?;
                        }
                        false => writer.push(user, ids).await?,
                    }
                    progress.update("compacting", report.rows_rewritten, Some(total));
                }
                // Output fragments never mix groups' rows with a later group's.
                writer.flush().await?;
                let group_ids = group.iter().map(|f| f.id).collect();
                outputs_per_group.push((group_ids, writer.written() - written_before));
                inputs.extend(group);
            }
            let fragments = writer.finish().await?;
            report.fragments_removed = inputs.len();
            report.fragments_added = fragments.len();
            let committed = self
                .commit(
                    read,
                    Action::Compact {
                        inputs,
                        fragments,
                        groups: outputs_per_group,
                    },
                )
                .await?;
            Ok(Committed::published(committed.version, report))
        }
        .await;
        progress.finish("compacting");
        result
    }

    /// Stores the relocation view as a checkpoint, so a cold open loads it with one GET and
    /// transposes only newer carried fragments.
    pub async fn checkpoint(&self) -> Result<Committed> {
        let read = self.read_snapshot().await?;
        let view = read.relocation_view().await?;
        let covers = read.manifest().max_fragment_id.unwrap_or(0);
        let checkpoint = self
            .store
            .write_checkpoint(read.version() + 1, &view.entries(), covers)
            .await?;
        self.commit(&read, Action::Checkpoint { checkpoint }).await
    }

    /// Publishes a new version whose rows are those of `version`. Fragment ids keep rising.
    ///
    /// When the latest version is damaged (it, or a file it needs, cannot be read), this is
    /// how the table recovers: the new version follows the damaged one, with fragment-id
    /// and index marks above anything it could hold (see `recovery.rs`).
    pub async fn restore(&self, version: u64) -> Result<Committed> {
        let from = self.store.read_manifest(version).await?;
        let read = match self.read_snapshot().await {
            Ok(read) => read,
            Err(damaged @ Error::Corrupt { .. }) if self.planned_at.is_none() => {
                let Some(latest) = self.store.latest_version().await? else {
                    return Err(damaged);
                };
                return self.restore_over_damaged(latest, from).await;
            }
            Err(e) => return Err(e),
        };
        self.commit(
            &read,
            Action::Restore {
                from: Box::new(from),
            },
        )
        .await
    }

    /// Deletes the table: its manifests first, so a table dropped half way (the store
    /// failed) is no table at all rather than versions naming missing files, then every file
    /// under its own directories. Files of anyone else in its directory are left. Returns
    /// how many objects were deleted.
    pub async fn delete_all_files(&self) -> Result<u64> {
        let store = self.store.object_store();
        let versions = self.store.root().clone().join(crate::io::VERSIONS_DIR);
        let listing: Vec<_> = store.list(Some(self.store.root())).try_collect().await?;
        let (manifests, files): (Vec<_>, Vec<_>) = listing
            .into_iter()
            .filter(|m| {
                m.location.prefix_matches(&versions) || self.store.is_table_file(&m.location)
            })
            .partition(|m| m.location.prefix_matches(&versions));
        let mut deleted = 0;
        for meta in manifests.into_iter().chain(files) {
            store.delete(&meta.location).await?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Deletes versions the policy does not keep and files no kept version references.
    /// Never deletes the latest version, files younger than `min_file_age`, files named by a
    /// version committed before it lists the versions again (after deleting old manifests),
    /// or anything outside the table's own directories. On a local disk it also deletes the
    /// staging files of uploads a killed writer left unfinished.
    pub async fn cleanup(&self, policy: CleanupPolicy) -> Result<CleanupReport> {
        let versions = self.store.list_versions().await?;
        let Some(&(latest, _)) = versions.last() else {
            return Ok(CleanupReport::default());
        };
        let now = chrono::Utc::now();
        let newer_than = now.timestamp_micros() - policy.keep_newer_than.as_micros() as i64;
        let keep_from = versions.len().saturating_sub(policy.keep_versions.max(1));
        let mut kept: HashSet<u64> = HashSet::from([latest]);
        let mut referenced = HashSet::new();
        let mut removable_manifests = Vec::new();
        for (i, (version, meta)) in versions.iter().enumerate() {
            let manifest = match self.store.read_manifest(*version).await {
                Ok(manifest) => manifest,
                // A damaged old version the policy removes goes: nothing can read it.
                Err(Error::Corrupt { .. }) if i < keep_from && *version != latest => {
                    removable_manifests.push(meta.clone());
                    continue;
                }
                Err(Error::Corrupt { path, reason }) => {
                    return Err(Error::Corrupt {
                        path,
                        reason: format!(
                            "{reason}; cleanup cannot tell which files damaged version \
                             {version} needs: keep fewer versions to remove it"
                        ),
                    })
                }
                Err(e) => return Err(e),
            };
            // Deleting files is writing: a version using what this natal cannot write (a
            // Blob Reuse Index, whose sidecars outlive their data file) is not its to clean.
            manifest.check_writable(&self.store.display())?;
            if i >= keep_from || manifest.timestamp_micros >= newer_than || *version == latest {
                kept.insert(*version);
                referenced_files(&manifest, &mut referenced);
            } else {
                removable_manifests.push(meta.clone());
            }
        }
        let min_age = chrono::Duration::from_std(policy.min_file_age)
            .map_err(|_| Error::invalid("min_file_age is too large"))?;
        let mut report = CleanupReport::default();
        let mut to_delete: Vec<_> = self.store.list_table_files().await?;
        to_delete.retain(|(relative, meta)| {
            !is_referenced(relative, &referenced) && now - meta.last_modified >= min_age
        });
        for meta in removable_manifests {
            // Manifests go first: a version is never left pointing at deleted files.
            self.store.object_store().delete(&meta.location).await?;
            report.versions_removed += 1;
        }
        // A version committed since the first listing may name old files that only removed
        // versions named: a restore of one of them does. Its files stay. (A restore that
        // commits after this second listing can still lose them: cleanup and restores of
        // the versions it removes must not run at once.)
        let mut newer = HashSet::new();
        for (version, _) in self.store.list_versions().await? {
            if version <= latest {
                continue;
            }
            match self.store.read_manifest(version).await {
                Ok(manifest) => referenced_files(&manifest, &mut newer),
                // Removed meanwhile by another cleanup: the versions after it are read.
                Err(Error::VersionNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        to_delete.retain(|(relative, _)| !is_referenced(relative, &newer));
        // Unfinished uploads of killed writers: no version can name a file never completed.
        let mut staged = self.store.staged_uploads().await?;
        staged.retain(|upload| now - upload.modified >= min_age);
        // Counted in files, not rows.
        let progress = &self.options.progress;
        let total = (to_delete.len() + staged.len()) as u64;
        for upload in staged {
            if let Err(e) = crate::io::remove_staged_upload(&upload) {
                progress.finish("cleaning up");
                return Err(e);
            }
            report.files_removed += 1;
            report.bytes_removed += upload.size;
            progress.update("cleaning up", report.files_removed, Some(total));
        }
        for (_, meta) in to_delete {
            match self.store.object_store().delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                    report.files_removed += 1;
                    report.bytes_removed += meta.size;
                    progress.update("cleaning up", report.files_removed, Some(total));
                }
                Err(e) => {
                    progress.finish("cleaning up");
                    return Err(e.into());
                }
            }
        }
        progress.finish("cleaning up");
        Ok(report)
    }
}

/// Groups of fragments to rewrite together: runs of small or heavily deleted fragments,
/// each group at most `target` live rows. A lone fragment is rewritten only to drop deletions.
/// A group never mixes fragments that different sets of indexes cover: its output stays
/// covered by the indexes that covered all of it (as in Lance's planner).
fn plan_compaction(
    fragments: &[Fragment],
    indexes: &IndexSection,
    target: u64,
    max_deleted_fraction: f64,
) -> Vec<Vec<Fragment>> {
    let coverage = index_coverage(indexes);
    let needs = |f: &Fragment| {
        let deleted = (f.physical_rows as u64 - f.live_rows()) as f64;
        let heavy = f.physical_rows > 0
            && deleted / f.physical_rows as f64 >= max_deleted_fraction
            && deleted > 0.0;
        (f.physical_rows as u64) < target / 2 || heavy || f.live_rows() == 0 || heavily_patched(f)
    };
    let mut groups: Vec<Vec<Fragment>> = Vec::new();
    let mut current: Vec<Fragment> = Vec::new();
    let mut current_rows = 0u64;
    let close = |current: &mut Vec<Fragment>, groups: &mut Vec<Vec<Fragment>>| {
        let worth = current.len() > 1
            || (current.iter()).any(|f| f.deletion.is_some() || !f.patches.is_empty());
        if worth {
            groups.push(std::mem::take(current));
        } else {
            current.clear();
        }
    };
    for fragment in fragments {
        if !needs(fragment) {
            close(&mut current, &mut groups);
            current_rows = 0;
            continue;
        }
        let other_coverage = current
            .first()
            .is_some_and(|first| coverage(first) != coverage(fragment));
        if (current_rows + fragment.live_rows() > target || other_coverage) && !current.is_empty() {
            close(&mut current, &mut groups);
            current_rows = 0;
        }
        current_rows += fragment.live_rows();
        current.push(fragment.clone());
    }
    close(&mut current, &mut groups);
    groups
}

/// Row patches a fragment carries past which compaction folds them: a read of a patched
/// column merges each one.
const FOLD_PATCH_FILES: usize = 8;
/// The share of a fragment's rows patched past which compaction folds its patches.
const FOLD_PATCHED_SHARE: f64 = 0.1;

/// Whether `fragment`'s patches are many or cover much of it: compaction rewrites it then,
/// however large it is, so that reads stop merging them.
fn heavily_patched(fragment: &Fragment) -> bool {
    let patched: u64 = fragment.patches.iter().map(|p| p.offsets.len()).sum();
    fragment.patches.len() >= FOLD_PATCH_FILES
        || (patched > 0 && patched as f64 >= fragment.physical_rows as f64 * FOLD_PATCHED_SHARE)
}

/// Which of the table's indexes cover a fragment, one flag per index name: fragments that
/// differ here are never merged, so an output stays covered by the indexes that covered
/// all of its inputs.
pub(super) fn index_coverage(indexes: &IndexSection) -> impl Fn(&Fragment) -> Vec<bool> {
    let mut names: Vec<&str> = indexes.segments.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let covered: Vec<RoaringBitmap> = names.iter().map(|n| indexes.covered(n)).collect();
    move |f: &Fragment| covered.iter().map(|c| c.contains(f.id)).collect()
}
