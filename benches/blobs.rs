//! Blob columns beside Lance 14.0.2's (issue 35's figures). One table of `NATAL_BLOB_ROWS`
//! rows (default 1,000) whose `img` payloads are random bytes of mixed sizes — 50% 4–32 KiB,
//! 45% 64 KiB–1 MiB, 5% 4–16 MiB, as the issue asks (its 5,000 rows scaled down to what a
//! 2-core machine writes four times in a few minutes; `NATAL_BLOB_ROWS=5000` runs it whole)
//! — written as a natal blob column, as a plain natal `LargeBinary` column, as one object per
//! payload, and as a Lance `blob_field` (through `benches/lance_blobs.py`, each measurement a
//! fresh process, with the interpreter `NATAL_BENCH_PYTHON`, default `python3`; without
//! pylance it measures natal alone). Prints:
//!
//! - write throughput (MiB/s) of each;
//! - `SELECT key, octet_length(img)`: time and bytes read, blob column vs plain column, and
//!   Lance's time reading descriptors;
//! - 1,000 random 4 KiB ranged reads: requests and time vs Lance `read_blob_ranges`;
//! - whole values of 100 random rows: time vs Lance `take_blobs` + `read`;
//! - a filter selecting 1% of rows with `img` in the projection: payload bytes read beside
//!   the selected rows' own;
//! - compaction after deleting 20% of rows (issue 36): bytes written against the moved rows'
//!   payload, with the Blob Reuse Index, repacking, and Lance's `compact_files`; reads of live
//!   rows before and after it; a tiered merge of 32 small appends;
//! - an UPDATE of the other column of 20% of rows: bytes written against their payload, the
//!   values kept by reference and copied, and Lance's `update`;
//! - a streaming write of `NATAL_BLOB_STREAM_BYTES` MiB (default 2 GiB) in a fresh process:
//!   its peak RSS.
//!
//! ```text
//! NATAL_BENCH_PYTHON=/path/to/venv/bin/python cargo bench --bench blobs
//! ```

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/it/common.rs"]
mod it_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, LargeBinaryArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use common::{env, median, ms, Rng};
use futures::{StreamExt, TryStreamExt};
use natal::internals::io::InstrumentedStore;
use natal::{BlobColumn, BlobReferences, RowId, ScanMetrics, ScanRequest, Table, TableOptions};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStoreExt;
use serde_json::Value;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
/// Rows per batch handed to the writers: a few dozen payloads, as a loader would.
const BATCH_ROWS: usize = 50;

/// Each row's payload size, drawn as the issue's mix.
fn sizes(rows: usize, rng: &mut Rng) -> Vec<u64> {
    (0..rows)
        .map(|_| {
            let pick = rng.below(100);
            let (low, high) = if pick < 50 {
                (4 * KIB, 32 * KIB)
            } else if pick < 95 {
                (64 * KIB, MIB)
            } else {
                (4 * MIB, 16 * MIB)
            };
            low + rng.below(high - low + 1)
        })
        .collect()
}

/// `size` random bytes.
fn payload(size: u64, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(size as usize + 8);
    while (out.len() as u64) < size {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(size as usize);
    out
}

fn schema(blob: bool) -> SchemaRef {
    let img = Field::new("img", DataType::LargeBinary, true);
    let img = match blob {
        true => img.with_metadata(BlobColumn::default().to_metadata()),
        false => img,
    };
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        img,
    ]))
}

/// The rows as batches of [`BATCH_ROWS`], payloads made as they are asked for (so a write
/// holds what its writer holds, not the whole table).
fn batches(
    sizes: &[u64],
    blob: bool,
) -> impl futures::Stream<Item = natal::Result<RecordBatch>> + '_ {
    batches_of(sizes, blob, BATCH_ROWS)
}

fn batches_of(
    sizes: &[u64],
    blob: bool,
    batch_rows: usize,
) -> impl futures::Stream<Item = natal::Result<RecordBatch>> + '_ {
    let schema = schema(blob);
    let mut rng = Rng(11);
    futures::stream::iter(
        sizes
            .chunks(batch_rows)
            .enumerate()
            .map(move |(at, chunk)| {
                let start = (at * batch_rows) as i64;
                let ids = Int64Array::from_iter_values(start..start + chunk.len() as i64);
                let values: Vec<Vec<u8>> = chunk.iter().map(|&n| payload(n, &mut rng)).collect();
                let values = LargeBinaryArray::from_iter_values(values.iter());
                Ok(RecordBatch::try_new(
                    schema.clone(),
                    vec![Arc::new(ids), Arc::new(values)],
                )?)
            }),
    )
}

