//! How an IVF index groups and codes vectors: k-means centroids (Lloyd's rounds over a
//! sample), each vector's nearest centroid, and product quantization: codebooks trained on
//! the residuals (vector minus its centroid), one code byte a sub-vector, and the per-query
//! tables a search sums to estimate a distance from a code. The heavy loops run on every
//! core (`on_every_core`); all of it is deterministic.

use std::ops::Range;

use super::vector::{dot, l2_squared};
use crate::format::Metric;
use crate::io::Codebooks;

/// Codewords of each sub-vector's codebook (a code is one byte).
pub(super) const CODEWORDS: usize = 256;

/// `work` over `0..items` cut into one range a core, the answers in order.
pub(super) fn on_every_core<T: Send>(
    items: usize,
    work: impl Fn(Range<usize>) -> Vec<T> + Sync,
) -> Vec<T> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores == 1 || items < 1024 {
        return work(0..items);
    }
    let step = items.div_ceil(cores);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..items)
            .step_by(step)
            .map(|start| {
                let work = &work;
                scope.spawn(move || work(start..(start + step).min(items)))
            })
            .collect();
        // A worker only indexes slices it was handed: a panic there is a bug, re-raised.
        (handles.into_iter())
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The centroid nearest `vector` by `metric` (by squared L2 for L2: the same order).
pub(super) fn nearest_centroid(
    vector: &[f32],
    centroids: &[f32],
    dimension: usize,
    metric: Metric,
) -> usize {
    let mut best = (f32::INFINITY, 0);
    for (i, centroid) in centroids.chunks_exact(dimension).enumerate() {
        let d = match metric {
            Metric::L2 => l2_squared(vector, centroid),
            other => other.distance(vector, centroid),
        };
        if d < best.0 {
            best = (d, i);
        }
    }
    best.1
}

/// The nearest centroid of each of `values` (`dimension` components each).
pub(super) fn assign(
    values: &[f32],
    centroids: &[f32],
    dimension: usize,
    metric: Metric,
) -> Vec<u32> {
    on_every_core(values.len() / dimension, |rows| {
        rows.map(|r| {
            let v = &values[r * dimension..(r + 1) * dimension];
            nearest_centroid(v, centroids, dimension, metric) as u32
        })
        .collect()
    })
}

/// At most `k` centroids for `sample` (vectors of `dimension` components): k-means started
/// from evenly spaced sample vectors; a centroid no vector chose stays where it was.
pub(super) fn kmeans(
    sample: &[f32],
    dimension: usize,
    k: usize,
    iterations: usize,
    metric: Metric,
) -> Vec<f32> {
    let rows = sample.len() / dimension;
    let k = k.min(rows);
    if k == 0 {
        return Vec::new();
    }
    let step = rows / k;
    let mut centroids: Vec<f32> = (0..k)
        .flat_map(|i| {
            sample[i * step * dimension..(i * step + 1) * dimension]
                .iter()
                .copied()
        })
        .collect();
    for _ in 0..iterations {
        let assigned = assign(sample, &centroids, dimension, metric);
        let mut sums = vec![0f64; k * dimension];
        let mut counts = vec![0usize; k];
        for (v, &c) in sample.chunks_exact(dimension).zip(&assigned) {
            let c = c as usize;
            counts[c] += 1;
            for (s, x) in sums[c * dimension..(c + 1) * dimension].iter_mut().zip(v) {
                *s += f64::from(*x);
            }
        }
        for c in (0..k).filter(|c| counts[*c] > 0) {
            for d in 0..dimension {
                centroids[c * dimension + d] = (sums[c * dimension + d] / counts[c] as f64) as f32;
            }
        }
    }
    centroids
}

/// At most `limit` of the `values`' vectors, evenly spaced.
pub(super) fn sample_of(values: &[f32], dimension: usize, limit: usize) -> Vec<f32> {
    let rows = values.len() / dimension;
    let stride = rows.div_ceil(limit.max(1)).max(1);
    (0..rows)
        .step_by(stride)
        .flat_map(|r| values[r * dimension..(r + 1) * dimension].iter().copied())
        .collect()
}

/// The sub-vectors an `ivf_pq` code of a `dimension`-component vector has when the user
/// names none: one per 8 components, or the nearest divisor of the dimension below that.
pub(super) fn default_sub_vectors(dimension: usize) -> usize {
    (1..=(dimension / 8).max(1))
        .rev()
        .find(|d| dimension.is_multiple_of(*d))
        .unwrap_or(1)
}

