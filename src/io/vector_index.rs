//! Vector index segment files (`_indices/<uuid>/vectors.bin`), natal's own immutable object
//! laid out so a search range-reads only the partitions it probes:
//!
//! ```text
//! "NATALVI1" | head length u32 | head | crc32(head) | partition 0 | ... | partition p-1
//! head:      dimension u32 | partitions u32 | rows u64
//!            | centroids f32[partitions × dimension] | ends u64[partitions]
//! partition: row ids u64[n] | vectors f32[n × dimension] | crc32 of both
//! ```
//!
//! Every number is little-endian; `ends[i]` is where partition `i` ends, counted from the
//! first partition's start, so partition `i` spans `ends[i-1]..ends[i]` (`0..ends[0]` for the
//! first) and holds `(len - 4) / (8 + 4 × dimension)` entries. An entry is a row id, never
//! an address: compaction moves rows and leaves the file as it is. Whatever does not fit
//! (magic, lengths, checksums, a dimension other than the manifest's) is `Corrupt` naming
//! the file.

use std::ops::Range;

use bytes::Bytes;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::format::{IndexSegment, TablePath};
use crate::io::TableStore;

const MAGIC: &[u8; 8] = b"NATALVI1";

/// Bytes read first from a segment: its head, unless the centroids are many.
const FIRST_READ: u64 = 64 * 1024;

/// One IVF partition as written: its entries' row ids and vectors (row-major).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorPartition {
    /// The entries' row ids.
    pub ids: Vec<u64>,
    /// The entries' vectors, one after another.
    pub vectors: Vec<f32>,
}

/// A segment's head: what a search reads before choosing partitions.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHead {
    /// Components of every vector.
    pub dimension: usize,
    /// Entries in the segment.
    pub rows: u64,
    /// One centroid a partition, one after another.
    pub centroids: Vec<f32>,
    /// Where each partition lies in the file.
    pub partitions: Vec<Range<u64>>,
}

impl VectorHead {
    /// The number of partitions.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// Partition `i`'s centroid.
    pub fn centroid(&self, i: usize) -> &[f32] {
        &self.centroids[i * self.dimension..(i + 1) * self.dimension]
    }
}

