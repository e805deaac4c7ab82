//! Every manifest, fragment segment and row-id file reads back as it was written: random
//! values of the domain types through their encodings and back.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, Schema as ArrowSchema};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::*;
use crate::rowid::RowIdSequence;

fn schema() -> Schema {
    Schema::from_arrow(&ArrowSchema::new(vec![
        ArrowField::new("a", DataType::Int64, false),
        ArrowField::new("b", DataType::Utf8, true),
        ArrowField::new("c", DataType::Float64, true),
        ArrowField::new(
            "d",
            DataType::Struct(
                vec![
                    ArrowField::new("x", DataType::Int32, false),
                    ArrowField::new_list("l", ArrowField::new("item", DataType::Utf8, true), true),
                ]
                .into(),
            ),
            true,
        ),
    ]))
    .expect("a schema")
}

fn stat_value() -> impl Strategy<Value = StatValue> {
    prop_oneof![
        any::<bool>().prop_map(StatValue::Boolean),
        any::<i64>().prop_map(StatValue::Int),
        any::<u64>().prop_map(StatValue::UInt),
        (-1e12f64..1e12).prop_map(StatValue::Float),
        "[a-z]{0,12}".prop_map(StatValue::Utf8),
        vec(any::<u8>(), 0..12).prop_map(StatValue::Binary),
    ]
}

fn column_stats(field_id: u32) -> impl Strategy<Value = ColumnStats> {
    (
        option::of(stat_value()),
        option::of(stat_value()),
        option::of(0u64..1000),
        option::of(0u64..10),
        any::<bool>(),
        option::of(0u64..1 << 40),
    )
        .prop_map(
            move |(min, max, null_count, nan_count, bounds_only, uncompressed_bytes)| ColumnStats {
                field_id,
                min,
                max,
                null_count,
                nan_count,
                bounds_only,
                uncompressed_bytes,
            },
        )
}

/// A fragment of `rows` rows with id `id`: one or two data files, maybe deletions, maybe
/// carried ids.
fn fragment(id: u32, rows: u32) -> impl Strategy<Value = Fragment> {
    let file = |name: String, field_ids: Vec<u32>| {
        let stats: Vec<_> = field_ids.iter().map(|&f| column_stats(f)).collect();
        (stats, 1u64..1 << 30).prop_map(move |(column_stats, file_size_bytes)| DataFile {
            path: TablePath::parse(&name).expect("a path"),
            field_ids: field_ids.clone(),
            row_count: u64::from(rows),
            file_size_bytes,
            column_stats,
            blob_reuse_index: None,
        })
    };
    let files = prop_oneof![
        file(format!("data/{id}.parquet"), vec![0, 1, 2]).prop_map(|f| vec![f]),
        (
            file(format!("data/{id}-a.parquet"), vec![0, 1]),
            file(format!("data/{id}-b.parquet"), vec![2]),
        )
            .prop_map(|(a, b)| vec![a, b]),
    ];
    let deletion = option::of(vec((0..=rows / 4, any::<bool>()), 1..4)).prop_map(move |files| {
        let files: Vec<DeletionFile> = files?
            .into_iter()
            .enumerate()
            .map(|(k, (deleted_rows, all_moved))| DeletionFile {
                path: TablePath::parse(&format!("_deletions/{id}-x{k}.bin")).expect("a path"),
                deleted_rows: u64::from(deleted_rows),
                moved_rows: if all_moved {
                    u64::from(deleted_rows)
                } else {
                    0
                },
            })
            .collect();
        DeletionVector::from_files(files)
    });
    let row_ids = (option::of(vec(any::<u64>(), rows as usize)), any::<bool>()).prop_map(
        move |(ids, in_a_file)| match ids.map(|ids| Arc::new(RowIdSequence::from_ids(&ids))) {
            None => FragmentRowIds::Native,
            Some(sequence) if in_a_file => FragmentRowIds::Stored {
                file: RowIdFile {
                    path: TablePath::parse(&format!("_rowids/{id}-x.bin")).expect("a path"),
                    size_bytes: 1 + u64::from(id),
                },
                sequence,
            },
            Some(sequence) => FragmentRowIds::Inline(sequence),
        },
    );
    let versions = move || option::of(vec(0u64..5, rows as usize));
    let lineage = (option::of(1u64..100), versions(), versions(), any::<bool>()).prop_map(
        move |(written_in, created, updated, in_a_file)| {
            let runs = |v: Option<Vec<u64>>| v.map(|v| Arc::new(VersionRuns::from_values(&v)));
            let lineage = match written_in {
                None => return Lineage::default(),
                Some(_) => Lineage {
                    written_in,
                    row_created: runs(created),
                    row_updated: runs(updated),
                    updated_file: None,
                },
            };
            match in_a_file && lineage.row_updated.is_some() {
                true => {
                    let path = TablePath::parse(&format!("_lineage/{id}-x.bin")).expect("a path");
                    lineage.updated_stored_in(path, 7)
                }
                false => lineage,
            }
        },
    );
    (files, deletion, row_ids, lineage).prop_map(move |(files, deletion, row_ids, lineage)| {
        Fragment {
            id,
            files,
            deletion,
            physical_rows: rows,
            row_ids,
            lineage,
            patches: Vec::new(),
        }
    })
}

