//! The decoder fuzzing of `tests/it/fuzz.rs` by the million: the same seeds, mutations and
//! checks, `NATAL_FUZZ_CASES` cases per decoder (default 1,000,000), reporting cases per
//! second. A failure prints the smallest input proptest finds and exits non-zero.
//!
//! ```text
//! cargo bench --bench fuzz
//! NATAL_FUZZ_CASES=100000 cargo bench --bench fuzz
//! ```

#[allow(dead_code)]
#[path = "../tests/it/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/it/fuzz_cases.rs"]
mod fuzz_cases;

use std::time::Instant;

use fuzz_cases::{mutated, Input, Seeds};
use proptest::test_runner::{Config, TestRunner};

#[global_allocator]
static ALLOCATOR: fuzz_cases::LargestAllocation = fuzz_cases::LargestAllocation;

type Check = fn(&Seeds, &(Vec<u8>, Input));

fn main() {
    let cases: u32 = std::env::var("NATAL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let seeds = Seeds::build();
    let decoders: [(&str, Vec<Vec<u8>>, Check); 6] = [
        ("manifest", seeds.manifests.clone(), Seeds::check_manifest),
        (
            "fragment segment",
            seeds.segment_bytes(),
            Seeds::check_segment,
        ),
        ("segment patch", seeds.patch_bytes(), Seeds::check_patch),
        (
            "deletion vector",
            seeds.deletion_bytes(),
            Seeds::check_deletions,
        ),
        ("row-id file", seeds.row_id_bytes(), Seeds::check_row_ids),
        ("lineage file", seeds.lineage_bytes(), Seeds::check_lineage),
    ];
    println!("| decoder | cases | seconds | cases / s |");
    println!("|---|---|---|---|");
    let mut failed = false;
    for (name, inputs, check) in decoders {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let start = Instant::now();
        let result = runner.run(&mutated(inputs, true), |input| {
            check(&seeds, &input);
            Ok(())
        });
        let seconds = start.elapsed().as_secs_f64();
        if let Err(e) = result {
            println!("| {name} | FAILED: {e} | | |");
            failed = true;
            continue;
        }
        println!(
            "| {name} | {cases} | {seconds:.1} | {:.0} |",
            f64::from(cases) / seconds
        );
    }
    if failed {
        std::process::exit(1);
    }
}
