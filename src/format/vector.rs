//! Vector indexes in the manifest: how a vector index segment partitions its vectors (kind,
//! [`Metric`], dimension, partitions). The segment file itself is `io::vector_index`'s; the
//! distances are computed in `table::vector`.

/// How near two vectors are: smaller is nearer for every metric, [`Metric::Dot`] included
/// (its distance is the negated inner product).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Euclidean distance.
    L2,
    /// One minus the cosine of the angle between them (NaN for a zero vector).
    Cosine,
    /// The negated inner product.
    Dot,
}

impl Metric {
    /// The metric a name gives (`l2`, `cosine`, `dot`; any case).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "l2" | "euclidean" => Some(Self::L2),
            "cosine" => Some(Self::Cosine),
            "dot" => Some(Self::Dot),
            _ => None,
        }
    }

    /// Its name, as [`Self::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::L2 => "l2",
            Self::Cosine => "cosine",
            Self::Dot => "dot",
        }
    }
}

/// How a vector index segment stores its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VectorIndexKind {
    /// Inverted-file partitions (k-means centroids), each entry its row id and its whole
    /// vector: a probed partition's distances are exact.
    IvfFlat,
    /// Inverted-file partitions, each entry its row id and a product-quantized code of its
    /// vector's residual from its centroid (one byte a sub-vector): distances are estimates,
    /// which a search refines by the rows' exact vectors.
    IvfPq,
}

impl VectorIndexKind {
    /// The kind a name gives (`ivf_flat`; any case).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "ivf_flat" => Some(Self::IvfFlat),
            "ivf_pq" => Some(Self::IvfPq),
            _ => None,
        }
    }

    /// Its name, as [`Self::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::IvfFlat => "ivf_flat",
            Self::IvfPq => "ivf_pq",
        }
    }
}

/// A vector index segment's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorIndex {
    /// How entries are stored.
    pub kind: VectorIndexKind,
    /// The distance the index ranks by.
    pub metric: Metric,
    /// Components of every vector.
    pub dimension: u32,
    /// Partitions (centroids) of the segment; 0 for a segment of no vectors.
    pub partitions: u32,
    /// Sub-vectors of an [`VectorIndexKind::IvfPq`] code (each one byte); 0 for `ivf_flat`.
    pub sub_vectors: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for metric in [Metric::L2, Metric::Cosine, Metric::Dot] {
            assert_eq!(Metric::parse(metric.name()), Some(metric));
        }
        assert_eq!(Metric::parse("L2"), Some(Metric::L2));
        assert_eq!(Metric::parse("hamming"), None);
        assert_eq!(
            VectorIndexKind::parse("IVF_FLAT"),
            Some(VectorIndexKind::IvfFlat)
        );
        assert_eq!(
            VectorIndexKind::parse("ivf_pq"),
            Some(VectorIndexKind::IvfPq)
        );
        assert_eq!(VectorIndexKind::parse("hnsw"), None);
    }
}
