//! The domain model of one table version: [`Manifest`] and what it lists.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::rowid::{FragmentId, RowAddress, RowId, RowIdSequence};

use super::type_text::names_apart;
use super::{
    CloneOrigin, ColumnStats, DerivedName, FieldId, IndexSection, IndexSegment, Schema,
    StorageBase, TablePath, VectorIndexKind,
};

/// natal's on-disk format version. A manifest with another version is refused.
pub const FORMAT_VERSION: u32 = 1;

/// Reader and writer feature flags. A client refuses a manifest with a flag it does not know.
pub mod flags {
    /// Fragments may carry deletion files, which readers must apply.
    pub const DELETION_FILES: u64 = 1 << 0;
    /// Fragments may carry row-id sequences (rows born elsewhere), which readers must use.
    pub const ROW_ID_SEQUENCES: u64 = 1 << 1;
    /// Some row-id sequences live in `_rowids/` files, which readers must load.
    pub const ROW_ID_FILES: u64 = 1 << 2;
    /// Some fragments' deletions span several files, which readers must union.
    pub const DELETION_DELTAS: u64 = 1 << 3;
    /// The fragment list lives in `_fragments/` segment files, which readers must load.
    pub const FRAGMENT_SEGMENTS: u64 = 1 << 4;
    /// Writer-only: index segments carry `segment_seq` and the section keeps per-name
    /// high-water marks, which writers must preserve and continue (seed 002). Readers need
    /// not understand it: indexes are never needed to read rows.
    pub const INDEX_SEGMENT_SEQ: u64 = 1 << 5;
    /// Writer-only: deletion files count the deletions that were moves (`moved_rows`), and
    /// readers skip the deletion files of fragments whose deletions are all moves when they
    /// reach rows through the relocation view. Writers must keep the counts true: a writer
    /// that drops a row deleted outright must forget the moves of that row's older copies.
    pub const MOVE_TALLIES: u64 = 1 << 6;
    /// Some fragment segments carry a patch file with their fragments' newer deletions,
    /// which readers must apply over the segment file.
    pub const SEGMENT_PATCHES: u64 = 1 << 7;
    /// Some deletion files, fragment segments or patches are named by owner, version and
    /// attempt rather than by path ([`DerivedName`](super::DerivedName)), which readers must
    /// expand.
    pub const DERIVED_NAMES: u64 = 1 << 8;
    /// Some column types keep their nested field names apart from their text (a name Arrow's
    /// type parser cannot read back), which readers must put back in.
    pub const NESTED_FIELD_NAMES: u64 = 1 << 9;
    /// The version's operation may be a schema change, and fragments may lack columns the
    /// schema has (read as NULL) or hold columns it dropped (not read): readers must read
    /// data files by field id.
    pub const SCHEMA_CHANGES: u64 = 1 << 10;
    /// Some fragment's columns lie in several data files (a column added with values has
    /// its own file per fragment): readers must zip a fragment's files by row.
    pub const COLUMN_FILES: u64 = 1 << 11;
    /// Some column has a default value, which a writer must give rows written without it.
    pub const COLUMN_DEFAULTS: u64 = 1 << 12;
    /// Fields inside columns (struct children, list elements, map keys and values) have
    /// field ids of their own, which data files tag them with: readers must match them by
    /// id at every depth (a nested field may have been renamed, moved, dropped or added),
    /// and writers must tag them.
    pub const NESTED_FIELD_IDS: u64 = 1 << 13;
    /// Writer-only: the schema keeps what a `CREATE TABLE` declared beyond columns and
    /// values: default expressions (`DEFAULT now()`, planned by each INSERT), Arrow field
    /// and schema metadata, PRIMARY KEY and UNIQUE constraints. A writer must carry them
    /// over and give rows written without a column its default; a reader loses nothing
    /// without them.
    pub const SCHEMA_DECLARATIONS: u64 = 1 << 14;
    /// Some column's type has no Parquet encoding (a month-day-nano interval), and data
    /// files hold it as another (`stored_as`): readers must decode it, writers encode it.
    pub const STORED_TYPES: u64 = 1 << 15;
    /// Some column is a blob column: data files hold its values as descriptors, the bytes
    /// inline or in sidecars under the data file's stem, which readers must resolve and
    /// writers place (and cleanup keep while the data file lives).
    pub const BLOB_COLUMNS: u64 = 1 << 16;
    /// Some data file carries a Blob Reuse Index: its descriptors' blob ids may name other
    /// files' sidecars, which readers must resolve through it, and writers and cleanup keep
    /// while it lives (compaction writes them: rows move, payloads stay).
    pub const BLOB_REUSE_INDEX: u64 = 1 << 17;
    /// The manifest names other storage bases (a shallow clone's sources) and some file
    /// references are under them: readers must resolve them there; writers must never
    /// write or delete there (cleanup keeps to the table's own root).
    pub const STORAGE_BASES: u64 = 1 << 18;
    /// Writer-only: fragments record the version that wrote them, and those holding rows
    /// first written elsewhere each row's creation and last-change versions (row lineage),
    /// which writers must carry over and continue: a writer that dropped them would lose
    /// them for good. Readers need them only for lineage columns and change reads.
    pub const ROW_LINEAGE: u64 = 1 << 19;
    /// Writer-only: the table records change data ([`Manifest::change_data_feed`]), or this
    /// version holds some: a writer must capture the values of every row it deletes or
    /// rewrites, and cleanup keep the captured files while their version lives. Readers
    /// need them only for change reads, which read the rows' pages without them.
    ///
    /// [`Manifest::change_data_feed`]: super::Manifest::change_data_feed
    pub const CHANGE_DATA: u64 = 1 << 20;
    /// Some fragments keep their rows' versions in `_lineage/` files, which readers of
    /// lineage (lineage columns, change reads, rewrites) must load, and cleanup keep.
    pub const LINEAGE_FILES: u64 = 1 << 21;
    /// Some column is a union or a dictionary of nested values, which data files hold in
    /// another shape (`stored_as`: a union's type ids and row-aligned children as a struct,
    /// a dictionary's values row by row): readers must give them back as declared.
    pub const STORED_SHAPES: u64 = 1 << 22;
    /// Some index segment is a vector index, whose file is natal's own (`NATALVI1`: IVF
    /// centroids and partitions of row ids and vectors), not Parquet: readers that search
    /// or probe it must read it as such.
    pub const VECTOR_INDEXES: u64 = 1 << 23;
    /// Some vector index segment is `ivf_pq` (`NATALVQ1`: product-quantized codes of the
    /// vectors' residuals and their codebooks), which readers must decode as such.
    pub const QUANTIZED_VECTORS: u64 = 1 << 24;
    /// Some column is a vector (a fixed-size list of Float32), which data files written
    /// since hold as its components' little-endian bytes and, where a component is null,
    /// their validity (`stored_as`; older files hold the list): readers must give the
    /// vectors back.
    pub const VECTOR_BYTES: u64 = 1 << 25;
    /// Some fragment carries row patches: new values of some of its cells in files of their
    /// own, which readers must merge over its files by offset (a reader that did not would
    /// return the old values), and writers carry, fold and clean up.
    pub const ROW_PATCHES: u64 = 1 << 26;
    /// Writer-only: the table sets its patch share ([`Manifest::patch_max_share`]), which a
    /// writer that did not know it would drop from the versions it writes.
    ///
    /// [`Manifest::patch_max_share`]: super::Manifest::patch_max_share
    pub const PATCH_SHARE: u64 = 1 << 27;
    /// Every reader flag this client implements.
    pub const KNOWN_READER: u64 = DELETION_FILES
        | ROW_ID_SEQUENCES
        | ROW_ID_FILES
        | DELETION_DELTAS
        | FRAGMENT_SEGMENTS
        | SEGMENT_PATCHES
        | DERIVED_NAMES
        | NESTED_FIELD_NAMES
        | SCHEMA_CHANGES
        | COLUMN_FILES
        | NESTED_FIELD_IDS
        | STORED_TYPES
        | BLOB_COLUMNS
        | BLOB_REUSE_INDEX
        | STORAGE_BASES
        | LINEAGE_FILES
        | STORED_SHAPES
        | VECTOR_INDEXES
        | QUANTIZED_VECTORS
        | VECTOR_BYTES
        | ROW_PATCHES;
    /// Every writer flag this client implements.
    pub const KNOWN_WRITER: u64 = KNOWN_READER
        | INDEX_SEGMENT_SEQ
        | MOVE_TALLIES
        | COLUMN_DEFAULTS
        | SCHEMA_DECLARATIONS
        | ROW_LINEAGE
        | CHANGE_DATA
        | PATCH_SHARE;
}

