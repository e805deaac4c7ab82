//! What the decoder fuzzing runs, shared by `fuzz.rs` (bounded, in CI) and `benches/fuzz.rs`
//! (millions of cases): real files of a small table as seeds, their mutations, and the check
//! each decoder's answer must pass.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use futures::TryStreamExt;
use natal::internals::format::{
    apply_segment_patch, decode_deletions, decode_fragment_segment, decode_lineage_file,
    decode_row_id_file, row_ids_held_by, seal, Fragment, FragmentSegment, Lineage, Manifest,
    RowIdsRead, SegmentPatch, TablePath,
};
use natal::{Error, ManifestLayout, Table, TableOptions};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use proptest::prelude::*;

/// Counts, per thread, the largest allocation since the last [`take_largest_allocation`]:
/// a decoder that sizes a buffer by a length field its input does not back shows here.
pub struct LargestAllocation;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is passed to `System` unchanged; the thread-local is const-initialised,
// so reading it never allocates.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.with(|l| l.set(l.get().max(layout.size())));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.with(|l| l.set(l.get().max(new_size)));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The largest allocation this thread made since the last call.
pub fn take_largest_allocation() -> usize {
    LARGEST.with(|l| l.replace(0))
}

/// The most a decoder may allocate at once for an input of `len` bytes: a decoded form is
/// larger than its encoding (a deletion run of a few bytes is an 8 KiB bitmap container),
/// but never by a length field's say-so alone.
fn allowance(len: usize) -> usize {
    (1 << 20) + 16_384 * len
}

/// A fuzz input: a seed (by index) and what is done to it.
#[derive(Debug, Clone)]
pub enum Input {
    /// Bytes from nowhere.
    Random(Vec<u8>),
    /// A seed with bytes overwritten, as (position, byte).
    Flipped(usize, Vec<(usize, u8)>),
    /// A seed cut at a position.
    Truncated(usize, usize),
    /// A seed with bytes inserted at a position.
    Inserted(usize, usize, Vec<u8>),
    /// One of the above done to a seed's sealed body, then sealed again (a valid checksum).
    Resealed(Box<Input>),
}

/// Random inputs and mutations of `seeds`; of their sealed bodies too when `sealed` (natal's
/// own files, see `envelope.rs`).
pub fn mutated(seeds: Vec<Vec<u8>>, sealed: bool) -> impl Strategy<Value = (Vec<u8>, Input)> {
    assert!(!seeds.is_empty(), "no seed files");
    let count = seeds.len();
    let edit = prop_oneof![
        (
            0..count,
            prop::collection::vec((any::<usize>(), any::<u8>()), 1..6)
        )
            .prop_map(|(s, flips)| Input::Flipped(s, flips)),
        (0..count, any::<usize>()).prop_map(|(s, at)| Input::Truncated(s, at)),
        (
            0..count,
            any::<usize>(),
            prop::collection::vec(any::<u8>(), 1..12)
        )
            .prop_map(|(s, at, bytes)| Input::Inserted(s, at, bytes)),
    ];
    let random = prop::collection::vec(any::<u8>(), 0..200).prop_map(Input::Random);
    let input = if sealed {
        prop_oneof![
            1 => random,
            2 => edit.clone(),
            5 => edit.prop_map(|e| Input::Resealed(Box::new(e))),
        ]
        .boxed()
    } else {
        prop_oneof![1 => random, 6 => edit].boxed()
    };
    input.prop_map(move |input| (apply(&seeds, &input), input))
}

fn apply(seeds: &[Vec<u8>], input: &Input) -> Vec<u8> {
    match input {
        Input::Random(bytes) => bytes.clone(),
        Input::Flipped(s, flips) => {
            let mut bytes = seeds[*s].clone();
            for (at, byte) in flips {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] = *byte;
                }
            }
            bytes
        }
        Input::Truncated(s, at) => {
            let bytes = &seeds[*s];
            bytes[..at % (bytes.len() + 1)].to_vec()
        }
        Input::Inserted(s, at, more) => {
            let mut bytes = seeds[*s].clone();
            let at = at % (bytes.len() + 1);
            bytes.splice(at..at, more.iter().copied());
            bytes
        }
        Input::Resealed(edit) => {
            let seed = match edit.as_ref() {
                Input::Flipped(s, _) | Input::Truncated(s, _) | Input::Inserted(s, _, _) => *s,
                _ => return apply(seeds, edit),
            };
            let sealed = &seeds[seed];
            let magic: [u8; 8] = sealed[..8].try_into().expect("a sealed file");
            let bodies: Vec<Vec<u8>> = seeds.iter().map(|s| s[8..s.len() - 4].to_vec()).collect();
            seal(&magic, &apply(&bodies, edit))
        }
    }
}

