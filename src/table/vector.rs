//! Vectors (seed 002's `vector_idx`, seed 004's embeddings beside images): a vector column is
//! a `FixedSizeList<Float32, n>` column, and a distance between two vectors is one of the
//! [`Metric`]s. The kernels here are what SQL's `l2_distance`, `cosine_distance` and
//! `inner_product` compute, and what a nearest-neighbour search ranks by.
//!
//! The kernels sum in eight lanes (`chunks_exact(8)`), which the compiler turns into SIMD
//! additions and multiplications on any target with them: no `unsafe`, no intrinsics.

use arrow::datatypes::{DataType, Field};

pub use crate::format::Metric;

impl Metric {
    /// The distance between `a` and `b` (of equal length).
    pub fn distance(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Self::L2 => l2_squared(a, b).sqrt(),
            Self::Cosine => cosine_distance(a, b),
            Self::Dot => -dot(a, b),
        }
    }
}

/// The type of a vector column of `dimension` components.
pub fn vector_type(dimension: i32) -> DataType {
    DataType::FixedSizeList(
        std::sync::Arc::new(Field::new_list_field(DataType::Float32, true)),
        dimension,
    )
}

/// The dimension of a vector column's type, if `data_type` is one.
pub fn vector_dimension(data_type: &DataType) -> Option<usize> {
    match data_type {
        DataType::FixedSizeList(item, n) if item.data_type() == &DataType::Float32 => {
            usize::try_from(*n).ok()
        }
        _ => None,
    }
}

const LANES: usize = 8;

/// The inner product of `a` and `b`.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let (a_lanes, b_lanes) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = (a_lanes.remainder().iter())
        .zip(b_lanes.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut sums = [0f32; LANES];
    for (x, y) in a_lanes.zip(b_lanes) {
        for lane in 0..LANES {
            sums[lane] += x[lane] * y[lane];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// The squared Euclidean distance between `a` and `b`.
pub fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
    let (a_lanes, b_lanes) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = (a_lanes.remainder().iter())
        .zip(b_lanes.remainder())
        .map(|(x, y)| (x - y) * (x - y))
        .sum();
    let mut sums = [0f32; LANES];
    for (x, y) in a_lanes.zip(b_lanes) {
        for lane in 0..LANES {
            let d = x[lane] - y[lane];
            sums[lane] += d * d;
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// One minus the cosine similarity of `a` and `b`; NaN when either is all zeros.
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    let norms = (dot(a, a) * dot(b, b)).sqrt();
    if norms == 0.0 {
        return f32::NAN;
    }
    1.0 - dot(a, b) / norms
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(metric: Metric, a: &[f32], b: &[f32]) -> f64 {
        let dot: f64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        match metric {
            Metric::L2 => a
                .iter()
                .zip(b)
                .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
                .sum::<f64>()
                .sqrt(),
            Metric::Cosine => {
                let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
                1.0 - dot / (norm(a) * norm(b))
            }
            Metric::Dot => -dot,
        }
    }

    proptest! {
        #[test]
        fn kernels_agree_with_the_definitions(
            pairs in proptest::collection::vec((-100f32..100.0, -100f32..100.0), 1..70)
        ) {
            let (a, b): (Vec<f32>, Vec<f32>) = pairs.into_iter().unzip();
            for metric in [Metric::L2, Metric::Cosine, Metric::Dot] {
                let expected = naive(metric, &a, &b);
                if expected.is_nan() {
                    continue;
                }
                let found = f64::from(metric.distance(&a, &b));
                let scale = 1.0 + expected.abs() + a.len() as f64;
                prop_assert!((found - expected).abs() <= 1e-3 * scale, "{metric:?}: {found} vs {expected}");
            }
        }
    }

    #[test]
    fn names_zero_vectors_and_types() {
        assert!(cosine_distance(&[0.0, 0.0], &[1.0, 2.0]).is_nan());
        assert_eq!(Metric::L2.distance(&[3.0, 0.0], &[0.0, 4.0]), 5.0);
        assert_eq!(Metric::Dot.distance(&[1.0, 2.0], &[3.0, 4.0]), -11.0);
        assert_eq!(vector_dimension(&vector_type(128)), Some(128));
        assert_eq!(
            vector_dimension(&DataType::new_list(DataType::Float32, true)),
            None
        );
    }
}
