//! Vector search (natal's side of issue 62's figures): `NATAL_BENCH_ROWS` vectors (default
//! 1M) of 128 components drawn around 1,000 Gaussian centres (seeded: centres uniform in
//! [-1, 1)^128, each vector a centre plus N(0, 0.1²) noise per component, Box-Muller over a
//! 64-bit LCG), `NATAL_BENCH_QUERIES` queries (default 200) drawn the same way, ground truth
//! by exact search. Printed:
//! - the index build (`ivf_flat`, 256 partitions, a 65,536-vector sample): time and bytes;
//! - recall@10 and the median latency per query for nprobes 1 to 64, through the index,
//!   and the exact search's latency;
//! - 10% of rows given new vectors and 5% deleted, then compaction: its time on the indexed
//!   table and on the same table without an index, index bytes it wrote (none), then
//!   recall@10 and latency with no re-index, and rows returned whose vector is stale (none);
//! - a query whose filter keeps 1% of the rows (SQL, `WHERE id % 100 = 9`): recall and
//!   latency through the index (pre-filter) and exactly.
//!
//! ```text
//! cargo bench --bench vectors
//! ```

#[path = "common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{AsArray, FixedSizeListArray, Float32Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use common::{bytes_under, env, median, ms};
use datafusion::prelude::SessionContext;
use natal::{Metric, NearestOptions, Table, TableOptions, VectorIndexOptions};
use object_store::local::LocalFileSystem;

const DIMENSION: usize = 128;
const CENTRES: usize = 1000;
const K: usize = 10;

/// Seeded normal numbers: an LCG and Box-Muller.
struct Normal(u64);

impl Normal {
    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

struct Data {
    centres: Vec<f32>,
    noise: Normal,
}

impl Data {
    fn new(seed: u64) -> Self {
        let mut noise = Normal(seed);
        let centres = (0..CENTRES * DIMENSION)
            .map(|_| noise.uniform() as f32 * 2.0 - 1.0)
            .collect();
        Self { centres, noise }
    }

    fn vector(&mut self) -> Vec<f32> {
        let c = (self.noise.uniform() * CENTRES as f64) as usize % CENTRES;
        (0..DIMENSION)
            .map(|d| self.centres[c * DIMENSION + d] + 0.1 * self.noise.normal())
            .collect()
    }
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "e",
            DataType::FixedSizeList(
                Arc::new(Field::new_list_field(DataType::Float32, true)),
                DIMENSION as i32,
            ),
            true,
        ),
    ]))
}

fn batch(ids: std::ops::Range<i64>, vectors: &[f32]) -> RecordBatch {
    let item = Arc::new(Field::new_list_field(DataType::Float32, true));
    let values = Arc::new(Float32Array::from(vectors.to_vec()));
    let list = FixedSizeListArray::new(item, DIMENSION as i32, values, None);
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(Int64Array::from_iter_values(ids)), Arc::new(list)],
    )
    .expect("batch")
}

/// The `k` nearest ids of `vectors` (by id) to `query`, ties by id.
fn exact(vectors: &BTreeMap<i64, Vec<f32>>, query: &[f32], keep: impl Fn(i64) -> bool) -> Vec<i64> {
    let mut scored: Vec<(f32, i64)> = (vectors.iter())
        .filter(|(id, _)| keep(**id))
        .map(|(id, v)| (Metric::L2.distance(v, query), *id))
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(K).map(|(_, id)| id).collect()
}

fn recall(found: &[i64], truth: &[i64]) -> f64 {
    let truth: HashSet<&i64> = truth.iter().collect();
    found.iter().filter(|id| truth.contains(id)).count() as f64 / K as f64
}

