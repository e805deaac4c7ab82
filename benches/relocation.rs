//! The relocation view under random updates (issue #2's figures, seed 000's cost table).
//!
//! Builds a table of `NATAL_BENCH_ROWS` rows (default 10M; `id int64, val int64, payload
//! ~20-byte string`) in fragments of `NATAL_BENCH_FRAGMENT_ROWS` (default 1M) on the local
//! file system, then applies random single-row updates in commits of at most 10k rows until
//! U ∈ {0, 1k, 10k, 100k, 1M} rows have been updated. At each U it prints:
//! relocation-view resident bytes and bytes per moved row, manifest bytes, cold open (time and
//! object-store requests) with and without a relocation checkpoint, and a take of 1,000
//! random ids, cold (a fresh handle: open + view + take) and warm (same snapshot).
//!
//! ```text
//! cargo bench --bench relocation
//! NATAL_BENCH_ROWS=1000000 NATAL_BENCH_FRAGMENT_ROWS=100000 cargo bench --bench relocation
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{birth_id, bump_val, env, ms, rows, schema, Rng};
use natal::internals::io::{InstrumentedStore, RequestTally};
use natal::RowId;
use natal::{ScanRequest, Table, TableOptions};
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};

fn requests(t: RequestTally) -> String {
    format!("{}L+{}G", t.list, t.get)
}

struct Cold {
    open_ms: f64,
    open_requests: RequestTally,
    take_cold_ms: f64,
    take_cold_requests: RequestTally,
    take_warm_ms: f64,
    view_bytes: usize,
    moved: u64,
}

/// A fresh handle, as a new process would have: open latest + build the view, then take.
async fn cold(
    local: &Arc<dyn ObjectStore>,
    total_rows: u64,
    fragment_rows: u64,
    rng: &mut Rng,
) -> Cold {
    let counted = Arc::new(InstrumentedStore::new(local.clone()));
    let table = Table::open(counted.clone(), "bench".into());
    let start = Instant::now();
    let snapshot = table.latest().await.expect("open");
    let view = snapshot.relocation_view().await.expect("view");
    let open_ms = ms(start);
    let open_requests = counted.tally();
    let mut pick = || {
        (0..1000)
            .map(|_| birth_id(rng.below(total_rows), fragment_rows))
            .collect::<Vec<_>>()
    };
    counted.reset();
    let ids = pick();
    let start = Instant::now();
    let got = snapshot
        .take(&ids, ScanRequest::default())
        .await
        .expect("take");
    let take_cold_ms = ms(start) + open_ms;
    let take_cold_requests = counted.tally();
    assert_eq!(got.num_rows(), ids.len(), "every id is live");
    let ids = pick();
    let start = Instant::now();
    snapshot
        .take(&ids, ScanRequest::default())
        .await
        .expect("take");
    let take_warm_ms = ms(start);
    Cold {
        open_ms,
        open_requests,
        take_cold_ms,
        take_cold_requests,
        take_warm_ms,
        view_bytes: view.heap_size(),
        moved: view.moved_rows(),
    }
}

#[tokio::main]
async fn main() {
    let total_rows = env("NATAL_BENCH_ROWS", 10_000_000);
    let fragment_rows = env("NATAL_BENCH_FRAGMENT_ROWS", 1_000_000);
    let dir = tempfile::tempdir_in(std::env::current_dir().expect("cwd")).expect("temp dir");
    let local: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).expect("local store"));
    let options = TableOptions {
        max_rows_per_fragment: fragment_rows,
        ..Default::default()
    };
    let table = Table::create(local.clone(), "bench".into(), &schema(), options)
        .await
        .expect("create");
    let mut rng = Rng(42);

    let start = Instant::now();
    let mut batches = Vec::new();
    let mut written = 0u64;
    while written < total_rows {
        let len = (total_rows - written).min(65_536);
        batches.push(rows(written as i64, len as i64, &mut rng));
        written += len;
    }
    let stream = futures::stream::iter(batches.into_iter().map(Ok));
    table.append_stream(Box::pin(stream)).await.expect("load");
    println!(
        "natal relocation bench: {total_rows} rows, fragments of {fragment_rows}, loaded in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    println!("seed 000's bar for 1M updates: ~750 MB (counter-id index today), ~16 MB (birth-address design)\n");
    println!(
        "| U | commits | view bytes | B/moved row | manifest bytes | open (no ckpt) | reqs | open (ckpt) | reqs | ckpt bytes | take 1k cold | reqs | take 1k warm | take 1k cold (ckpt) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");

    let mut updated = 0u64;
    let mut commits = 0u64;
    for level in [0u64, 1_000, 10_000, 100_000, 1_000_000] {
        if level > total_rows {
            break;
        }
        while updated < level {
            let batch = (level - updated).min(10_000);
            let ids: Vec<RowId> = (0..batch)
                .map(|_| birth_id(rng.below(total_rows), fragment_rows))
                .collect();
            table.update_rows(&ids, &bump_val).await.expect("update");
            updated += batch;
            commits += 1;
        }
        let latest = table.latest().await.expect("latest");
        let manifest_bytes = local
            .head(&table.store().manifest_path(latest.version()))
            .await
            .expect("head")
            .size;
        let plain = cold(&local, total_rows, fragment_rows, &mut rng).await;
        // Checkpoint, measure, then restore the uncheckpointed version so later levels start
        // from a table without a checkpoint again.
        let before = latest.version();
        table.checkpoint().await.expect("checkpoint");
        let checkpointed = table.latest().await.expect("latest");
        let ckpt_bytes = checkpointed
            .manifest()
            .relocation_checkpoint
            .as_ref()
            .map_or(0, |c| c.file_size_bytes);
        let with_ckpt = cold(&local, total_rows, fragment_rows, &mut rng).await;
        table.restore(before).await.expect("restore");
        let per_row = if plain.moved == 0 {
            0.0
        } else {
            plain.view_bytes as f64 / plain.moved as f64
        };
        println!(
            "| {level} | {commits} | {} | {per_row:.2} | {manifest_bytes} | {:.1} ms | {} | {:.1} ms | {} | {ckpt_bytes} | {:.1} ms | {} | {:.1} ms | {:.1} ms |",
            plain.view_bytes,
            plain.open_ms,
            requests(plain.open_requests),
            with_ckpt.open_ms,
            requests(with_ckpt.open_requests),
            plain.take_cold_ms,
            requests(plain.take_cold_requests),
            plain.take_warm_ms,
            with_ckpt.take_cold_ms,
        );
    }
}
