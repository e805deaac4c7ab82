//! Decoders survive any bytes: every decoder of natal's own bytes (manifest, fragment
//! segment, segment patch, deletion vector, row-id file) and the table-name and path parsers
//! get random inputs and mutations of real files, 10,000 cases each. None may panic, each
//! refusal is a typed error, and no allocation may be far larger than the input backs (a
//! length field the file does not back must not size a buffer).
//!
//! Mutations are made to the sealed body and the file sealed again, as well as to the raw
//! bytes: a checksum stops almost every raw mutation before the decoder behind it is reached.
//! `benches/fuzz.rs` runs the same cases by the million.

use std::sync::OnceLock;

use proptest::prelude::*;

use proptest::test_runner::{Config, TestRunner};

use crate::fuzz_cases::{mutated, ParquetRead, ParquetSeeds, Seeds};

/// Cases per decoder: what CI runs.
const CASES: u32 = 10_000;

fn seeds() -> &'static Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    SEEDS.get_or_init(Seeds::build)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn manifests(input in mutated(seeds().manifests.clone(), true)) {
        seeds().check_manifest(&input);
    }

    #[test]
    fn fragment_segments(input in mutated(seeds().segment_bytes(), true)) {
        seeds().check_segment(&input);
    }

    #[test]
    fn segment_patches(input in mutated(seeds().patch_bytes(), true)) {
        seeds().check_patch(&input);
    }

    #[test]
    fn deletion_vectors(input in mutated(seeds().deletion_bytes(), true)) {
        seeds().check_deletions(&input);
    }

    #[test]
    fn row_id_files(input in mutated(seeds().row_id_bytes(), true)) {
        seeds().check_row_ids(&input);
    }

    #[test]
    fn lineage_files(input in mutated(seeds().lineage_bytes(), true)) {
        seeds().check_lineage(&input);
    }

    #[test]
    fn vector_index_segments(input in mutated(crate::fuzz_cases::vector_segment_bytes(), false)) {
        crate::fuzz_cases::check_vector_segment(&input);
    }

    #[test]
    fn table_names(name in names()) {
        crate::fuzz_cases::check_table_name(&name);
    }

    #[test]
    fn table_paths(path in names()) {
        crate::fuzz_cases::check_table_path(&path);
    }
}

/// Cases per file natal reads through the Parquet crate: each is a whole read through a
/// fresh handle (a manifest, a footer, pages), some 100× a decode of natal's own bytes.
const PARQUET_CASES: u32 = 10_000;

fn fuzz_parquet(read: ParquetRead) {
    let seeds = ParquetSeeds::build();
    let mut runner = TestRunner::new(Config {
        cases: PARQUET_CASES,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&mutated(vec![seeds.seed(read)], false), |input| {
            seeds.check(read, &input);
            Ok(())
        })
        .unwrap();
}

#[test]
fn data_files() {
    fuzz_parquet(ParquetRead::Data);
}

#[test]
fn relocation_checkpoints() {
    fuzz_parquet(ParquetRead::Checkpoint);
}

#[test]
fn index_segments() {
    fuzz_parquet(ParquetRead::Index);
}

/// Blob descriptors damaged in their data file: every read is values or a typed error.
#[test]
fn blob_descriptors() {
    fuzz_parquet(ParquetRead::BlobData);
}

/// Random strings and variations of real names and paths.
fn names() -> impl Strategy<Value = String> {
    let real = prop::sample::select(vec![
        "t",
        "t@v7",
        "t$rows",
        "t@v3$versions",
        "data/x.parquet",
        "_deletions/3-7.bin",
        "_fragments/0-2.patch",
        "../x",
        "a/../../b",
        "t@",
        "$",
        "@v",
        "t$rows$rows",
    ]);
    prop_oneof![
        any::<String>(),
        "[a-z@$v0-9./_\\-]{0,24}",
        (real, any::<String>(), any::<usize>()).prop_map(|(name, insert, at)| {
            let mut name = name.to_string();
            let at = name
                .char_indices()
                .map(|(i, _)| i)
                .nth(at % (name.len() + 1));
            name.insert_str(at.unwrap_or(name.len()), &insert);
            name
        }),
    ]
}