/// Codebooks for `residuals` (`dimension` components each) split into `sub_vectors` runs:
/// k-means by L2 in each run's space.
pub(super) fn train_codebooks(
    residuals: &[f32],
    dimension: usize,
    sub_vectors: usize,
    iterations: usize,
) -> Codebooks {
    let width = dimension / sub_vectors;
    let rows = residuals.len() / dimension;
    let codewords = CODEWORDS.min(rows).max(1);
    let mut values = Vec::with_capacity(sub_vectors * codewords * width);
    for s in 0..sub_vectors {
        let run: Vec<f32> = (0..rows)
            .flat_map(|r| {
                residuals[r * dimension + s * width..][..width]
                    .iter()
                    .copied()
            })
            .collect();
        let mut book = kmeans(&run, width, codewords, iterations, Metric::L2);
        // Fewer distinct vectors than codewords (or none): the book is padded with zeros.
        book.resize(codewords * width, 0.0);
        values.extend(book);
    }
    Codebooks {
        sub_vectors,
        codewords,
        values,
    }
}

/// The code of each of `residuals`: per run, the byte of its nearest codeword.
pub(super) fn encode(residuals: &[f32], dimension: usize, books: &Codebooks) -> Vec<u8> {
    let width = books.width(dimension);
    on_every_core(residuals.len() / dimension, |rows| {
        let mut codes = Vec::with_capacity(rows.len() * books.sub_vectors);
        for r in rows {
            for s in 0..books.sub_vectors {
                let part = &residuals[r * dimension + s * width..][..width];
                let book = &books.values[s * books.codewords * width..][..books.codewords * width];
                codes.push(nearest_centroid(part, book, width, Metric::L2) as u8);
            }
        }
        codes
    })
}

/// The vector an `ivf_pq` index codes for `vector` under `metric`: for cosine, the vector
/// scaled to length 1 (so L2 between codes orders as cosine does); `None` for a zero vector
/// under cosine, which has no direction and is not indexed.
pub(super) fn coding_space(vector: &[f32], metric: Metric) -> Option<Vec<f32>> {
    match metric {
        Metric::Cosine => {
            let norm = dot(vector, vector).sqrt();
            (norm > 0.0 && norm.is_finite()).then(|| vector.iter().map(|x| x / norm).collect())
        }
        Metric::L2 | Metric::Dot => Some(vector.to_vec()),
    }
}

/// What a search sums to estimate the distance between a query and each code of one
/// partition: per run, the codewords' contributions, plus a constant.
pub(super) struct DistanceTable {
    /// Row `s` holds run `s`'s term for each code byte; bytes naming no codeword (a
    /// decoded segment has none: see `decode_vector_partition`) hold infinity.
    rows: Vec<[f32; CODE_VALUES]>,
    constant: f32,
    metric: Metric,
}

/// The values one code byte can take.
const CODE_VALUES: usize = 256;

impl DistanceTable {
    /// The table for `query` (in the coding space) against the partition whose centroid is
    /// `centroid`: L2 and cosine sum each run's squared distance from the query's residual;
    /// dot adds each run's inner product with the query to the query's with the centroid.
    pub(super) fn new(query: &[f32], centroid: &[f32], books: &Codebooks, metric: Metric) -> Self {
        let dimension = query.len();
        let width = books.width(dimension);
        let residual: Vec<f32> = query.iter().zip(centroid).map(|(q, c)| q - c).collect();
        let mut rows = vec![[f32::INFINITY; CODE_VALUES]; books.sub_vectors];
        for (s, row) in rows.iter_mut().enumerate() {
            let book = &books.values[s * books.codewords * width..][..books.codewords * width];
            for (term, codeword) in row.iter_mut().zip(book.chunks_exact(width)) {
                *term = match metric {
                    Metric::Dot => dot(&query[s * width..][..width], codeword),
                    Metric::L2 | Metric::Cosine => {
                        l2_squared(&residual[s * width..][..width], codeword)
                    }
                };
            }
        }
        let constant = match metric {
            Metric::Dot => dot(query, centroid),
            Metric::L2 | Metric::Cosine => 0.0,
        };
        Self {
            rows,
            constant,
            metric,
        }
    }