/// Real files of a small table with every file kind: updates (row-id files, deletions of
/// moves), deletes (deletion deltas, segment patches), fragment segments, and a compaction
/// (lineage files).
pub struct Seeds {
    pub manifests: Vec<Vec<u8>>,
    segments: Vec<(FragmentSegment, Vec<u8>)>,
    patches: Vec<(SegmentPatch, Vec<u8>, Vec<Fragment>)>,
    deletions: Vec<(u32, Vec<u8>)>,
    row_ids: Vec<(u32, Vec<u8>)>,
    /// With the lineage the manifest keeps and the fragment's rows.
    lineage: Vec<(Lineage, u32, Vec<u8>)>,
}

impl Seeds {
    pub fn build() -> Self {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(Self::write())
    }

    async fn write() -> Self {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let options = TableOptions {
            max_rows_per_fragment: 4,
            layout: ManifestLayout {
                row_ids_inline_limit: 0,
                lineage_inline_limit: 0,
                fragments_per_segment: 2,
            },
            merge: None,
            ..Default::default()
        };
        let table = Table::create(store.clone(), "t".into(), &crate::common::schema(), options)
            .await
            .expect("create");
        let rows: Vec<(i64, i64)> = (0..24).map(|k| (k, k)).collect();
        table
            .append(vec![crate::common::batch(&rows)])
            .await
            .expect("append");
        for keys in [[1, 9], [9, 17]] {
            let matches = crate::common::key_matches(move |k| keys.contains(&k));
            let update = crate::common::add_to_val(100);
            table.update_where(matches, &update).await.expect("update");
        }
        for modulus in [5, 7] {
            let matches = crate::common::key_matches(move |k| k % modulus == 3);
            table.delete_where(matches).await.expect("delete");
        }
        // Row patches ride in the manifests and segments too.
        let patched = [crate::common::addr(0, 2), crate::common::addr(5, 0)];
        let vals: arrow::array::ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![7, 8]));
        let values = arrow::array::RecordBatch::try_from_iter([("val", vals)]).expect("values");
        table
            .patch_rows(&patched.map(natal::RowId::from_u64), values)
            .await
            .expect("patch");
        let latest = table.latest().await.expect("latest");
        let manifest = latest.manifest();
        let get = |path: &TablePath| {
            let store = store.clone();
            let path = Path::from(format!("t/{path}"));
            async move { store.get(&path).await?.bytes().await.map(|b| b.to_vec()) }
        };
        let mut seeds = Seeds {
            manifests: Vec::new(),
            segments: Vec::new(),
            patches: Vec::new(),
            deletions: Vec::new(),
            row_ids: Vec::new(),
            lineage: Vec::new(),
        };
        let listed: Vec<_> = store
            .list(Some(&"t/_versions".into()))
            .try_collect()
            .await
            .expect("list");
        for meta in listed {
            let bytes = store.get(&meta.location).await.expect("get");
            seeds
                .manifests
                .push(bytes.bytes().await.expect("bytes").to_vec());
        }
        // A manifest whose data file carries a Blob Reuse Index: two fragments of blob
        // values compacted into one that names their sidecars.
        let blobs = blob_table(&store).await;
        let more = blobs
            .latest()
            .await
            .expect("b")
            .scan(natal::ScanRequest::new())
            .await;
        let more: Vec<_> = more
            .expect("scan b")
            .try_collect()
            .await
            .expect("rows of b");
        blobs.append(more).await.expect("append b");
        blobs
            .compact(natal::CompactOptions::default())
            .await
            .expect("compact b");
        let compacted = blobs.latest().await.expect("b");
        let files = compacted.manifest().fragments.iter().flat_map(|f| &f.files);
        assert!(
            files.into_iter().any(|d| d.blob_reuse_index.is_some()),
            "b's compaction reused its sidecars"
        );
        let path = blobs.store().manifest_path(compacted.version());
        let bytes = store.get(&path).await.expect("b's manifest");
        seeds
            .manifests
            .push(bytes.bytes().await.expect("bytes").to_vec());
        let read = row_ids_held_by(&manifest.fragments);
        for segment in &manifest.fragment_segments {
            let bytes = get(&segment.path).await.expect("segment");
            if let Some(patch) = &segment.patch {
                let body = decode_fragment_segment(segment, &bytes)
                    .and_then(|u| u.resolve(&read))
                    .expect("a segment");
                let patch_bytes = get(&patch.path).await.expect("patch");
                seeds.patches.push((patch.clone(), patch_bytes, body));
            }
            seeds.segments.push((segment.clone(), bytes));
        }
        for fragment in &manifest.fragments {
            for file in fragment.deletion.iter().flat_map(|d| d.files()) {
                let bytes = get(&file.path).await.expect("deletions");
                seeds.deletions.push((fragment.physical_rows, bytes));
            }
            if let Some(file) = fragment.row_ids.file() {
                let bytes = get(&file.path).await.expect("row ids");
                seeds.row_ids.push((fragment.physical_rows, bytes));
            }
        }
        // Compacted, rows last changed in different versions share a fragment: its
        // last-change versions go to a lineage file.
        table
            .compact(natal::CompactOptions::default())
            .await
            .expect("compact");
        let compacted = table.latest().await.expect("latest");
        for fragment in &compacted.manifest().fragments {
            if let Some(file) = &fragment.lineage.updated_file {
                let bytes = get(&file.path).await.expect("lineage");
                let rows = fragment.physical_rows;
                seeds.lineage.push((fragment.lineage.clone(), rows, bytes));
            }
        }
        assert!(
            !seeds.lineage.is_empty(),
            "the compaction wrote a lineage file"
        );
        seeds
    }

    pub fn segment_bytes(&self) -> Vec<Vec<u8>> {
        self.segments.iter().map(|(_, b)| b.clone()).collect()
    }

    pub fn patch_bytes(&self) -> Vec<Vec<u8>> {
        self.patches.iter().map(|(_, b, _)| b.clone()).collect()
    }

    pub fn deletion_bytes(&self) -> Vec<Vec<u8>> {
        self.deletions.iter().map(|(_, b)| b.clone()).collect()
    }

    pub fn row_id_bytes(&self) -> Vec<Vec<u8>> {
        self.row_ids.iter().map(|(_, b)| b.clone()).collect()
    }

    pub fn lineage_bytes(&self) -> Vec<Vec<u8>> {
        self.lineage.iter().map(|(_, _, b)| b.clone()).collect()
    }

    pub fn check_manifest(&self, (bytes, input): &(Vec<u8>, Input)) {
        checked(bytes, input, || {
            let decoded = Manifest::decode("m", bytes)?;
            // What `io` would read: an empty set refuses every named file (an internal
            // error here, never a panic); the seeds' sequences serve real names.
            decoded.resolve(&RowIdsRead::new()).map(drop)
        });
    }

    pub fn check_segment(&self, (bytes, input): &(Vec<u8>, Input)) {
        for (segment, _) in &self.segments {
            let mut segment = segment.clone();
            segment.size_bytes = bytes.len() as u64;
            checked(bytes, input, || {
                decode_fragment_segment(&segment, bytes)?
                    .resolve(&RowIdsRead::new())
                    .map(drop)
            });
        }
    }

    pub fn check_patch(&self, (bytes, input): &(Vec<u8>, Input)) {
        for (patch, _, body) in &self.patches {
            checked(bytes, input, || {
                apply_segment_patch(patch, bytes, body).map(drop)
            });
        }
    }

    pub fn check_deletions(&self, (bytes, input): &(Vec<u8>, Input)) {
        for rows in self
            .deletions
            .iter()
            .map(|(rows, _)| *rows)
            .chain([0, u32::MAX])
        {
            checked(bytes, input, || {
                decode_deletions("d", bytes, rows).map(drop)
            });
        }
    }

    pub fn check_row_ids(&self, (bytes, input): &(Vec<u8>, Input)) {
        // A row-id file is decoded from the buffer it was read into.
        let file = bytes::Bytes::copy_from_slice(bytes);
        for rows in self
            .row_ids
            .iter()
            .map(|(rows, _)| *rows)
            .chain([0, u32::MAX])
        {
            checked(bytes, input, || {
                decode_row_id_file("r", &file, rows).map(drop)
            });
        }
    }

    pub fn check_lineage(&self, (bytes, input): &(Vec<u8>, Input)) {
        for (stored, rows) in (self.lineage.iter())
            .flat_map(|(stored, rows, _)| [*rows, 0, u32::MAX].map(|r| (stored, r)))
        {
            checked(bytes, input, || {
                decode_lineage_file("l", bytes, stored, rows).map(drop)
            });
        }
    }
}