/// Whether `share` can be a table's patch share ([`Manifest::patch_max_share`]): a share of
/// its bytes, in `0..=1` (not NaN).
pub fn is_patch_share(share: f64) -> bool {
    (0.0..=1.0).contains(&share)
}

/// One version of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// This version's number (1 for the version that created the table).
    pub version: u64,
    /// The version it was planned on; `None` for the first.
    pub parent_version: Option<u64>,
    /// When it was committed, in microseconds since the Unix epoch.
    pub timestamp_micros: i64,
    /// The table's id, the same in every version: caches are keyed by it.
    pub table_uuid: String,
    /// The schema, with field ids.
    pub schema: Schema,
    /// Every fragment, in id order, wherever it is stored (loaded by `io/` on read).
    pub fragments: Vec<Fragment>,
    /// Where `fragments` is stored when the list is long: segment files covering contiguous
    /// fragment-id ranges. Empty: the fragments ride inline.
    pub fragment_segments: Vec<FragmentSegment>,
    /// The largest fragment id ever allocated; `None` until the first fragment.
    pub max_fragment_id: Option<FragmentId>,
    /// Writer flags of the stored manifest this client does not know (a newer natal's):
    /// kept so that [`Manifest::check_writable`] refuses to write on top. Every flag this
    /// client knows is derived from the contents when the manifest is encoded
    /// ([`Manifest::reader_flags`]), so none can drift from what the manifest uses.
    pub(crate) unknown_writer_flags: u64,
    /// Reader flags this client does not know; only [`Manifest::claim_unknown_flags`] sets
    /// them (a decode refuses them).
    pub(crate) unknown_reader_flags: u64,
    /// What produced the version.
    pub transaction: TransactionSummary,
    /// The stored relocation view, if a checkpoint covers some carried fragments.
    pub relocation_checkpoint: Option<CheckpointRef>,
    /// Rows per fragment the table's writers aim for; never 0 (checked on decode).
    pub max_rows_per_fragment: std::num::NonZeroU32,
    /// Index segments and their per-name sequence marks.
    pub indexes: IndexSection,
    /// Other tables' roots whose files this version references in place (a shallow
    /// clone's sources), by id; paths under them are [`TablePath::in_base`] paths.
    pub bases: Vec<StorageBase>,
    /// The table records change data: every commit that deletes or rewrites rows captures
    /// their values before it ([`Self::change_data`]). A table property, carried from
    /// version to version until changed.
    pub change_data_feed: bool,
    /// The largest share of the table's bytes (before compression, by its files'
    /// statistics) the columns an update changes may hold for it to write row patches
    /// rather than rewrite the rows; in `0..=1`. A table property, carried from version to
    /// version until changed; `None`: the writer's default.
    pub patch_max_share: Option<f64>,
    /// The rows this version's commit deleted or rewrote, with the values they had in the
    /// version it was planned on, in fragments of their own (ids in inline row-id
    /// sequences, rows in any order: a delete's by id, an update's as its scan met them;
    /// never rows of the table). `None`: not captured. Belongs to
    /// this version alone: the next commit starts without it.
    pub change_data: Option<Vec<Fragment>>,
    /// Captured fragments read without their row ids, which are another fragment's of this
    /// version (captured, fragment): linked once the fragment list is loaded
    /// ([`Self::link_change_data`]).
    pub(crate) unlinked_change_data: Vec<(FragmentId, FragmentId)>,
}