/// The bytes of a segment of `dimension`-component vectors with `centroids` (one a
/// partition) and their `partitions`.
pub fn encode_vector_segment(
    dimension: usize,
    centroids: &[f32],
    partitions: &[VectorPartition],
) -> Vec<u8> {
    let rows: u64 = partitions.iter().map(|p| p.ids.len() as u64).sum();
    let mut body = Vec::new();
    let mut ends = Vec::with_capacity(partitions.len());
    for partition in partitions {
        let start = body.len();
        for id in &partition.ids {
            body.extend_from_slice(&id.to_le_bytes());
        }
        for value in &partition.vectors {
            body.extend_from_slice(&value.to_le_bytes());
        }
        let crc = crc32fast::hash(&body[start..]);
        body.extend_from_slice(&crc.to_le_bytes());
        ends.push(body.len() as u64);
    }
    let mut head = Vec::new();
    head.extend_from_slice(&(dimension as u32).to_le_bytes());
    head.extend_from_slice(&(partitions.len() as u32).to_le_bytes());
    head.extend_from_slice(&rows.to_le_bytes());
    for value in centroids {
        head.extend_from_slice(&value.to_le_bytes());
    }
    for end in &ends {
        head.extend_from_slice(&end.to_le_bytes());
    }
    let mut out = Vec::with_capacity(16 + head.len() + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(&crc32fast::hash(&head).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Little-endian numbers read off the front of a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.bytes.split_first_chunk::<N>()?;
        self.bytes = rest;
        Some(*head)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take::<8>().map(u64::from_le_bytes)
    }
}

/// The head of a segment file of `file_size` bytes whose first bytes are `prefix`, or
/// `Ok(Err(n))` when the head needs the first `n` bytes: read them and ask again.
pub fn decode_vector_head(
    path: &str,
    prefix: &[u8],
    file_size: u64,
) -> Result<std::result::Result<VectorHead, usize>> {
    let corrupt = |reason: &str| Error::corrupt(path, format!("vector index segment: {reason}"));
    if prefix.len() < 12 || &prefix[..8] != MAGIC {
        return Err(corrupt("not a vector index segment (bad magic)"));
    }
    let head_len = u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize;
    let needed = 12 + head_len + 4;
    if needed as u64 > file_size {
        return Err(corrupt("truncated head"));
    }
    if prefix.len() < needed {
        return Ok(Err(needed));
    }
    let head = &prefix[12..12 + head_len];
    let stored_crc = u32::from_le_bytes([
        prefix[12 + head_len],
        prefix[13 + head_len],
        prefix[14 + head_len],
        prefix[15 + head_len],
    ]);
    if crc32fast::hash(head) != stored_crc {
        return Err(corrupt("head checksum mismatch"));
    }
    let mut reader = Reader { bytes: head };
    let (Some(dimension), Some(count), Some(rows)) = (reader.u32(), reader.u32(), reader.u64())
    else {
        return Err(corrupt("short head"));
    };
    let (dimension, count) = (dimension as usize, count as usize);
    let expected = (count.checked_mul(dimension))
        .and_then(|n| n.checked_mul(4))
        .and_then(|n| n.checked_add(count.checked_mul(8)?))
        .and_then(|n| n.checked_add(16));
    if dimension == 0 || expected != Some(head.len()) {
        return Err(corrupt(
            "head does not hold its centroids and partition table",
        ));
    }
    let mut centroids = Vec::with_capacity(count * dimension);
    for _ in 0..count * dimension {
        let value = reader.take::<4>().map(f32::from_le_bytes);
        centroids.push(value.ok_or_else(|| corrupt("short centroids"))?);
    }
    let data_start = needed as u64;
    let entry = 8 + 4 * dimension as u64;
    let mut partitions = Vec::with_capacity(count);
    let (mut start, mut entries) = (0u64, 0u64);
    for _ in 0..count {
        let end = reader
            .u64()
            .ok_or_else(|| corrupt("short partition table"))?;
        let len = end
            .checked_sub(start)
            .filter(|l| *l >= 4 && (l - 4) % entry == 0);
        let Some(len) = len else {
            return Err(corrupt("a partition's bounds do not hold whole entries"));
        };
        entries += (len - 4) / entry;
        partitions.push(data_start + start..data_start + end);
        start = end;
    }
    if entries != rows || data_start + start != file_size {
        return Err(corrupt("the partitions do not add up to the file"));
    }
    Ok(Ok(VectorHead {
        dimension,
        rows,
        centroids,
        partitions,
    }))
}

/// The entries of a partition whose bytes are `bytes`.
pub fn decode_vector_partition(
    path: &str,
    bytes: &[u8],
    dimension: usize,
) -> Result<VectorPartition> {
    let corrupt = |reason: &str| Error::corrupt(path, format!("vector index partition: {reason}"));
    let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(corrupt("truncated"));
    };
    if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
        return Err(corrupt("checksum mismatch"));
    }
    let entry = 8 + 4 * dimension;
    if body.len() % entry != 0 {
        return Err(corrupt("does not hold whole entries"));
    }
    let n = body.len() / entry;
    let (ids, vectors) = body.split_at(8 * n);
    Ok(VectorPartition {
        ids: ids
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
        vectors: vectors
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap_or([0; 4])))
            .collect(),
    })
}

/// A vector segment file as written.
pub(crate) struct WrittenVectorSegment {
    pub path: TablePath,
    pub file_size_bytes: u64,
}

impl TableStore {
    /// Writes a vector index segment file (see the module header).
    pub(crate) async fn write_vector_segment(
        &self,
        dimension: usize,
        centroids: &[f32],
        partitions: &[VectorPartition],
    ) -> Result<WrittenVectorSegment> {
        let bytes = encode_vector_segment(dimension, centroids, partitions);
        let path = TablePath::parse(&format!("_indices/{}/vectors.bin", uuid::Uuid::new_v4()))?;
        let file_size_bytes = bytes.len() as u64;
        self.put(&self.path(&path), Bytes::from(bytes)).await?;
        Ok(WrittenVectorSegment {
            path,
            file_size_bytes,
        })
    }