/// Vector index segment files of a few shapes: no partitions, an empty one, several; flat
/// and product-quantized.
pub fn vector_segment_bytes() -> Vec<Vec<u8>> {
    use natal::internals::io::{encode_vector_segment, Codebooks, VectorPartition};
    let partition = |ids: Vec<u64>, dimension: usize| VectorPartition {
        vectors: (0..ids.len() * dimension).map(|i| i as f32 * 0.5).collect(),
        ids,
        codes: Vec::new(),
    };
    let coded = |ids: Vec<u64>| VectorPartition {
        codes: (0..ids.len() * 2).map(|i| (i % 3) as u8).collect(),
        ids,
        vectors: Vec::new(),
    };
    let books = Codebooks {
        sub_vectors: 2,
        codewords: 3,
        values: (0..12).map(|i| i as f32).collect(),
    };
    vec![
        encode_vector_segment(3, &[], None, &[]),
        encode_vector_segment(
            2,
            &[0.0, 1.0, 2.0, 3.0],
            None,
            &[partition(vec![], 2), partition(vec![7, 1 << 32], 2)],
        ),
        encode_vector_segment(
            4,
            &[0.5; 12],
            None,
            &[
                partition(vec![1], 4),
                partition(vec![2, 3, 4], 4),
                partition(vec![9], 4),
            ],
        ),
        encode_vector_segment(
            4,
            &[0.5; 8],
            Some(&books),
            &[coded(vec![1, 2, 3]), coded(vec![])],
        ),
    ]
}