impl Manifest {
    /// Takes the id for a new fragment: one above every id the table has used (invariant
    /// I2: never a reused one), recorded as the table's high-water mark.
    pub fn allocate_fragment_id(&mut self) -> Result<FragmentId> {
        let id = match self.max_fragment_id {
            None => 0,
            Some(max) => max
                .checked_add(1)
                .ok_or_else(|| Error::invalid("the table has used every fragment id"))?,
        };
        self.max_fragment_id = Some(id);
        Ok(id)
    }

    /// The fragment with id `id`, if this version has it.
    pub fn fragment(&self, id: FragmentId) -> Option<&Fragment> {
        // Fragments are kept sorted by id.
        self.fragments
            .binary_search_by_key(&id, |f| f.id)
            .ok()
            .map(|i| &self.fragments[i])
    }

    /// The rows a fragment holds at most, as every writer of the table cuts them (fixed at
    /// create time): appends, updates, merges and compactions aim at it.
    pub fn fragment_row_target(&self) -> u64 {
        u64::from(self.max_rows_per_fragment.get())
    }

    /// Live rows: physical rows minus deleted rows.
    pub fn live_rows(&self) -> u64 {
        self.fragments.iter().map(Fragment::live_rows).sum()
    }

    /// The reader flags the manifest is encoded with: what its contents use.
    pub fn reader_flags(&self) -> u64 {
        self.feature_flags().0
    }