fn store_at(dir: &Path) -> Arc<InstrumentedStore> {
    std::fs::create_dir_all(dir).expect("bench directory");
    Arc::new(InstrumentedStore::new(Arc::new(
        LocalFileSystem::new_with_prefix(dir).expect("local store"),
    )))
}

fn mib_per_s(bytes: u64, millis: f64) -> f64 {
    bytes as f64 / MIB as f64 / (millis / 1000.0)
}

/// Runs `benches/lance_blobs.py` with `args`; its JSON answer, or `None` without Lance.
fn lance(python: Option<&str>, args: &[&str]) -> Option<Value> {
    common::python_json(python?, "lance_blobs.py", args)
}

fn seconds(v: &Option<Value>) -> Option<f64> {
    v.as_ref()?.get("seconds")?.as_f64().map(|s| s * 1000.0)
}

/// Runs of each read figure (natal's in this process; Lance's each in a fresh one).
const RUNS: usize = 5;

/// The median of [`RUNS`] runs of `lance_blobs.py` with `args`, in ms.
fn lance_median(python: Option<&str>, args: &[&str]) -> Option<f64> {
    let times: Vec<f64> = (0..RUNS)
        .filter_map(|_| seconds(&lance(python, args)))
        .collect();
    (!times.is_empty()).then(|| median(times))
}

fn shown(ms: Option<f64>) -> String {
    ms.map_or("-".to_string(), |m| format!("{m:.1} ms"))
}

/// A scan of `table` as `request`, timed: (ms, bytes the scan read, rows).
async fn timed_scan(table: &Table, request: ScanRequest) -> (f64, u64, usize) {
    let metrics = Arc::new(ScanMetrics::default());
    let snapshot = table.latest().await.expect("snapshot");
    let start = Instant::now();
    let batches: Vec<RecordBatch> = snapshot
        .scan(request.metrics(metrics.clone()))
        .await
        .expect("scan")
        .try_collect()
        .await
        .expect("scan");
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    (ms(start), metrics.bytes_read.load(Ordering::Relaxed), rows)
}

/// Set (to a byte count) in the process [`streaming_write`] starts to measure itself.
const STREAM_CHILD: &str = "NATAL_BLOB_STREAM_CHILD";

/// A figure of `/proc/self/status` (`VmRSS`, `VmHWM`) in KiB.
fn proc_status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            let value = l.strip_prefix(key)?.trim_start_matches(':');
            value.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// In a fresh process (this bench run again with [`STREAM_CHILD`] set): a blob column
/// written from a stream of `bytes` of the issue's mix, 8 rows a batch made as they are
/// asked for; prints the process's peak RSS, before and after.
async fn streaming_write_child(bytes: u64, dir: &Path) {
    let mut rng = Rng(17);
    let mut sizes = Vec::new();
    let mut total = 0;
    while total < bytes {
        sizes.extend(self::sizes(1, &mut rng));
        total += sizes[sizes.len() - 1];
    }
    let before = proc_status_kib("VmHWM");
    let start = Instant::now();
    Table::create_from(
        store_at(dir),
        ObjectPath::from("stream"),
        &schema(true),
        TableOptions::default(),
        batches_of(&sizes, true, 8).boxed(),
    )
    .await
    .expect("write");
    let took = ms(start);
    println!(
        "rows={} bytes={total} ms={took:.0} before_kib={before} peak_kib={}",
        sizes.len(),
        proc_status_kib("VmHWM")
    );
}