/// A vector segment file decoded as a search reads it: its head, then every partition.
pub fn check_vector_segment((bytes, input): &(Vec<u8>, Input)) {
    use natal::internals::io::{decode_vector_head, decode_vector_partition};
    checked(bytes, input, || {
        let Ok(head) = decode_vector_head("v", bytes, bytes.len() as u64)? else {
            return Err(Error::Internal(
                "a whole file's head asked for more bytes".into(),
            ));
        };
        for range in &head.partitions {
            let part = &bytes[range.start as usize..range.end as usize];
            decode_vector_partition("v", part, &head)?;
        }
        Ok(())
    });
}

/// Runs one decode of `bytes`: it may succeed or refuse with a typed error about the file,
/// and allocate no more than the input backs.
fn checked(bytes: &[u8], input: &Input, decode: impl FnOnce() -> natal::Result<()>) {
    take_largest_allocation();
    let result = decode();
    let largest = take_largest_allocation();
    assert!(
        largest <= allowance(bytes.len()),
        "{largest} bytes allocated at once for {} input bytes ({input:?})",
        bytes.len()
    );
    match result {
        Ok(()) => {}
        Err(Error::Corrupt { .. })
        | Err(Error::UnsupportedFeature { .. })
        | Err(Error::UnsupportedFormatVersion { .. })
        | Err(Error::PathEscapesTable { .. })
        // A row-id file the manifest names but the fuzz case did not read.
        | Err(Error::Internal(_)) => {}
        Err(other) => panic!("{input:?}: an untyped refusal: {other:?}"),
    }
}

pub fn check_table_name(name: &str) {
    if let Ok(parsed) = natal::datafusion::TableName::parse(name) {
        assert!(
            !parsed.base.is_empty() && !parsed.base.contains('/'),
            "{name:?}"
        );
    }
}