    /// The writer flags the manifest is encoded with: what its contents use.
    pub fn writer_flags(&self) -> u64 {
        self.feature_flags().1
    }

    /// (reader, writer) flags, derived in one pass over the contents (what encoding writes).
    pub(crate) fn feature_flags(&self) -> (u64, u64) {
        let (reader, writer) = self.used_flags();
        (
            reader | self.unknown_reader_flags,
            writer | self.unknown_writer_flags,
        )
    }

    /// Adds feature flags this client does not know, as a newer natal's manifest would
    /// carry them: for testing that readers and writers refuse what they cannot honour.
    pub fn claim_unknown_flags(&mut self, reader: u64, writer: u64) {
        self.unknown_reader_flags |= reader & !flags::KNOWN_READER;
        self.unknown_writer_flags |= writer & !flags::KNOWN_WRITER;
    }

    /// (reader, writer) flags of the features the manifest's contents use.
    fn used_flags(&self) -> (u64, u64) {
        let mut used = 0;
        if self.fragments.iter().any(|f| f.deletion.is_some()) {
            used |= flags::DELETION_FILES;
        }
        if self.fragments.iter().any(|f| !f.row_ids.is_native()) {
            used |= flags::ROW_ID_SEQUENCES;
        }
        if self.fragments.iter().any(|f| f.row_ids.file().is_some()) {
            used |= flags::ROW_ID_FILES;
        }
        if self
            .fragments
            .iter()
            .any(|f| f.lineage.updated_file.is_some())
        {
            used |= flags::LINEAGE_FILES;
        }
        if self
            .fragments
            .iter()
            .any(|f| f.deletion.as_ref().is_some_and(|d| d.file_count() > 1))
        {
            used |= flags::DELETION_DELTAS;
        }
        if !self.fragment_segments.is_empty() {
            used |= flags::FRAGMENT_SEGMENTS;
        }
        if self.fragment_segments.iter().any(|s| s.patch.is_some()) {
            used |= flags::SEGMENT_PATCHES;
        }
        let derived_deletion = self.fragments.iter().any(|f| {
            f.deletion.as_ref().is_some_and(|d| {
                d.files()
                    .any(|file| DerivedName::DELETION.parse(&file.path, f.id).is_some())
            })
        });
        let derived_segment = self.fragment_segments.iter().any(|s| {
            let first = s.first_fragment_id;
            DerivedName::SEGMENT.parse(&s.path, first).is_some()
                || s.patch
                    .as_ref()
                    .is_some_and(|p| DerivedName::PATCH.parse(&p.path, first).is_some())
        });
        if derived_deletion || derived_segment {
            used |= flags::DERIVED_NAMES;
        }
        if self.schema.fields.iter().any(|f| names_apart(&f.data_type)) {
            used |= flags::NESTED_FIELD_NAMES;
        }
        let mut schema_ids = self.schema.field_ids();
        schema_ids.sort_unstable();
        // A fragment whose files hold another set of field ids than the schema's.
        let unlike_schema = |f: &Fragment| {
            let foreign = f.files.iter().flat_map(|d| &d.field_ids);
            foreign
                .into_iter()
                .any(|id| schema_ids.binary_search(id).is_err())
                || schema_ids.iter().any(|&id| f.file_holding(id).is_none())
        };
        if self.transaction.operation == Operation::AlterSchema
            || self.fragments.iter().any(unlike_schema)
        {
            used |= flags::SCHEMA_CHANGES;
        }
        if self.fragments.iter().any(|f| f.files.len() > 1) {
            used |= flags::COLUMN_FILES;
        }
        if self.fragments.iter().any(|f| !f.patches.is_empty()) {
            used |= flags::ROW_PATCHES;
        }
        if self.schema.fields.iter().any(|f| !f.nested_ids.is_empty()) {
            used |= flags::NESTED_FIELD_IDS;
        }
        let stored_apart = |f: &super::Field| super::stored_as(&f.data_type).is_some();
        if self.schema.fields.iter().any(stored_apart) {
            used |= flags::STORED_TYPES;
        }
        if (self.schema.fields.iter()).any(|f| super::stored_reshaped(&f.data_type)) {
            used |= flags::STORED_SHAPES;
        }
        if self.indexes.segments.iter().any(|s| s.vector.is_some()) {
            used |= flags::VECTOR_INDEXES;
        }
        if (self.schema.fields.iter()).any(|f| super::vector_bytes(&f.data_type).is_some()) {
            used |= flags::VECTOR_BYTES;
        }
        let quantized =
            |s: &IndexSegment| s.vector.is_some_and(|v| v.kind == VectorIndexKind::IvfPq);
        if self.indexes.segments.iter().any(quantized) {
            used |= flags::QUANTIZED_VECTORS;
        }
        if self.schema.has_blob_columns() {
            used |= flags::BLOB_COLUMNS;
        }
        let reuses = |f: &Fragment| f.files.iter().any(|d| d.blob_reuse_index.is_some());
        if self.fragments.iter().any(reuses) {
            used |= flags::BLOB_REUSE_INDEX;
        }
        if !self.bases.is_empty() {
            used |= flags::STORAGE_BASES;
        }
        let reader = used;
        let mut writer = used;
        if self.indexes.uses_segment_seq() {
            writer |= flags::INDEX_SEGMENT_SEQ;
        }
        if self.fragments.iter().any(|f| {
            f.deletion
                .as_ref()
                .is_some_and(|d| d.files().any(|file| file.moved_rows > 0))
        }) {
            writer |= flags::MOVE_TALLIES;
        }
        if self.schema.fields.iter().any(|f| f.default_value.is_some()) {
            writer |= flags::COLUMN_DEFAULTS;
        }
        if self.schema.declares_more() {
            writer |= flags::SCHEMA_DECLARATIONS;
        }
        if self.fragments.iter().any(|f| f.lineage.is_recorded()) {
            writer |= flags::ROW_LINEAGE;
        }
        if self.change_data_feed || self.change_data.is_some() {
            writer |= flags::CHANGE_DATA;
        }
        if self.patch_max_share.is_some() {
            writer |= flags::PATCH_SHARE;
        }
        (reader, writer)
    }
}