/// Runs [`streaming_write_child`] in a fresh process and prints what it measured.
fn streaming_write(base: &Path) {
    let bytes = env("NATAL_BLOB_STREAM_BYTES", 2 * 1024) * MIB;
    let dir = base.join("stream");
    let out = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            Command::new(exe)
                .env(STREAM_CHILD, bytes.to_string())
                .env("NATAL_BLOB_DIR", &dir)
                .output()
                .ok()
        })
        .filter(|out| out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    let Some(out) = out else {
        eprintln!("the streaming write's process failed");
        return;
    };
    let line = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> f64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let (bytes, took) = (field("bytes"), field("ms"));
    println!(
        "streaming write of {:.2} GiB ({} rows, 8 a batch): {:.0} MiB/s, peak RSS {:.0} MiB \
         ({:.0} MiB before writing; packs roll over at {} MiB)",
        bytes / (1024.0 * MIB as f64),
        field("rows"),
        bytes / MIB as f64 / (took / 1000.0),
        field("peak_kib") / 1024.0,
        field("before_kib") / 1024.0,
        BlobColumn::default().pack_file_size / MIB
    );
}

#[tokio::main]
async fn main() {
    if let Ok(bytes) = std::env::var(STREAM_CHILD) {
        let dir = PathBuf::from(std::env::var("NATAL_BLOB_DIR").expect("a directory"));
        streaming_write_child(bytes.parse().expect("a byte count"), &dir).await;
        return;
    }
    let rows = env("NATAL_BLOB_ROWS", 1000) as usize;
    let base = PathBuf::from(std::env::var("NATAL_BLOB_DIR").unwrap_or("/tmp/natal-blobs".into()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("bench directory");
    let python = std::env::var("NATAL_BENCH_PYTHON").unwrap_or("python3".into());
    let lance_ok = Command::new(&python)
        .args(["-c", "import lance"])
        .status()
        .is_ok_and(|s| s.success());
    if !lance_ok {
        eprintln!("Lance is not importable by `{python}`: measuring natal alone");
    }
    let python = lance_ok.then_some(python.as_str());
    let sizes = sizes(rows, &mut Rng(5));
    let total: u64 = sizes.iter().sum();
    println!(
        "{rows} rows, {:.1} MiB of payload ({} of 4-16 MiB)",
        total as f64 / MIB as f64,
        sizes.iter().filter(|&&s| s >= 4 * MIB).count()
    );

    // Writes: both natal tables under `base` (a catalog: SQL names them `blob`, `plain`).
    let store = store_at(&base);
    let mut tables = Vec::new();
    for (name, blob) in [
        ("natal blob column", true),
        ("natal plain LargeBinary", false),
    ] {
        let start = Instant::now();
        let (table, _) = Table::create_from(
            store.clone(),
            ObjectPath::from(if blob { "blob" } else { "plain" }),
            &schema(blob),
            TableOptions::default(),
            batches(&sizes, blob).boxed(),
        )
        .await
        .expect("write");
        let took = ms(start);
        println!(
            "write {name}: {took:.0} ms, {:.0} MiB/s",
            mib_per_s(total, took)
        );
        tables.push(table);
    }
    let objects = store_at(&base.join("objects"));
    let start = Instant::now();
    let mut rng = Rng(11);
    futures::stream::iter(
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (i, payload(n, &mut rng))),
    )
    .map(|(i, bytes)| {
        let objects = objects.clone();
        async move {
            objects
                .put(&ObjectPath::from(format!("o/{i}.bin")), bytes.into())
                .await
        }
    })
    .buffer_unordered(8)
    .try_collect::<Vec<_>>()
    .await
    .expect("puts");
    let took = ms(start);
    println!(
        "write one object per payload: {took:.0} ms, {:.0} MiB/s",
        mib_per_s(total, took)
    );
    let sizes_file = base.join("sizes.txt");
    let listed: Vec<String> = sizes.iter().map(u64::to_string).collect();
    std::fs::write(&sizes_file, listed.join("\n")).expect("sizes file");
    let lance_dir = base.join("lance");
    let (lance_dir_s, sizes_s) = (lance_dir.to_str().unwrap(), sizes_file.to_str().unwrap());
    let written = lance(python, &["write", "--dir", lance_dir_s, "--sizes", sizes_s]);
    if let Some(took) = seconds(&written) {
        println!(
            "write Lance blob_field: {took:.0} ms, {:.0} MiB/s",
            mib_per_s(total, took)
        );
    }
    let (blob, plain) = (&tables[0], &tables[1]);

    // octet_length: through SQL (timed), and the bytes the same scan reads.
    let ctx = datafusion::prelude::SessionContext::new();
    natal::datafusion::register(&ctx, base.to_str().unwrap()).expect("session");
    for (name, table, sized) in [("blob column", blob, true), ("plain column", plain, false)] {
        let query = match sized {
            true => "SELECT key, octet_length(img) FROM blob",
            false => "SELECT key, octet_length(img) FROM plain",
        };
        let mut times = Vec::new();
        for _ in 0..5 {
            let (took, _) = common::timed_sql(&ctx, query).await;
            times.push(took);
        }
        times.sort_by(f64::total_cmp);
        let request = ScanRequest::new().columns(["key", "img"]);
        let request = ScanRequest {
            blob_sizes: if sized {
                vec!["img".into()]
            } else {
                Vec::new()
            },
            ..request
        };
        let (_, bytes, _) = timed_scan(table, request).await;
        println!(
            "octet_length {name}: {:.1} ms (median of 5), {:.2} MiB read ({:.3}% of the payload)",
            times[2],
            bytes as f64 / MIB as f64,
            bytes as f64 * 100.0 / total as f64
        );
    }
    let lance_sizes = (0..3)
        .filter_map(|_| seconds(&lance(python, &["sizes", "--dir", lance_dir_s])))
        .fold(None, |best: Option<f64>, t| {
            Some(best.map_or(t, |b| b.min(t)))
        });
    println!(
        "Lance reading descriptors (key, img): {} (best of 3)",
        shown(lance_sizes)
    );

    // 1,000 random 4 KiB ranges.
    let mut rng = Rng(23);
    let wanted: Vec<(usize, u64)> = (0..1000)
        .map(|_| {
            let row = rng.below(rows as u64) as usize;
            (row, rng.below(sizes[row] - 4 * KIB + 1))
        })
        .collect();
    let snapshot = blob.latest().await.expect("snapshot");
    // Row i has id i: one write into fragment 0 (a row's id is its birth address).
    let ranges: Vec<(RowId, std::ops::Range<u64>)> = wanted
        .iter()
        .map(|&(row, at)| (RowId::from_u64(row as u64), at..at + 4 * KIB))
        .collect();
    let mut times = Vec::new();
    let mut requests = 0;
    for _ in 0..RUNS {
        store.reset();
        let start = Instant::now();
        let read = snapshot
            .read_blob_ranges("img", &ranges)
            .await
            .expect("ranges");
        times.push(ms(start));
        requests = store.tally().get;
        assert_eq!(read.len(), 1000);
    }
    let took = median(times);
    let requests_file = base.join("requests.txt");
    let lines: Vec<String> = wanted
        .iter()
        .map(|(row, at)| format!("{row} {at} {}", 4 * KIB))
        .collect();
    std::fs::write(&requests_file, lines.join("\n")).expect("requests");
    let requests_s = requests_file.to_str().unwrap();
    let args = ["ranges", "--dir", lance_dir_s, "--requests", requests_s];
    println!(
        "1,000 random 4 KiB ranges (median of {RUNS}): natal {took:.1} ms in {requests} \
         requests; Lance read_blob_ranges {}",
        shown(lance_median(python, &args))
    );

    // Whole values of 100 random rows.
    let picked: Vec<usize> = (0..100).map(|_| rng.below(rows as u64) as usize).collect();
    let ids: Vec<RowId> = picked.iter().map(|&r| RowId::from_u64(r as u64)).collect();
    let request = ScanRequest::new().columns(["img"]).row_ids(ids);
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..RUNS {
        let (took, read, _) = timed_scan(blob, request.clone()).await;
        times.push(took);
        bytes = read;
    }
    let took = median(times);
    let rows_file = base.join("rows.txt");
    let lines: Vec<String> = picked.iter().map(usize::to_string).collect();
    std::fs::write(&rows_file, lines.join("\n")).expect("rows");
    let args = [
        "take",
        "--dir",
        lance_dir_s,
        "--rows",
        rows_file.to_str().unwrap(),
    ];
    println!(
        "whole values of 100 random rows ({:.1} MiB read; median of {RUNS}): natal {took:.1} \
         ms; Lance take_blobs + read {}",
        bytes as f64 / MIB as f64,
        shown(lance_median(python, &args))
    );

    // A filter keeping 1% of rows, img in the projection.
    let selected: u64 = sizes.iter().step_by(100).sum();
    let filter = it_common::KeyModulo::new(100, 0);
    let request = ScanRequest::new().columns(["key", "img"]).filter(filter);
    let (took, bytes, kept) = timed_scan(blob, request).await;
    println!(
        "filter keeping 1% ({kept} rows, {:.1} MiB of payload): {took:.1} ms, {:.1} MiB read \
         = {:.2}x the selected payload",
        selected as f64 / MIB as f64,
        bytes as f64 / MIB as f64,
        bytes as f64 / selected as f64
    );
    compaction((&base, &store), blob, &sizes, python, lance_dir_s).await;
    update_other_column(&base, &sizes, python, lance_dir_s).await;
    tiered_merge(&base, &sizes).await;
    streaming_write(&base);
    let _ = std::fs::remove_dir_all(&base);
}

/// Whole values of the rows `ids` and the `ranges`, read from `table`'s latest version: the
/// medians of [`RUNS`] runs (ms) and the requests the ranges took.
async fn live_reads(
    table: &Table,
    store: &InstrumentedStore,
    ids: &[RowId],
    ranges: &[(RowId, std::ops::Range<u64>)],
) -> (f64, f64, u64) {
    let request = ScanRequest::new().columns(["img"]).row_ids(ids.to_vec());
    let mut whole = Vec::new();
    for _ in 0..RUNS {
        whole.push(timed_scan(table, request.clone()).await.0);
    }
    let snapshot = table.latest().await.expect("snapshot");
    let mut parts = Vec::new();
    let mut requests = 0;
    for _ in 0..RUNS {
        store.reset();
        let start = Instant::now();
        let read = snapshot
            .read_blob_ranges("img", ranges)
            .await
            .expect("ranges");
        parts.push(ms(start));
        requests = store.tally().get;
        assert_eq!(read.len(), ranges.len());
    }
    (median(whole), median(parts), requests)
}

/// Issue 36: 32 appends of 25 rows each, then a tiered merge (fan-in 8): bytes written
/// against the payload of the rows it moved.
async fn tiered_merge(base: &Path, sizes: &[u64]) {
    let sizes = &sizes[..800.min(sizes.len())];
    let dir = base.join("tiered");
    let options = TableOptions {
        merge: None,
        ..Default::default()
    };
    let table = Table::create(
        store_at(&dir),
        ObjectPath::from("t"),
        &schema(true),
        options,
    )
    .await
    .expect("tiered");
    let mut batches = batches_of(sizes, true, 25).boxed();
    while let Some(batch) = batches.next().await {
        table
            .append(vec![batch.expect("rows")])
            .await
            .expect("append");
    }
    let before = dir_bytes(&dir);
    let start = Instant::now();
    let merges = table
        .merge_small_fragments(natal::TieredMerge { fan_in: 8 })
        .await
        .expect("merge");
    let took = ms(start);
    let written = dir_bytes(&dir) - before;
    let moved: u64 = sizes.iter().sum();
    println!(
        "tiered merge of 32 appends of 25 rows ({:.1} MiB of payload moved, {} merges): \
         {took:.0} ms, {:.2} MiB written = {:.3}% of it",
        moved as f64 / MIB as f64,
        merges.len(),
        written as f64 / MIB as f64,
        written as f64 * 100.0 / moved as f64
    );
    let rows: usize = table
        .latest()
        .await
        .expect("merged")
        .manifest()
        .fragments
        .iter()
        .map(|f| f.physical_rows as usize)
        .sum();
    assert_eq!(rows, sizes.len());

    // Repack: 60% of rows deleted, then a compaction (packs under half live are repacked)
    // and a cleanup of the old version.
    table
        .delete_where(it_common::key_matches(|k| k % 5 < 3))
        .await
        .expect("delete");
    let usage = |table: Table| async move {
        let sidecars = table.latest().await.expect("v").blob_sidecars().await;
        let sidecars = sidecars.expect("sidecars");
        let dead: u64 = sidecars.iter().map(|s| s.dead_bytes()).sum();
        let size: u64 = sidecars.iter().map(|s| s.size).sum();
        (dead, size)
    };
    let (dead_before, size_before) = usage(table.clone()).await;
    let before = dir_bytes(&dir);
    let start = Instant::now();
    table
        .compact(natal::CompactOptions::default())
        .await
        .expect("compact");
    let took = ms(start);
    let written = dir_bytes(&dir) - before;
    let policy = natal::CleanupPolicy {
        keep_versions: 1,
        keep_newer_than: std::time::Duration::ZERO,
        min_file_age: std::time::Duration::ZERO,
    };
    table.cleanup(policy).await.expect("cleanup");
    let (dead_after, size_after) = usage(table.clone()).await;
    println!(
        "repack after deleting 60% of rows: sidecars held {:.1} MiB, {:.1} MiB of it dead; \
         compaction {took:.0} ms, {:.1} MiB written; after cleanup {:.1} MiB, {:.1} MiB dead \
         ({:.1} MiB reclaimed)",
        size_before as f64 / MIB as f64,
        dead_before as f64 / MIB as f64,
        written as f64 / MIB as f64,
        size_after as f64 / MIB as f64,
        dead_after as f64 / MIB as f64,
        size_before.saturating_sub(size_after) as f64 / MIB as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 36: an UPDATE of `key` (to itself) on the rows `key % 5 == 1`, after the
/// compaction: bytes written against their payload, natal keeping the blob values where they
/// are (what SQL's UPDATE of other columns does) and copying them (a copy of the table),
/// beside Lance's `update` of the same rows.
async fn update_other_column(base: &Path, sizes: &[u64], python: Option<&str>, lance_dir: &str) {
    let updated: u64 = (sizes.iter().enumerate())
        .filter(|(key, _)| key % 5 == 1)
        .map(|(_, size)| size)
        .sum();
    let copy = base.join("copied");
    copy_dir(&base.join("blob"), &copy.join("blob"));
    let keep = |batch: &RecordBatch| Ok(batch.project(&[0, 1])?);
    for (name, dir, references) in [
        (
            "keeping values by reference",
            base.to_path_buf(),
            BlobReferences::Stored,
        ),
        ("copying values", copy.clone(), BlobReferences::None),
    ] {
        let table = Table::open(store_at(&dir), ObjectPath::from("blob"));
        let rows = natal::RowMatch {
            filter: Some(it_common::KeyModulo::new(5, 1)),
            blob_references: references,
            ..Default::default()
        };
        let before = dir_bytes(&dir.join("blob"));
        let start = Instant::now();
        table.update_matching(rows, &keep).await.expect("update");
        let took = ms(start);
        let written = dir_bytes(&dir.join("blob")) - before;
        let inline = inline_bytes(sizes.iter().copied().skip(1).step_by(5));
        println!(
            "UPDATE of the other column of 20% of rows ({:.1} MiB of payload), natal {name}: \
             {took:.0} ms, {:.2} MiB written = {:.3}% of it ({})",
            updated as f64 / MIB as f64,
            written as f64 / MIB as f64,
            written as f64 * 100.0 / updated as f64,
            written_apart(written, inline, updated)
        );
    }
    let _ = std::fs::remove_dir_all(&copy);
    if let Some(lance) = lance(python, &["update", "--dir", lance_dir]) {
        let field = |name: &str| lance.get(name).and_then(Value::as_f64).unwrap_or(f64::NAN);
        println!(
            "Lance update of the same rows: {:.0} ms, {:.2} MiB written = {:.1}% of their payload",
            field("seconds") * 1000.0,
            field("written") / MIB as f64,
            field("written") * 100.0 / updated as f64
        );
    }
}

/// The payload bytes of `sizes` that live inline in a data file (under the default
/// `inline_limit`): what a rewrite writes again however it reuses sidecars.
fn inline_bytes(sizes: impl Iterator<Item = u64>) -> u64 {
    let limit = BlobColumn::default();
    sizes
        .filter(|&size| limit.kind_for(size) == natal::BlobKind::Inline)
        .sum()
}

/// `written` split into the moved rows' inline values and the rest (descriptors, ids,
/// statistics, manifest), against `moved` payload bytes.
fn written_apart(written: u64, inline: u64, moved: u64) -> String {
    let rest = written.saturating_sub(inline);
    format!(
        "{:.2} MiB of it the rows' inline values, the other {:.2} MiB = {:.3}% of the payload",
        inline as f64 / MIB as f64,
        rest as f64 / MIB as f64,
        rest as f64 * 100.0 / moved as f64
    )
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// Copies the directory `from` to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("copy");
    for entry in std::fs::read_dir(from).expect("copy").flatten() {
        let target = to.join(entry.file_name());
        match entry.file_type().expect("copy").is_dir() {
            true => copy_dir(&entry.path(), &target),
            false => drop(std::fs::copy(entry.path(), &target).expect("copy")),
        }
    }
}

/// Issue 36: 20% of rows deleted, then compaction, with the Blob Reuse Index and without it
/// (a repack, on a copy of the table), beside Lance's `compact_files` of the same: bytes
/// written against the payload of the rows moved, time, and the disk the table then takes.
async fn compaction(
    (base, store): (&Path, &InstrumentedStore),
    blob: &Table,
    sizes: &[u64],
    python: Option<&str>,
    lance_dir: &str,
) {
    let moved: u64 = (sizes.iter().enumerate())
        .filter(|(key, _)| key % 5 != 0)
        .map(|(_, size)| size)
        .sum();
    blob.delete_where(it_common::key_matches(|k| k % 5 == 0))
        .await
        .expect("delete");
    // Reads of live rows before and after: 100 whole values, 1,000 ranges of 4 KiB.
    let mut rng = Rng(29);
    let live: Vec<u64> = (0..sizes.len() as u64).filter(|k| k % 5 != 0).collect();
    let ids: Vec<RowId> = (0..100)
        .map(|_| RowId::from_u64(live[rng.below(live.len() as u64) as usize]))
        .collect();
    let ranges: Vec<(RowId, std::ops::Range<u64>)> = (0..1000)
        .map(|_| {
            let row = live[rng.below(live.len() as u64) as usize];
            let at = rng.below(sizes[row as usize] - 4 * KIB + 1);
            (RowId::from_u64(row), at..at + 4 * KIB)
        })
        .collect();
    let before = live_reads(blob, store, &ids, &ranges).await;
    let copy = base.join("copied");
    copy_dir(&base.join("blob"), &copy.join("blob"));
    let repacked = Table::open(store_at(&copy), ObjectPath::from("blob"));
    for (name, table, dir, reuse) in [
        ("with the Blob Reuse Index", blob, base.join("blob"), true),
        ("repacking (reuse off)", &repacked, copy.join("blob"), false),
    ] {
        let before = dir_bytes(&dir);
        let start = Instant::now();
        let options = natal::CompactOptions {
            reuse_blob_sidecars: reuse,
            ..Default::default()
        };
        table.compact(options).await.expect("compact");
        let took = ms(start);
        let after = dir_bytes(&dir);
        let inline = inline_bytes(
            (sizes.iter().enumerate()).filter_map(|(key, size)| (key % 5 != 0).then_some(*size)),
        );
        println!(
            "compaction after deleting 20% ({:.1} MiB of payload moved), natal {name}: {took:.0} \
             ms, {:.2} MiB written = {:.3}% of it ({}); the table then takes {:.1} MiB",
            moved as f64 / MIB as f64,
            (after - before) as f64 / MIB as f64,
            (after - before) as f64 * 100.0 / moved as f64,
            written_apart(after - before, inline, moved),
            after as f64 / MIB as f64
        );
    }
    let after = live_reads(blob, store, &ids, &ranges).await;
    println!(
        "reads of live rows (median of {RUNS}), before → after the reusing compaction: 100 whole \
         values {:.1} → {:.1} ms; 1,000 ranges {:.1} → {:.1} ms in {} → {} requests",
        before.0, after.0, before.1, after.1, before.2, after.2
    );
    let _ = std::fs::remove_dir_all(&copy);
    if let Some(lance) = lance(python, &["compact", "--dir", lance_dir]) {
        let field = |name: &str| lance.get(name).and_then(Value::as_f64).unwrap_or(f64::NAN);
        println!(
            "Lance compact_files after the same delete: {:.0} ms, {:.2} MiB written = {:.1}% of \
             the moved payload; the dataset then takes {:.1} MiB",
            field("seconds") * 1000.0,
            field("written") / MIB as f64,
            field("written") * 100.0 / moved as f64,
            field("peak") / MIB as f64
        );
    }
}