/// Recall@10 and the median latency (ms) of `nearest` with `options` over `queries`.
async fn measure(
    table: &Table,
    queries: &[Vec<f32>],
    truths: &[Vec<i64>],
    options: NearestOptions,
    vectors: &BTreeMap<i64, Vec<f32>>,
) -> (f64, f64, usize) {
    let snapshot = table.latest().await.expect("latest");
    let (mut recalls, mut times, mut stale) = (Vec::new(), Vec::new(), 0);
    for (query, truth) in queries.iter().zip(truths) {
        let started = Instant::now();
        let rows = snapshot
            .nearest("e", query, K, options)
            .await
            .expect("nearest");
        times.push(ms(started));
        let ids = rows
            .column_by_name("id")
            .expect("id")
            .as_primitive::<Int64Type>();
        let distances = rows.column_by_name(natal::DISTANCE).expect("d");
        let distances = distances.as_primitive::<arrow::datatypes::Float32Type>();
        let found: Vec<i64> = ids.values().to_vec();
        for (i, id) in found.iter().enumerate() {
            let current = vectors.get(id).map(|v| Metric::L2.distance(v, query));
            if current != Some(distances.value(i)) {
                stale += 1;
            }
        }
        recalls.push(recall(&found, truth));
    }
    let mean = recalls.iter().sum::<f64>() / recalls.len() as f64;
    (mean, median(times), stale)
}

async fn write(
    root: &Path,
    name: &str,
    rows: usize,
    data: &mut Data,
) -> (Table, BTreeMap<i64, Vec<f32>>) {
    let store = Arc::new(LocalFileSystem::new_with_prefix(root).expect("store"));
    let table = Table::create(store, name.into(), &schema(), TableOptions::default())
        .await
        .expect("create");
    let mut vectors = BTreeMap::new();
    let chunk = 100_000usize;
    for start in (0..rows).step_by(chunk) {
        let end = (start + chunk).min(rows);
        let mut values = Vec::with_capacity((end - start) * DIMENSION);
        for id in start..end {
            let v = data.vector();
            values.extend_from_slice(&v);
            vectors.insert(id as i64, v);
        }
        table
            .append(vec![batch(start as i64..end as i64, &values)])
            .await
            .expect("append");
    }
    (table, vectors)
}