/// A group of rows with one or more data files of equal row counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Fragment {
    /// Its id: the high 32 bits of its rows' addresses, never reused.
    pub id: FragmentId,
    /// Its data files, oldest first; a later one supersedes an earlier one's fields.
    pub files: Vec<DataFile>,
    /// Its deleted offsets; `None` when none are.
    pub deletion: Option<DeletionVector>,
    /// Rows stored, deleted or not.
    pub physical_rows: u32,
    /// The ids of its rows, by offset.
    pub row_ids: FragmentRowIds,
    /// When its rows were written and last changed.
    pub lineage: super::Lineage,
    /// New values of some of its cells, oldest first (reader flag [`flags::ROW_PATCHES`]).
    pub patches: Vec<super::RowPatch>,
}

/// Where a fragment's row ids are: its addresses, a sequence in the manifest, or a sequence
/// in its own file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FragmentRowIds {
    /// Each row's id is its address: every row was born in this fragment.
    #[default]
    Native,
    /// The ids by offset, stored in the manifest (or in its fragment segment).
    Inline(Arc<RowIdSequence>),
    /// The ids by offset, stored in their own file (too many to ride in every manifest),
    /// read before the fragment is built (see [`super::Unresolved`]).
    Stored {
        /// The file.
        file: RowIdFile,
        /// The ids it holds.
        sequence: Arc<RowIdSequence>,
    },
}