    /// The head of vector segment `segment`: one ranged read, two when its centroids are
    /// many.
    pub(crate) async fn read_vector_head(&self, segment: &IndexSegment) -> Result<VectorHead> {
        let path = segment.path.as_str();
        let location = self.path(&segment.path);
        let size = segment.file_size_bytes;
        let first = (self.object_store())
            .get_range(&location, 0..FIRST_READ.min(size))
            .await?;
        let head = match decode_vector_head(path, &first, size)? {
            Ok(head) => head,
            Err(needed) => {
                let all = (self.object_store())
                    .get_range(&location, 0..needed as u64)
                    .await?;
                decode_vector_head(path, &all, size)?
                    .map_err(|_| Error::corrupt(path, "vector index segment: short head"))?
            }
        };
        let declared = segment.vector.map(|v| v.dimension as usize);
        if declared != Some(head.dimension) {
            return Err(Error::corrupt(
                path,
                format!(
                    "vector index segment of dimension {}, not the manifest's {declared:?}",
                    head.dimension
                ),
            ));
        }
        Ok(head)
    }

    /// Partitions `which` of vector segment `segment` (with head `head`), fetched together.
    pub(crate) async fn read_vector_partitions(
        &self,
        segment: &IndexSegment,
        head: &VectorHead,
        which: &[usize],
    ) -> Result<Vec<VectorPartition>> {
        let ranges: Vec<Range<u64>> = which.iter().map(|&i| head.partitions[i].clone()).collect();
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let location = self.path(&segment.path);
        let parts = self.object_store().get_ranges(&location, &ranges).await?;
        let path = segment.path.as_str();
        parts
            .iter()
            .map(|bytes| decode_vector_partition(path, bytes, head.dimension))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (usize, Vec<f32>, Vec<VectorPartition>) {
        let partitions = vec![
            VectorPartition {
                ids: vec![1, 5],
                vectors: vec![0.0, 1.0, 2.0, 3.0],
            },
            VectorPartition::default(),
            VectorPartition {
                ids: vec![1 << 32],
                vectors: vec![-1.5, 9.0],
            },
        ];
        (2, vec![0.5, 0.5, 0.0, 0.0, -1.0, 9.0], partitions)
    }

    #[test]
    fn segments_round_trip_partition_by_partition() {
        let (dimension, centroids, partitions) = sample();
        let bytes = encode_vector_segment(dimension, &centroids, &partitions);
        let size = bytes.len() as u64;
        // A prefix too short for the head asks for more.
        assert_eq!(
            decode_vector_head("p", &bytes[..14], size).unwrap(),
            Err(80)
        );
        let head = decode_vector_head("p", &bytes, size).unwrap().unwrap();
        assert_eq!(
            (head.dimension, head.rows, head.partition_count()),
            (2, 3, 3)
        );
        assert_eq!(head.centroid(2), &[-1.0, 9.0]);
        for (i, expected) in partitions.iter().enumerate() {
            let range = head.partitions[i].clone();
            let part = &bytes[range.start as usize..range.end as usize];
            assert_eq!(&decode_vector_partition("p", part, 2).unwrap(), expected);
        }
    }

    #[test]
    fn damaged_or_truncated_segments_are_corrupt() {
        let (dimension, centroids, partitions) = sample();
        let bytes = encode_vector_segment(dimension, &centroids, &partitions);
        let size = bytes.len() as u64;
        let is_corrupt = |r: Result<std::result::Result<VectorHead, usize>>| matches!(r, Err(Error::Corrupt { ref path, .. }) if path == "p");
        assert!(is_corrupt(decode_vector_head(
            "p",
            b"NATALXX1\0\0\0\0",
            size
        )));
        assert!(is_corrupt(decode_vector_head("p", &bytes, size - 1)));
        assert!(is_corrupt(decode_vector_head("p", &bytes, size + 3)));
        for at in 12..80 {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x40;
            assert!(
                is_corrupt(decode_vector_head("p", &flipped, size)),
                "byte {at}"
            );
        }
        let head = decode_vector_head("p", &bytes, size).unwrap().unwrap();
        let range = head.partitions[0].clone();
        let mut part = bytes[range.start as usize..range.end as usize].to_vec();
        part[3] ^= 1;
        assert!(decode_vector_partition("p", &part, 2).is_err());
        assert!(decode_vector_partition("p", &part[..3], 2).is_err());
    }
}