#[tokio::main]
async fn main() {
    let rows = env("NATAL_BENCH_ROWS", 1_000_000) as usize;
    let query_count = env("NATAL_BENCH_QUERIES", 200) as usize;
    let dir = tempfile::tempdir().expect("temp dir");
    println!("vectors: {rows} rows of {DIMENSION} components around {CENTRES} centres, {query_count} queries, k={K}");

    let started = Instant::now();
    let (table, mut vectors) = write(dir.path(), "t", rows, &mut Data::new(7)).await;
    let (plain, _) = write(dir.path(), "plain", rows, &mut Data::new(7)).await;
    println!("write (each table): {:.0} ms", ms(started) / 2.0);
    let mut queries_data = Data::new(7);
    queries_data.noise = Normal(99);

    let queries: Vec<Vec<f32>> = (0..query_count).map(|_| queries_data.vector()).collect();
    let truths: Vec<Vec<i64>> = queries
        .iter()
        .map(|q| exact(&vectors, q, |_| true))
        .collect();

    let started = Instant::now();
    let options = VectorIndexOptions {
        partitions: 256,
        sample: 65_536,
        ..Default::default()
    };
    let built = table
        .create_vector_index("e_idx", "e", options)
        .await
        .expect("index");
    println!(
        "index build: {:.0} ms, {} bytes, {} rows",
        ms(started),
        built.figures.bytes_written,
        built.figures.rows_indexed
    );

    let exact_options = NearestOptions {
        use_index: false,
        ..Default::default()
    };
    let (r, t, _) = measure(
        &table,
        &queries[..queries.len().min(20)],
        &truths,
        exact_options,
        &vectors,
    )
    .await;
    println!("exact search: recall {r:.3}, {t:.1} ms/query");
    for nprobes in [1, 2, 4, 8, 16, 32, 64] {
        let options = NearestOptions {
            nprobes,
            ..Default::default()
        };
        let (r, t, _) = measure(&table, &queries, &truths, options, &vectors).await;
        println!("nprobes {nprobes:>2}: recall@10 {r:.3}, {t:.2} ms/query");
    }

    // 10% new vectors, 5% deleted; then compaction, with and without an index.
    let centres = Arc::new(Data::new(7).centres);
    let fresh = move |id: i64| -> Vec<f32> {
        let mut noise = Normal(id as u64 * 7919 + 13);
        let c = (noise.uniform() * CENTRES as f64) as usize % CENTRES;
        (0..DIMENSION)
            .map(|d| centres[c * DIMENSION + d] + 0.1 * noise.normal())
            .collect()
    };
    let updated = |id: i64| id % 10 == 3;
    let deleted = |id: i64| id % 20 == 7;
    let key = |f: fn(i64) -> bool| {
        move |batch: &RecordBatch| -> natal::Result<arrow::array::BooleanArray> {
            let ids = batch.column(0).as_primitive::<Int64Type>();
            Ok(ids.iter().map(|id| id.map(f)).collect())
        }
    };
    let fresh_for_update = fresh.clone();
    let update = move |batch: &RecordBatch| -> natal::Result<RecordBatch> {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let values: Vec<f32> = ids
            .values()
            .iter()
            .flat_map(|id| fresh_for_update(*id))
            .collect();
        let list = FixedSizeListArray::new(
            Arc::new(Field::new_list_field(DataType::Float32, true)),
            DIMENSION as i32,
            Arc::new(Float32Array::from(values)),
            None,
        );
        // The rows come whole (system columns after the user columns); the new values are
        // the user columns, `e` changed.
        Ok(RecordBatch::try_new(
            schema(),
            vec![batch.column(0).clone(), Arc::new(list)],
        )?)
    };
    let started = Instant::now();
    for target in [&table, &plain] {
        target
            .update_where(key(updated), &update)
            .await
            .expect("update");
        target.delete_where(key(deleted)).await.expect("delete");
    }
    println!(
        "10% updated and 5% deleted (both tables): {:.0} ms",
        ms(started)
    );
    for (id, v) in vectors.iter_mut() {
        if updated(*id) {
            *v = fresh(*id);
        }
    }
    vectors.retain(|id, _| !deleted(*id));
    let ctx = SessionContext::new();
    natal::datafusion::register(&ctx, dir.path().to_str().expect("utf-8")).expect("register");
    let index_bytes = |name: &str| bytes_under(&dir.path().join(name).join("_indices"));
    let before = index_bytes("t");
    let started = Instant::now();
    table.compact(Default::default()).await.expect("compact");
    let indexed_ms = ms(started);
    let started = Instant::now();
    plain.compact(Default::default()).await.expect("compact");
    let plain_ms = ms(started);
    println!(
        "compaction after 10% updated, 5% deleted: {indexed_ms:.0} ms indexed, {plain_ms:.0} ms without an index ({:.2}x); index bytes written {}",
        indexed_ms / plain_ms,
        index_bytes("t") - before
    );
    let truths: Vec<Vec<i64>> = queries
        .iter()
        .map(|q| exact(&vectors, q, |_| true))
        .collect();
    for nprobes in [8, 32] {
        let options = NearestOptions {
            nprobes,
            ..Default::default()
        };
        let (r, t, stale) = measure(&table, &queries, &truths, options, &vectors).await;
        println!("after compaction, nprobes {nprobes}: recall@10 {r:.3}, {t:.2} ms/query, stale rows {stale}");
    }

    // A filter keeping 1%.
    let mut times = (Vec::new(), Vec::new());
    let mut recalls = (Vec::new(), Vec::new());
    for query in queries.iter().take(50) {
        let truth = exact(&vectors, query, |id| id % 100 == 9);
        let literal: Vec<String> = query.iter().map(|x| format!("{x:?}")).collect();
        let sql = format!(
            "SELECT id FROM t WHERE id % 100 = 9 ORDER BY l2_distance(e, [{}]) LIMIT {K}",
            literal.join(", ")
        );
        for (use_index, time, found_recall) in [
            (true, &mut times.0, &mut recalls.0),
            (false, &mut times.1, &mut recalls.1),
        ] {
            let set = format!("SET natal.use_index = {use_index}");
            natal::datafusion::sql(&ctx, &set)
                .await
                .expect("set")
                .collect()
                .await
                .expect("set");
            natal::datafusion::sql(&ctx, "SET natal.nprobes = 32")
                .await
                .expect("set")
                .collect()
                .await
                .expect("set");
            let started = Instant::now();
            let batches = natal::datafusion::sql(&ctx, &sql)
                .await
                .expect("query")
                .collect()
                .await
                .expect("query");
            time.push(ms(started));
            let found: Vec<i64> = (batches.iter())
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            found_recall.push(recall(&found, &truth));
        }
    }
    let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "filter keeping 1%: indexed recall@10 {:.3}, {:.1} ms/query; exact {:.3}, {:.1} ms/query",
        mean(&recalls.0),
        median(times.0.clone()),
        mean(&recalls.1),
        median(times.1.clone())
    );
}