impl FragmentRowIds {
    /// The ids by offset; `None` for a native fragment.
    pub fn sequence(&self) -> Option<&Arc<RowIdSequence>> {
        match self {
            Self::Inline(sequence) | Self::Stored { sequence, .. } => Some(sequence),
            Self::Native => None,
        }
    }

    /// The file the ids are stored in, if they have one.
    pub fn file(&self) -> Option<&RowIdFile> {
        match self {
            Self::Stored { file, .. } => Some(file),
            Self::Native | Self::Inline(_) => None,
        }
    }

    /// The file holding them, to move it to another storage base.
    pub(crate) fn file_mut(&mut self) -> Option<&mut RowIdFile> {
        match self {
            Self::Stored { file, .. } => Some(file),
            Self::Native | Self::Inline(_) => None,
        }
    }

    /// True when ids are addresses.
    pub fn is_native(&self) -> bool {
        matches!(self, Self::Native)
    }

    /// `sequence` if there is one (`None`: native), inline.
    pub fn of(sequence: Option<Arc<RowIdSequence>>) -> Self {
        sequence.map_or(Self::Native, Self::Inline)
    }

    /// Equal as stored: ids in a file are compared by their file (files are immutable), not
    /// id by id.
    fn stored_eq(&self, other: &Self) -> bool {
        match (self.file(), other.file()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self == other,
            _ => false,
        }
    }
}

/// A run of fragments stored in its own immutable file. A commit rewrites only the segments
/// whose fragments changed, so the bytes it writes follow its change, not the table's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentSegment {
    /// The segment file.
    pub path: TablePath,
    /// The id of its first fragment.
    pub first_fragment_id: FragmentId,
    /// The id of its last fragment.
    pub last_fragment_id: FragmentId,
    /// Fragments it holds.
    pub fragment_count: u32,
    /// The file's size.
    pub size_bytes: u64,
    /// The newer deletions of some of its fragments, when only those changed.
    pub patch: Option<SegmentPatch>,
}

/// A file holding the whole deletion vector of each fragment of a segment whose deletions
/// changed since the segment file was written. Deletions are what most commits change, and
/// a patch costs their bytes where rewriting the segment would cost every fragment's files,
/// statistics and row ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentPatch {
    /// The patch file.
    pub path: TablePath,
    /// Fragments it holds deletions of.
    pub fragment_count: u32,
    /// The file's size.
    pub size_bytes: u64,
}

/// A row-id sequence stored in its own immutable file, so a commit that carries rows
/// writes their ids once instead of in every later manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowIdFile {
    /// The file.
    pub path: TablePath,
    /// Its size.
    pub size_bytes: u64,
}

impl Fragment {
    /// The id of the row at `offset`: its address in a native fragment, else its
    /// sequence's entry (`None` past the sequence).
    pub fn row_id_at(&self, offset: u32) -> Option<RowId> {
        match self.row_ids.sequence() {
            Some(ids) => ids.get(offset as usize),
            None => Some(RowAddress::new(self.id, offset).as_native_id()),
        }
    }

    /// Equal as stored: a sequence kept in a file is compared by its file (files are
    /// immutable), not id by id.
    pub fn stored_eq(&self, other: &Fragment) -> bool {
        self.deletion == other.deletion && self.stored_eq_but_deletions(other)
    }