/// The files `unresolved` names, as (path, rows), sorted.
fn named_files<T>(unresolved: &Unresolved<T>) -> Vec<(String, u32)> {
    let mut files: Vec<_> = unresolved
        .row_id_files()
        .iter()
        .map(|f| (f.file.path.as_str().to_string(), f.rows))
        .collect();
    files.sort();
    files
}

fn stored_files_of(fragments: &[Fragment]) -> Vec<(String, u32)> {
    let mut files: Vec<_> = fragments
        .iter()
        .filter_map(|f| Some((f.row_ids.file()?.path.as_str().to_string(), f.physical_rows)))
        .collect();
    files.sort();
    files
}

fn fragments() -> impl Strategy<Value = Vec<Fragment>> {
    vec((1u32..4, 1u32..200), 0..6).prop_flat_map(|shapes| {
        let mut id = 0;
        let fragments: Vec<_> = shapes
            .into_iter()
            .map(|(gap, rows)| {
                id += gap;
                fragment(id, rows)
            })
            .collect();
        fragments
    })
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        Just(Operation::Create),
        Just(Operation::Append),
        Just(Operation::Overwrite),
        Just(Operation::Delete),
        Just(Operation::Update),
        Just(Operation::Compact),
        Just(Operation::Checkpoint),
        Just(Operation::Restore),
        Just(Operation::CreateIndex),
        Just(Operation::DropIndex),
        Just(Operation::Clone),
    ]
}