    /// The estimated distance (as `Metric::distance` measures it) of the vector `code`
    /// stands for.
    pub(super) fn estimate(&self, code: &[u8]) -> f32 {
        // A row of 256 indexed by a byte: no bounds check in the loop.
        let sum = (code.iter().zip(&self.rows))
            .fold(self.constant, |sum, (&c, row)| sum + row[c as usize]);
        match self.metric {
            Metric::L2 => sum.max(0.0).sqrt(),
            // Between unit vectors, 1 - cos = |a - b|² / 2.
            Metric::Cosine => sum / 2.0,
            Metric::Dot => -sum,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_means_separates_clusters_and_every_vector_lands_in_one_partition() {
        // Two clusters far apart, 50 vectors each.
        let mut values = Vec::new();
        for i in 0..100 {
            let base = if i % 2 == 0 { 0.0 } else { 100.0 };
            values.extend_from_slice(&[base + (i % 7) as f32 * 0.1, base - (i % 3) as f32 * 0.1]);
        }
        let centroids = kmeans(&values, 2, 2, 10, Metric::L2);
        let assigned = assign(&values, &centroids, 2, Metric::L2);
        let mut sizes = [0, 0];
        for (i, &p) in assigned.iter().enumerate() {
            sizes[p as usize] += 1;
            // Every even vector is with every other even one.
            assert_eq!(p, assigned[i % 2]);
        }
        assert_eq!(sizes, [50, 50]);
        // Fewer vectors than centroids asked: one centroid a vector.
        assert_eq!(kmeans(&values[..6], 2, 8, 10, Metric::L2).len(), 6);
        assert!(kmeans(&[], 2, 8, 10, Metric::L2).is_empty());
    }

    #[test]
    fn default_sub_vectors_divide_the_dimension() {
        for (dimension, expected) in [(128, 16), (768, 96), (3, 1), (12, 1), (100, 10), (1, 1)] {
            assert_eq!(default_sub_vectors(dimension), expected, "{dimension}");
        }
    }

    /// A deterministic spread of vectors.
    fn vectors(rows: usize, dimension: usize) -> Vec<f32> {
        (0..rows * dimension)
            .map(|i| ((i * 7919 % 1000) as f32 / 100.0) - 5.0)
            .collect()
    }

    #[test]
    fn codes_of_few_vectors_are_exact_and_tables_give_their_distances() {
        // With no more vectors than codewords each vector is its own codeword, so every
        // estimate is the exact distance.
        let dimension = 8;
        let values = vectors(40, dimension);
        let books = train_codebooks(&values, dimension, 4, 20);
        assert_eq!((books.sub_vectors, books.codewords), (4, 40));
        let codes = encode(&values, dimension, &books);
        let query = vectors(41, dimension)[40 * dimension..].to_vec();
        let zero = vec![0.0; dimension];
        for metric in [Metric::L2, Metric::Dot] {
            let table = DistanceTable::new(&query, &zero, &books, metric);
            for (r, code) in codes.chunks_exact(4).enumerate() {
                let v = &values[r * dimension..(r + 1) * dimension];
                let (estimate, exact) = (table.estimate(code), metric.distance(v, &query));
                assert!(
                    (estimate - exact).abs() < 1e-3,
                    "{metric:?} {estimate} {exact}"
                );
            }
        }
        // Cosine: in the coding space (unit vectors) the estimate is the cosine distance.
        let unit: Vec<f32> = (values.chunks_exact(dimension))
            .flat_map(|v| coding_space(v, Metric::Cosine).unwrap_or_default())
            .collect();
        let books = train_codebooks(&unit, dimension, 2, 20);
        let codes = encode(&unit, dimension, &books);
        let q = coding_space(&query, Metric::Cosine).unwrap();
        let table = DistanceTable::new(&q, &zero, &books, Metric::Cosine);
        for (r, code) in codes.chunks_exact(2).enumerate() {
            let v = &values[r * dimension..(r + 1) * dimension];
            let exact = Metric::Cosine.distance(v, &query);
            assert!((table.estimate(code) - exact).abs() < 1e-3);
        }
        assert_eq!(coding_space(&[0.0, 0.0], Metric::Cosine), None);
    }

    #[test]
    fn residual_codes_estimate_near_their_true_distance() {
        // Many vectors, few codewords: estimates are close, not exact.
        let dimension = 16;
        let values = vectors(4000, dimension);
        let centroid = kmeans(&values, dimension, 1, 5, Metric::L2);
        let residuals: Vec<f32> = (values.chunks_exact(dimension))
            .flat_map(|v| {
                v.iter()
                    .zip(&centroid)
                    .map(|(x, c)| x - c)
                    .collect::<Vec<_>>()
            })
            .collect();
        let books = train_codebooks(&residuals, dimension, 8, 10);
        let codes = encode(&residuals, dimension, &books);
        let query = vec![0.5; dimension];
        let table = DistanceTable::new(&query, &centroid, &books, Metric::L2);
        let mut error = 0.0;
        for (r, code) in codes.chunks_exact(8).enumerate() {
            let v = &values[r * dimension..(r + 1) * dimension];
            error += (table.estimate(code) - Metric::L2.distance(v, &query)).abs();
        }
        let mean: f32 = (values.chunks_exact(dimension))
            .map(|v| Metric::L2.distance(v, &query))
            .sum::<f32>()
            / 4000.0;
        assert!(error / 4000.0 < 0.1 * mean, "{} vs {mean}", error / 4000.0);
    }
}