    /// [`Fragment::stored_eq`] but for deletions: what a segment patch cannot change.
    pub fn stored_eq_but_deletions(&self, other: &Fragment) -> bool {
        self.id == other.id
            && self.files == other.files
            && self.physical_rows == other.physical_rows
            && self.row_ids.stored_eq(&other.row_ids)
            && self.lineage == other.lineage
            && self.patches == other.patches
    }

    /// The file field `field_id` is read from: the newest of this fragment's files that
    /// holds it (a later file supersedes an earlier one's copy of a field).
    pub fn file_holding(&self, field_id: FieldId) -> Option<usize> {
        self.files
            .iter()
            .rposition(|f| f.field_ids.contains(&field_id))
    }

    /// The statistics of field `field_id`, from the file it is read from; `None` when a
    /// row patch changed some of its values (the file's bounds no longer hold them).
    pub fn column_stats(&self, field_id: FieldId) -> Option<&ColumnStats> {
        if self.is_patched(field_id) {
            return None;
        }
        self.file_column_stats(field_id)
    }

    /// The statistics of field `field_id` in the file it is read from, patched or not.
    fn file_column_stats(&self, field_id: FieldId) -> Option<&ColumnStats> {
        let file = &self.files[self.file_holding(field_id)?];
        file.column_stats.iter().find(|s| s.field_id == field_id)
    }

    /// Whether a row patch holds new values of field `field_id`.
    pub fn is_patched(&self, field_id: FieldId) -> bool {
        self.patches.iter().any(|p| p.holds(field_id))
    }

    /// The bytes, before compression, of the fields `field_ids` across this fragment's rows,
    /// by its files' statistics; a field no file sizes counts as none.
    pub fn uncompressed_bytes(&self, field_ids: &[FieldId]) -> u64 {
        (field_ids.iter())
            .filter_map(|id| self.file_column_stats(*id)?.uncompressed_bytes)
            .sum()
    }

    /// [`Self::uncompressed_bytes`] with the bytes of the fields' values in the fragment's
    /// row patches too: what a read of those fields decodes.
    pub fn uncompressed_bytes_read(&self, field_ids: &[FieldId]) -> u64 {
        let patched = (self.patches.iter())
            .flat_map(|p| &p.file.column_stats)
            .filter(|s| field_ids.contains(&s.field_id))
            .filter_map(|s| s.uncompressed_bytes);
        self.uncompressed_bytes(field_ids) + patched.sum::<u64>()
    }

    /// Rows not deleted.
    pub fn live_rows(&self) -> u64 {
        self.physical_rows as u64
            - self
                .deletion
                .as_ref()
                .map_or(0, DeletionVector::deleted_rows)
    }
}

/// One Parquet file of a fragment, covering some field ids.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFile {
    /// The file.
    pub path: TablePath,
    /// The fields it holds, by id.
    pub field_ids: Vec<FieldId>,
    /// Rows it holds (the fragment's physical rows).
    pub row_count: u64,
    /// Its size.
    pub file_size_bytes: u64,
    /// Per-column statistics, from its footer.
    pub column_stats: Vec<ColumnStats>,
    /// Its blob ids that resolve to other files' sidecars (reader and writer flag
    /// `BLOB_REUSE_INDEX`); `None`: every blob id names a sidecar under its own stem.
    pub blob_reuse_index: Option<super::blob_reuse::BlobReuseIndex>,
}

impl DataFile {
    /// The sidecar its descriptors' blob id `blob_id` names: through its reuse index, or
    /// under its own stem.
    pub fn sidecar(&self, blob_id: u32) -> TablePath {
        let (directory, physical) = self.sidecar_location(blob_id);
        super::blob_reuse::sidecar_in(&directory, physical)
    }

    /// Where that sidecar is: its directory (a data file's stem) and its id there, the
    /// physical object itself (an index maps to it directly, never to another index).
    pub fn sidecar_location(&self, blob_id: u32) -> (TablePath, u32) {
        match (self.blob_reuse_index.as_ref()).and_then(|index| index.resolve(blob_id)) {
            Some((source, physical)) => (source.directory.clone(), physical),
            None => (TablePath::sidecar_dir(&self.path), blob_id),
        }
    }
}