fn manifest() -> impl Strategy<Value = Manifest> {
    (
        fragments(),
        1u64..1 << 40,
        operation(),
        (any::<u64>(), any::<u64>(), vec(any::<u32>(), 0..4)),
        option::of((1u32..100, 0u64..1000, 1u64..1 << 30)),
        1u32..=u32::MAX,
        0u32..20,
        0u32..3,
    )
        .prop_map(
            |(fragments, version, operation, counts, checkpoint, max_rows, headroom, based)| {
                let max_fragment_id = fragments.last().map(|f| f.id + headroom);
                let (rows_added, rows_removed, fragments_added) = counts;
                let mut manifest = Manifest {
                    version,
                    parent_version: version.checked_sub(1),
                    timestamp_micros: 1_700_000_000_000_000 + version as i64,
                    table_uuid: "5f0c8c52-2a41-4f0e-9d4e-0c9f1f2b7a10".into(),
                    schema: schema(),
                    fragments,
                    fragment_segments: Vec::new(),
                    max_fragment_id,
                    unknown_reader_flags: 0,
                    unknown_writer_flags: 0,
                    transaction: TransactionSummary {
                        operation,
                        read_version: version.saturating_sub(1),
                        rows_added,
                        rows_removed,
                        fragments_removed: Vec::new(),
                        fragments_added,
                        uuid: format!("{version:x}"),
                        origin: None,
                    },
                    relocation_checkpoint: checkpoint.map(|(through, entries, size)| {
                        CheckpointRef {
                            path: TablePath::parse("_relocations/c.parquet").expect("a path"),
                            covers_fragments_through: through,
                            entry_count: entries,
                            file_size_bytes: size,
                        }
                    }),
                    max_rows_per_fragment: std::num::NonZeroU32::new(max_rows).expect("not 0"),
                    indexes: IndexSection::default(),
                    bases: Vec::new(),
                    change_data_feed: version % 2 == 0,
                    patch_max_share: (version % 3 == 0).then_some(0.25),
                    change_data: (version % 3 == 0).then(Vec::new),
                    unlinked_change_data: Vec::new(),
                };
                if operation == Operation::Clone {
                    manifest.transaction.origin = Some(CloneOrigin {
                        table: "s3://bucket/source".into(),
                        version: version / 2,
                        deep: based == 0,
                    });
                }
                // Some manifests reference every file under another table's root, in the
                // same store (base 1) or another (base 2).
                if based > 0 {
                    manifest.bases = vec![
                        StorageBase {
                            id: 1,
                            path: "warehouse/source".into(),
                            store_url: None,
                        },
                        StorageBase {
                            id: 2,
                            path: "elsewhere/t".into(),
                            store_url: Some("s3://bucket".into()),
                        },
                    ];
                    manifest.rebase_file_references(|_| based);
                }
                manifest
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn manifests_read_back_as_written(manifest in manifest()) {
        let decoded = Manifest::decode("m", &manifest.encode()).expect("decodes");
        prop_assert_eq!(named_files(&decoded), stored_files_of(&manifest.fragments));
        let decoded = decoded.resolve(&row_ids_held_by(&manifest.fragments)).expect("resolves");
        prop_assert_eq!(decoded, manifest);
    }

    #[test]
    fn fragment_segments_read_back_as_written(manifest in manifest()) {
        let (Some(first), Some(last)) = (manifest.fragments.first(), manifest.fragments.last())
        else {
            return Ok(());
        };
        let bytes = encode_fragment_segment(&manifest.fragments);
        let segment = FragmentSegment {
            path: TablePath::parse("_fragments/s.bin").expect("a path"),
            first_fragment_id: first.id,
            last_fragment_id: last.id,
            fragment_count: manifest.fragments.len() as u32,
            size_bytes: bytes.len() as u64,
            patch: None,
        };
        let decoded = decode_fragment_segment(&segment, &bytes).expect("decodes");
        prop_assert_eq!(named_files(&decoded), stored_files_of(&manifest.fragments));
        let decoded = decoded.resolve(&row_ids_held_by(&manifest.fragments)).expect("resolves");
        prop_assert_eq!(decoded, manifest.fragments);
    }

    #[test]
    fn row_id_files_read_back_as_written(ids in vec(any::<u64>(), 1..500)) {
        let sequence = RowIdSequence::from_ids(&ids);
        let bytes = encode_row_id_file(&sequence);
        let decoded = decode_row_id_file("r", &bytes.into(), ids.len() as u32).expect("decodes");
        prop_assert_eq!(decoded.iter().map(|id| id.as_u64()).collect::<Vec<_>>(), ids);
    }

    #[test]
    fn lineage_files_read_back_as_written(
        created in option::of(vec(0u64..9, 1..300)),
        updated in vec(0u64..9, 1..300),
    ) {
        let rows = updated.len() as u32;
        let created = created.map(|mut c| {
            c.resize(updated.len(), 1);
            Arc::new(VersionRuns::from_values(&c))
        });
        let whole = Lineage {
            written_in: Some(9),
            row_created: created,
            row_updated: Some(Arc::new(VersionRuns::from_values(&updated))),
            updated_file: None,
        };
        let path = TablePath::parse("_lineage/0-a.bin").expect("a path");
        let bytes = encode_lineage_file(&whole);
        let stored = whole.updated_stored_in(path, bytes.len() as u64);
        prop_assert!(!stored.rows_at_hand());
        prop_assert_eq!(stored.updated_bounds(), whole.updated_bounds());
        prop_assert_eq!(stored.created_bounds(), whole.created_bounds());
        let read = decode_lineage_file("l", &bytes, &stored, rows).expect("decodes");
        prop_assert!(read.rows_at_hand());
        for offset in 0..rows {
            prop_assert_eq!(read.created_at(offset), whole.created_at(offset));
            prop_assert_eq!(read.updated_at(offset), whole.updated_at(offset));
        }
    }
}

/// A lineage file that does not fit its fragment is refused, never read as its versions:
/// runs of another length, versions outside the bounds the manifest keeps, damaged bytes.
#[test]
fn lineage_files_that_do_not_fit_are_refused() {
    let whole = Lineage {
        written_in: Some(9),
        row_created: None,
        row_updated: Some(Arc::new(VersionRuns::from_values(&[3, 4, 3]))),
        updated_file: None,
    };
    let bytes = encode_lineage_file(&whole);
    let path = TablePath::parse("_lineage/0-a.bin").expect("a path");
    let stored = whole.updated_stored_in(path.clone(), bytes.len() as u64);
    assert!(decode_lineage_file("l", &bytes, &stored, 3).is_ok());
    let corrupt = |result: crate::error::Result<Lineage>| {
        matches!(result, Err(crate::error::Error::Corrupt { .. }))
    };
    assert!(corrupt(decode_lineage_file("l", &bytes, &stored, 4)));
    let mut narrower = stored.clone();
    narrower.updated_file.as_mut().expect("a file").bounds = Some((3, 3));
    assert!(corrupt(decode_lineage_file("l", &bytes, &narrower, 3)));
    for cut in [0, 8, bytes.len() - 1] {
        assert!(corrupt(decode_lineage_file("l", &bytes[..cut], &stored, 3)));
    }
    let mut flipped = bytes.clone();
    flipped[10] ^= 1;
    assert!(corrupt(decode_lineage_file("l", &flipped, &stored, 3)));
    // A file whose body names no versions is refused too.
    let empty = Lineage::native(9);
    let bytes = encode_lineage_file(&empty);
    assert!(corrupt(decode_lineage_file("l", &bytes, &stored, 3)));
}

/// A fragment's ids are native, inline, or in a file: stored ones read back unread (with
/// their file), and a fragment claiming both an inline sequence and a file is refused.
#[test]
fn fragment_row_ids_are_one_of_three() {
    let sequence = Arc::new(RowIdSequence::from_ids(&[7, 3, 9]));
    let file = RowIdFile {
        path: TablePath::parse("_rowids/0-a.bin").expect("a path"),
        size_bytes: 40,
    };
    let fragment = |row_ids| Fragment {
        id: 0,
        files: Vec::new(),
        deletion: None,
        physical_rows: 3,
        row_ids,
        lineage: Lineage::native(2),
        patches: Vec::new(),
    };
    let stored = fragment(FragmentRowIds::Stored {
        file: file.clone(),
        sequence: sequence.clone(),
    });
    let from_proto = |raw, read: &RowIdsRead| super::convert::fragment_from_proto(raw, "m", read);
    let read = row_ids_held_by(std::slice::from_ref(&stored));
    for written in [
        fragment(FragmentRowIds::Native),
        fragment(FragmentRowIds::Inline(sequence.clone())),
        stored.clone(),
    ] {
        let back = from_proto(super::convert::fragment_to_proto(&written), &read);
        assert_eq!(back.expect("decodes"), written);
    }
    // A caller that skipped the file gets an error, never a fragment without its ids.
    let unread = from_proto(
        super::convert::fragment_to_proto(&stored),
        &RowIdsRead::new(),
    );
    assert!(
        matches!(unread, Err(crate::Error::Internal(_))),
        "{unread:?}"
    );
    let mut both = super::convert::fragment_to_proto(&stored);
    both.row_id_sequence =
        super::convert::fragment_to_proto(&fragment(FragmentRowIds::Inline(sequence)))
            .row_id_sequence;
    let refused = from_proto(both, &read);
    assert!(
        matches!(refused, Err(crate::Error::Corrupt { .. })),
        "{refused:?}"
    );
}

/// One manifest drawn from [`manifest`]'s strategy, the same every run.
fn sample_manifest() -> Manifest {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    manifest()
        .new_tree(&mut runner)
        .expect("a manifest")
        .current()
}

/// A version's change data reads back as written; a captured fragment that is not one (ids
/// native or in a file, deletions, an id above the table's) is refused as corrupt.
#[test]
fn change_data_reads_back_and_what_is_not_captured_rows_is_refused() {
    let mut manifest = sample_manifest();
    let id = manifest.max_fragment_id.map_or(0, |m| m + 1);
    manifest.max_fragment_id = Some(id);
    let captured = |row_ids| Fragment {
        id,
        files: vec![DataFile {
            path: TablePath::parse("data/captured.parquet").expect("a path"),
            field_ids: Vec::new(),
            row_count: 3,
            file_size_bytes: 64,
            column_stats: Vec::new(),
            blob_reuse_index: None,
        }],
        deletion: None,
        physical_rows: 3,
        row_ids,
        lineage: Lineage::native(2),
        patches: Vec::new(),
    };
    let inline = FragmentRowIds::Inline(Arc::new(RowIdSequence::from_ids(&[9, 4, 7])));
    let read_back = |manifest: &Manifest| {
        Manifest::decode("m", &manifest.encode())
            .and_then(|d| d.resolve(&row_ids_held_by(&manifest.fragments)))
    };
    manifest.change_data = Some(vec![captured(inline.clone())]);
    assert_eq!(read_back(&manifest).expect("reads back"), manifest);
    assert_ne!(manifest.writer_flags() & super::flags::CHANGE_DATA, 0);
    let mut above = captured(inline);
    above.id = id + 1;
    for refused in [captured(FragmentRowIds::Native), above] {
        manifest.change_data = Some(vec![refused]);
        let back = read_back(&manifest);
        assert!(
            matches!(back, Err(crate::Error::Corrupt { .. })),
            "{back:?}"
        );
    }
}

/// An update's capture, holding the ids of the fragment the update added, stores them once:
/// it reads back with them, and a capture naming a fragment of other rows is refused.
#[test]
fn captures_share_the_ids_of_the_fragment_their_update_added() {
    let mut manifest = sample_manifest();
    manifest.fragment_segments.clear();
    let ids: Vec<u64> = (0..300).map(|i| i * 7_919 + 3).collect();
    let sequence = Arc::new(RowIdSequence::from_ids(&ids));
    let first = manifest.max_fragment_id.map_or(0, |m| m + 1);
    let fragment = |id, row_ids| Fragment {
        id,
        files: vec![DataFile {
            path: TablePath::parse(&format!("data/{id}.parquet")).expect("a path"),
            field_ids: Vec::new(),
            row_count: 300,
            file_size_bytes: 64,
            column_stats: Vec::new(),
            blob_reuse_index: None,
        }],
        deletion: None,
        physical_rows: 300,
        row_ids,
        lineage: Lineage::native(2),
        patches: Vec::new(),
    };
    manifest.max_fragment_id = Some(first + 1);
    manifest
        .fragments
        .push(fragment(first, FragmentRowIds::Inline(sequence.clone())));
    manifest.transaction.fragments_added = vec![first];
    let read_back = |manifest: &Manifest| {
        Manifest::decode("m", &manifest.encode())
            .and_then(|d| d.resolve(&row_ids_held_by(&manifest.fragments)))
    };
    // The same ids held apart (an equal sequence, not the fragment's) are stored twice.
    let apart = FragmentRowIds::Inline(Arc::new(RowIdSequence::from_ids(&ids)));
    manifest.change_data = Some(vec![fragment(first + 1, apart)]);
    let twice = manifest.encode().len();
    assert_eq!(read_back(&manifest).expect("reads back"), manifest);
    manifest.change_data = Some(vec![fragment(
        first + 1,
        FragmentRowIds::Inline(sequence.clone()),
    )]);
    let once = manifest.encode().len();
    assert!(once < twice, "{once} bytes shared, {twice} apart");
    assert_eq!(read_back(&manifest).expect("reads back"), manifest);
    // A fragment of other rows named: refused.
    let mut other = manifest.clone();
    if let Some(added) = other.fragments.last_mut() {
        added.physical_rows = 299;
        added.files[0].row_count = 299;
        added.row_ids = FragmentRowIds::Inline(Arc::new(RowIdSequence::from_ids(&ids[1..])));
    }
    let mut captured = other.change_data.take().expect("captured");
    captured[0].row_ids = other.fragments.last().expect("added").row_ids.clone();
    captured[0].physical_rows = 300;
    other.change_data = Some(captured);
    let back = read_back(&other);
    assert!(
        matches!(back, Err(crate::Error::Corrupt { .. })),
        "{back:?}"
    );
}

/// A fragment's row patches read back as written; one naming a row past the fragment's
/// end, holding another number of rows than it names, no column, or out of version order
/// is refused as corrupt.
#[test]
fn row_patches_read_back_and_damaged_ones_are_refused() {
    let patch = |version: u64, offsets: &[u32], rows: u64, field_ids: Vec<u32>| super::RowPatch {
        file: DataFile {
            path: TablePath::parse(&format!("data/p{version}.parquet")).expect("a path"),
            field_ids,
            row_count: rows,
            file_size_bytes: 64,
            column_stats: Vec::new(),
            blob_reuse_index: None,
        },
        offsets: Arc::new(offsets.iter().copied().collect()),
        version,
    };
    let fragment = |patches| Fragment {
        id: 4,
        files: Vec::new(),
        deletion: None,
        physical_rows: 10,
        row_ids: FragmentRowIds::Native,
        lineage: Lineage::native(2),
        patches,
    };
    let read = RowIdsRead::new();
    let round = |f: &Fragment| {
        super::convert::fragment_from_proto(super::convert::fragment_to_proto(f), "m", &read)
    };
    let written = fragment(vec![
        patch(3, &[1, 9], 2, vec![1]),
        patch(5, &[1], 1, vec![1, 2]),
    ]);
    assert_eq!(round(&written).expect("decodes"), written);
    for damaged in [
        vec![patch(3, &[1, 10], 2, vec![1])],
        vec![patch(3, &[1, 2], 3, vec![1])],
        vec![patch(3, &[1], 1, vec![])],
        vec![patch(3, &[1], 1, vec![2, 2])],
        vec![patch(5, &[1], 1, vec![1]), patch(3, &[2], 1, vec![1])],
    ] {
        let refused = round(&fragment(damaged));
        assert!(
            matches!(refused, Err(crate::Error::Corrupt { .. })),
            "{refused:?}"
        );
    }
    let mut garbled = super::convert::fragment_to_proto(&written);
    garbled.row_patches[0].offsets = vec![0xff; 7];
    let refused = super::convert::fragment_from_proto(garbled, "m", &read);
    assert!(
        matches!(refused, Err(crate::Error::Corrupt { .. })),
        "{refused:?}"
    );
}

/// A table's patch share reads back, sets its writer flag (an older writer would drop it),
/// and a share outside `0..=1` is refused.
#[test]
fn the_patch_share_reads_back_with_its_writer_flag() {
    let mut manifest = sample_manifest();
    assert_eq!(manifest.writer_flags() & super::flags::PATCH_SHARE, 0);
    manifest.patch_max_share = Some(0.05);
    let read_back = |manifest: &Manifest| {
        Manifest::decode("m", &manifest.encode())
            .and_then(|d| d.resolve(&row_ids_held_by(&manifest.fragments)))
    };
    let back = read_back(&manifest).expect("reads back");
    assert_eq!(back.patch_max_share, Some(0.05));
    assert_ne!(manifest.writer_flags() & super::flags::PATCH_SHARE, 0);
    for share in [1.5, -0.1, f64::NAN] {
        manifest.patch_max_share = Some(share);
        let back = read_back(&manifest);
        assert!(
            matches!(back, Err(crate::Error::Corrupt { .. })),
            "{back:?}"
        );
    }
}