pub fn check_table_path(path: &str) {
    if let Ok(parsed) = TablePath::parse(path) {
        let parsed = parsed.as_str();
        assert!(
            !parsed
                .split('/')
                .any(|part| part == ".." || part.is_empty()),
            "{path:?} parsed as {parsed:?}, which may leave the table"
        );
    }
}

/// The files natal reads through the Parquet crate (data files, the relocation checkpoint,
/// an index segment) of a small table, each damaged in turn and read the way a query reads
/// it. Every outcome must be rows or a typed error naming the file; a panic inside the
/// Parquet crate must come back as `Corrupt`.
pub struct ParquetSeeds {
    store: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
    /// (path under the store, original bytes) per file kind.
    pub data: (Path, Vec<u8>),
    pub checkpoint: (Path, Vec<u8>),
    pub index: (Path, Vec<u8>),
    /// A data file of table `b`, whose blob column holds inline, packed and dedicated values.
    pub blob_data: (Path, Vec<u8>),
}

/// Which read a damaged Parquet file is put through.
#[derive(Debug, Clone, Copy)]
pub enum ParquetRead {
    /// A full scan and a take.
    Data,
    /// A lookup through the relocation view, which loads the checkpoint.
    Checkpoint,
    /// An index probe.
    Index,
    /// A scan of table `b`'s blob column (descriptors decoded, payloads fetched) and where
    /// each value lives.
    BlobData,
}

/// Table `b`: `key`, and `img`, a blob column whose values (sizes cycling from empty to
/// 3,100 bytes) are inline below 100 bytes, dedicated from 1,000, packed between.
async fn blob_table(store: &Arc<dyn ObjectStore>) -> Table {
    use arrow::datatypes::{DataType, Field, Schema};
    let blob = natal::BlobColumn {
        inline_limit: 100,
        dedicated_threshold: 1000,
        pack_file_size: 2500,
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("img", DataType::Binary, true).with_metadata(blob.to_metadata()),
    ]));
    let values: Vec<Vec<u8>> = (0..24)
        .map(|k: usize| vec![k as u8; [0, 7, 99, 100, 640, 999, 1000, 3100][k % 8]])
        .collect();
    let batch = arrow::array::RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(arrow::array::Int64Array::from_iter_values(0..24)),
            Arc::new(arrow::array::BinaryArray::from_iter_values(values.iter())),
        ],
    )
    .expect("blob rows");
    let rows = futures::stream::iter([Ok(batch)]);
    Table::create_from(
        store.clone(),
        "b".into(),
        &schema,
        TableOptions::default(),
        Box::pin(rows),
    )
    .await
    .expect("blob table")
    .0
}

