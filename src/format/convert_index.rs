//! The manifest's index section to and from protobuf: segments (scalar and vector), their
//! fragment bitmaps and vector parameters, and each name's sequence high-water mark.

use roaring::RoaringBitmap;

use super::proto;
use super::*;
use crate::error::{Error, Result};

fn vector_index_from_proto(raw: proto::VectorIndexParams, path: &str) -> Result<VectorIndex> {
    let kind = VectorIndexKind::parse(&raw.kind)
        .ok_or_else(|| Error::corrupt(path, format!("unknown vector index kind '{}'", raw.kind)))?;
    let metric = Metric::parse(&raw.metric)
        .ok_or_else(|| Error::corrupt(path, format!("unknown vector metric '{}'", raw.metric)))?;
    if raw.dimension == 0 {
        return Err(Error::corrupt(path, "a vector index of dimension 0"));
    }
    let quantized = kind == VectorIndexKind::IvfPq;
    if quantized != (raw.sub_vectors > 0)
        || (quantized && !raw.dimension.is_multiple_of(raw.sub_vectors))
    {
        return Err(Error::corrupt(
            path,
            format!(
                "a {} vector index of dimension {} with {} sub-vectors",
                kind.name(),
                raw.dimension,
                raw.sub_vectors
            ),
        ));
    }
    Ok(VectorIndex {
        kind,
        metric,
        dimension: raw.dimension,
        partitions: raw.partitions,
        sub_vectors: raw.sub_vectors,
    })
}

pub(super) fn indexes_from_proto(raw: proto::IndexSection, path: &str) -> Result<IndexSection> {
    let segments = raw
        .segments
        .into_iter()
        .map(|s| {
            let fragments =
                RoaringBitmap::deserialize_from(s.fragment_bitmap.as_slice()).map_err(|e| {
                    Error::corrupt(
                        path,
                        format!("index segment {}: bad fragment bitmap: {e}", s.uuid),
                    )
                })?;
            Ok(IndexSegment {
                path: TablePath::in_base(s.base, TablePath::parse(&s.path)?),
                uuid: s.uuid,
                name: s.name,
                field_id: s.field_id,
                fragments,
                segment_seq: s.segment_seq,
                dataset_version: s.dataset_version,
                row_count: s.row_count,
                file_size_bytes: s.file_size_bytes,
                vector: s
                    .vector
                    .map(|v| vector_index_from_proto(v, path))
                    .transpose()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let logical = raw
        .logical_indexes
        .into_iter()
        .map(|l| LogicalIndex {
            name: l.index_name,
            max_segment_seq: l.max_segment_seq,
        })
        .collect();
    let section = IndexSection { segments, logical };
    section
        .validate()
        .map_err(|reason| Error::corrupt(path, reason))?;
    Ok(section)
}

pub(super) fn indexes_to_proto(section: &IndexSection) -> proto::IndexSection {
    proto::IndexSection {
        segments: section
            .segments
            .iter()
            .map(|s| {
                let mut fragment_bitmap = Vec::with_capacity(s.fragments.serialized_size());
                // Writing into a Vec cannot fail.
                let _ = s.fragments.serialize_into(&mut fragment_bitmap);
                let (base, path) = s.path.split_base();
                proto::IndexSegment {
                    uuid: s.uuid.clone(),
                    name: s.name.clone(),
                    field_id: s.field_id,
                    path: path.to_string(),
                    base,
                    fragment_bitmap,
                    segment_seq: s.segment_seq,
                    dataset_version: s.dataset_version,
                    row_count: s.row_count,
                    file_size_bytes: s.file_size_bytes,
                    vector: s.vector.as_ref().map(|v| proto::VectorIndexParams {
                        kind: v.kind.name().to_string(),
                        metric: v.metric.name().to_string(),
                        dimension: v.dimension,
                        partitions: v.partitions,
                        sub_vectors: v.sub_vectors,
                    }),
                }
            })
            .collect(),
        logical_indexes: section
            .logical
            .iter()
            .map(|l| proto::LogicalIndex {
                index_name: l.name.clone(),
                max_segment_seq: l.max_segment_seq,
            })
            .collect(),
    }
}