/// A fragment's deleted offsets: the disjoint union of its files, oldest first. A commit
/// adds a file holding only what it deleted and small files are folded together, so a
/// fragment keeps O(log n) files and a commit writes about what it changed (`io/deletion.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionVector {
    /// The oldest file.
    first: DeletionFile,
    /// The files added since, oldest first.
    deltas: Vec<DeletionFile>,
}

impl DeletionVector {
    /// The vector of one file.
    pub fn single(file: DeletionFile) -> Self {
        Self {
            first: file,
            deltas: Vec::new(),
        }
    }

    /// The vector of `files` (oldest first); `None` for no files.
    pub fn from_files(files: Vec<DeletionFile>) -> Option<Self> {
        let mut files = files.into_iter();
        let first = files.next()?;
        Some(Self {
            first,
            deltas: files.collect(),
        })
    }

    /// The oldest file.
    pub fn first(&self) -> &DeletionFile {
        &self.first
    }

    /// The files added after the first, oldest first.
    pub fn deltas(&self) -> &[DeletionFile] {
        &self.deltas
    }

    /// Every file, oldest first.
    pub fn files(&self) -> impl Iterator<Item = &DeletionFile> {
        std::iter::once(&self.first).chain(&self.deltas)
    }

    /// Every file, oldest first, to rename or recount.
    pub fn files_mut(&mut self) -> impl Iterator<Item = &mut DeletionFile> {
        std::iter::once(&mut self.first).chain(&mut self.deltas)
    }

    /// Every file, oldest first.
    pub fn into_files(self) -> Vec<DeletionFile> {
        let mut files = vec![self.first];
        files.extend(self.deltas);
        files
    }

    /// How many files hold the vector (1 + deltas).
    pub fn file_count(&self) -> usize {
        1 + self.deltas.len()
    }

    /// Rows deleted, over every file.
    pub fn deleted_rows(&self) -> u64 {
        self.files().map(|f| f.deleted_rows).sum()
    }

    /// Every deleted row of the fragment was moved, none deleted outright. An id's newest
    /// address (what the relocation view gives) is then never a deleted offset here, so a
    /// read of rows reached through the view needs none of these files.
    pub fn only_moves(&self) -> bool {
        self.files().all(|f| f.moved_rows == f.deleted_rows)
    }

    /// Counts every deletion as outright (always true, possibly slower to read).
    pub fn forget_moves(&mut self) {
        for file in self.files_mut() {
            file.moved_rows = 0;
        }
    }
}

/// A roaring bitmap of deleted offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionFile {
    /// The bitmap's file.
    pub path: TablePath,
    /// Offsets it holds.
    pub deleted_rows: u64,
    /// Of `deleted_rows`, the rows deleted because an update rewrote them elsewhere with the
    /// same id. 0 when not known.
    pub moved_rows: u64,
}

/// A snapshot of the relocation view stored as a Parquet file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRef {
    /// The checkpoint file.
    pub path: TablePath,
    /// Carried fragments with ids up to and including this one are in the checkpoint.
    pub covers_fragments_through: FragmentId,
    /// Moved ids it holds.
    pub entry_count: u64,
    /// Its size.
    pub file_size_bytes: u64,
}

pub use crate::operation::Operation;

/// A summary of the transaction that produced a version: enough to decide conflicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSummary {
    /// What kind of operation it was.
    pub operation: Operation,
    /// The version it was planned on.
    pub read_version: u64,
    /// Rows it added.
    pub rows_added: u64,
    /// Rows it removed.
    pub rows_removed: u64,
    /// Fragments it removed.
    pub fragments_removed: Vec<FragmentId>,
    /// Fragments it added.
    pub fragments_added: Vec<FragmentId>,
    /// A random id of the attempt that published the version (set as it is published; empty
    /// in versions written before natal kept one).
    pub uuid: String,
    /// For [`Operation::Clone`]: what was cloned.
    pub origin: Option<CloneOrigin>,
}