impl ParquetSeeds {
    pub fn build() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (data, checkpoint, index, blob_data) = runtime.block_on(async {
            let options = TableOptions {
                max_rows_per_fragment: 64,
                merge: None,
                ..Default::default()
            };
            let schema = crate::common::schema();
            let table = Table::create(store.clone(), "t".into(), &schema, options)
                .await
                .expect("create");
            let rows: Vec<(i64, i64)> = (0..64).map(|k| (k, k % 7)).collect();
            table
                .append(vec![crate::common::batch(&rows)])
                .await
                .expect("append");
            let matches = crate::common::key_matches(|k| k % 3 == 0);
            let update = crate::common::add_to_val(1);
            table.update_where(matches, &update).await.expect("update");
            table.checkpoint().await.expect("checkpoint");
            table.create_index("by_val", "val").await.expect("index");
            let latest = table.latest().await.expect("latest");
            let manifest = latest.manifest();
            let file = |path: &TablePath| {
                let store = store.clone();
                let path = Path::from(format!("t/{path}"));
                async move {
                    let bytes = store.get(&path).await.expect("get").bytes().await;
                    (path, bytes.expect("bytes").to_vec())
                }
            };
            let data = file(&manifest.fragments[0].files[0].path).await;
            let checkpoint = manifest
                .relocation_checkpoint
                .as_ref()
                .expect("a checkpoint");
            let checkpoint = file(&checkpoint.path).await;
            let index = file(&manifest.indexes.segments[0].path).await;
            let blobs = blob_table(&store).await.latest().await.expect("b");
            let blob_path =
                Path::from(format!("b/{}", blobs.manifest().fragments[0].files[0].path));
            let blob_bytes = store.get(&blob_path).await.expect("get").bytes().await;
            let blob_data = (blob_path, blob_bytes.expect("bytes").to_vec());
            (data, checkpoint, index, blob_data)
        });
        Self {
            store,
            runtime,
            data,
            checkpoint,
            index,
            blob_data,
        }
    }

    /// The original bytes of the file `read` damages.
    pub fn seed(&self, read: ParquetRead) -> Vec<u8> {
        match read {
            ParquetRead::Data => self.data.1.clone(),
            ParquetRead::Checkpoint => self.checkpoint.1.clone(),
            ParquetRead::Index => self.index.1.clone(),
            ParquetRead::BlobData => self.blob_data.1.clone(),
        }
    }

    /// Puts `bytes` in place of the file `read` damages, reads through a fresh handle (no
    /// footer cached), and puts the original back.
    pub fn check(&self, read: ParquetRead, (bytes, input): &(Vec<u8>, Input)) {
        let (path, original) = match read {
            ParquetRead::Data => &self.data,
            ParquetRead::Checkpoint => &self.checkpoint,
            ParquetRead::Index => &self.index,
            ParquetRead::BlobData => &self.blob_data,
        };
        let result = self.runtime.block_on(async {
            let put = |bytes: Vec<u8>| self.store.put(path, bytes::Bytes::from(bytes).into());
            put(bytes.clone()).await.expect("put");
            let result = Self::read(&self.store, read).await;
            put(original.clone()).await.expect("put back");
            result
        });
        match result {
            Ok(()) => {}
            Err(Error::Corrupt { path: named, .. }) => {
                // A damaged descriptor may name a sidecar of the file that is not there, or
                // one shorter than it says: the sidecar is named, under the file's stem.
                let stem = path.as_ref().trim_end_matches(".parquet");
                assert!(
                    path.as_ref().ends_with(&named)
                        || (named.ends_with(".blob")
                            && stem.ends_with(named.rsplit_once('/').map_or("", |(dir, _)| dir))),
                    "{named} for {path} ({input:?})"
                )
            }
            // A descriptor damaged into an external one, whose URI no store serves.
            Err(Error::ExternalBlob { .. }) => {}
            // Bytes of another size than the manifest records.
            Err(Error::ObjectStore(_)) => {}
            Err(other) => panic!("{input:?}: an untyped refusal: {other:?}"),
        }
    }

    async fn read(store: &Arc<dyn ObjectStore>, read: ParquetRead) -> natal::Result<()> {
        let snapshot = Table::open(store.clone(), "t".into()).latest().await?;
        match read {
            ParquetRead::Data => {
                // Values are not checked: a Parquet page carries no checksum, so damage to
                // its values may decode as other values. Only the outcome's type is.
                let _: Vec<_> = snapshot
                    .scan(natal::ScanRequest::default())
                    .await?
                    .try_collect()
                    .await?;
                let ids = [3, 10, 40].map(natal::RowId::from_u64);
                snapshot.take(&ids, natal::ScanRequest::default()).await?;
            }
            ParquetRead::Checkpoint => {
                snapshot.relocation_view().await?;
            }
            ParquetRead::BlobData => {
                let blobs = Table::open(store.clone(), "b".into()).latest().await?;
                let _: Vec<_> = blobs
                    .scan(natal::ScanRequest::default())
                    .await?
                    .try_collect()
                    .await?;
                blobs.blob_places("img").await?;
            }
            ParquetRead::Index => {
                let values: arrow::array::ArrayRef =
                    Arc::new(arrow::array::Int64Array::from(vec![2, 5]));
                let probe = natal::IndexProbe::new("by_val", natal::IndexLookup::Values(values));
                let request = natal::ScanRequest {
                    index: Some(Arc::new(probe)),
                    ..Default::default()
                };
                let _: Vec<_> = snapshot.scan(request).await?.try_collect().await?;
            }
        }
        Ok(())
    }
}
