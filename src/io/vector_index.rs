//! Vector index segment files (`_indices/<uuid>/vectors.bin`), natal's own immutable objects
//! laid out so a search range-reads only the partitions it probes. `ivf_flat`:
//!
//! ```text
//! "NATALVI1" | head length u32 | head | crc32(head) | partition 0 | ... | partition p-1
//! head:      dimension u32 | partitions u32 | rows u64
//!            | centroids f32[partitions × dimension] | ends u64[partitions]
//! partition: row ids u64[n] | vectors f32[n × dimension] | crc32 of both
//! ```
//!
//! `ivf_pq` (each entry a product-quantized code of its residual from its centroid):
//!
//! ```text
//! "NATALVQ1" | head length u32 | head | crc32(head) | partition 0 | ... | partition p-1
//! head:      dimension u32 | partitions u32 | rows u64 | sub_vectors u32 | codewords u32
//!            | centroids f32[partitions × dimension]
//!            | codebooks f32[sub_vectors × codewords × dimension / sub_vectors]
//!            | ends u64[partitions]
//! partition: row ids u64[n] | codes u8[n × sub_vectors] | crc32 of both
//! ```
//!
//! Every number is little-endian; `ends[i]` is where partition `i` ends, counted from the
//! first partition's start, so partition `i` spans `ends[i-1]..ends[i]` (`0..ends[0]` for the
//! first) and holds `(len - 4) / (8 + entry)` entries. An entry is a row id, never an
//! address: compaction moves rows and leaves the file as it is. Whatever does not fit
//! (magic, lengths, checksums, a code naming no codeword, a dimension other than the
//! manifest's) is `Corrupt` naming the file.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::format::{IndexSegment, TablePath};
use crate::io::TableStore;

const FLAT_MAGIC: &[u8; 8] = b"NATALVI1";
const PQ_MAGIC: &[u8; 8] = b"NATALVQ1";

/// Bytes read first from a segment: its head, unless the centroids are many.
const FIRST_READ: u64 = 64 * 1024;

/// One IVF partition as written: its entries' row ids and either their vectors (`ivf_flat`,
/// row-major) or their codes (`ivf_pq`, `sub_vectors` bytes an entry).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorPartition {
    /// The entries' row ids.
    pub ids: Vec<u64>,
    /// The entries' vectors, one after another (`ivf_flat`).
    pub vectors: Vec<f32>,
    /// The entries' codes, one after another (`ivf_pq`).
    pub codes: Vec<u8>,
}

/// Product quantization's codebooks: the space split into `sub_vectors` equal runs of
/// components, each with `codewords` (at most 256) codewords a code byte names.
#[derive(Debug, Clone, PartialEq)]
pub struct Codebooks {
    /// Runs of components the dimension is split into.
    pub sub_vectors: usize,
    /// Codewords of each run.
    pub codewords: usize,
    /// Codeword `c` of run `s` is `values[(s × codewords + c) × width ..][.. width]`, where
    /// width is the dimension divided by `sub_vectors`.
    pub values: Vec<f32>,
}

impl Codebooks {
    /// Components of each sub-vector in a space of `dimension`.
    pub fn width(&self, dimension: usize) -> usize {
        dimension / self.sub_vectors.max(1)
    }
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
    /// The codebooks of an `ivf_pq` segment.
    pub codebooks: Option<Codebooks>,
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

    /// Bytes an entry holds beside its row id.
    fn entry_payload(&self) -> usize {
        match &self.codebooks {
            Some(books) => books.sub_vectors,
            None => 4 * self.dimension,
        }
    }
}

/// The bytes of a segment of `dimension`-component vectors with `centroids` (one a
/// partition), `codebooks` for an `ivf_pq` segment (whose partitions hold codes), and their
/// `partitions`.
pub fn encode_vector_segment(
    dimension: usize,
    centroids: &[f32],
    codebooks: Option<&Codebooks>,
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
        match codebooks {
            Some(_) => body.extend_from_slice(&partition.codes),
            None => {
                for value in &partition.vectors {
                    body.extend_from_slice(&value.to_le_bytes());
                }
            }
        }
        let crc = crc32fast::hash(&body[start..]);
        body.extend_from_slice(&crc.to_le_bytes());
        ends.push(body.len() as u64);
    }
    let mut head = Vec::new();
    head.extend_from_slice(&(dimension as u32).to_le_bytes());
    head.extend_from_slice(&(partitions.len() as u32).to_le_bytes());
    head.extend_from_slice(&rows.to_le_bytes());
    if let Some(books) = codebooks {
        head.extend_from_slice(&(books.sub_vectors as u32).to_le_bytes());
        head.extend_from_slice(&(books.codewords as u32).to_le_bytes());
    }
    for value in centroids {
        head.extend_from_slice(&value.to_le_bytes());
    }
    for value in codebooks.iter().flat_map(|b| &b.values) {
        head.extend_from_slice(&value.to_le_bytes());
    }
    for end in &ends {
        head.extend_from_slice(&end.to_le_bytes());
    }
    let mut out = Vec::with_capacity(16 + head.len() + body.len());
    out.extend_from_slice(if codebooks.is_some() {
        PQ_MAGIC
    } else {
        FLAT_MAGIC
    });
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

    /// `n` floats, or `None` when fewer are left.
    fn f32s(&mut self, n: usize) -> Option<Vec<f32>> {
        let bytes = self.bytes.get(..n.checked_mul(4)?)?;
        self.bytes = &self.bytes[bytes.len()..];
        Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
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
    let quantized = match prefix.get(..8) {
        Some(magic) if prefix.len() >= 12 && magic == FLAT_MAGIC => false,
        Some(magic) if prefix.len() >= 12 && magic == PQ_MAGIC => true,
        _ => return Err(corrupt("not a vector index segment (bad magic)")),
    };
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
    let shape = match quantized {
        false => Some((0, 0)),
        true => reader.u32().zip(reader.u32()),
    };
    let Some((sub_vectors, codewords)) = shape.map(|(s, c)| (s as usize, c as usize)) else {
        return Err(corrupt("short head"));
    };
    if dimension == 0
        || (quantized
            && (sub_vectors == 0
                || dimension % sub_vectors != 0
                || !(1..=256).contains(&codewords)))
    {
        return Err(corrupt("a head of an impossible shape"));
    }
    let centroid_values = count.checked_mul(dimension);
    let codebook_values = codewords.checked_mul(dimension);
    let centroids = centroid_values.and_then(|n| reader.f32s(n));
    let books = codebook_values.and_then(|n| reader.f32s(n));
    let (Some(centroids), Some(books)) = (centroids, books) else {
        return Err(corrupt("head does not hold its centroids and codebooks"));
    };
    if count.checked_mul(8) != Some(reader.bytes.len()) {
        return Err(corrupt("head does not hold its partition table"));
    }
    let codebooks = quantized.then_some(Codebooks {
        sub_vectors,
        codewords,
        values: books,
    });
    let entry = 8 + match &codebooks {
        Some(books) => books.sub_vectors as u64,
        None => 4 * dimension as u64,
    };
    let data_start = needed as u64;
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
        codebooks,
        partitions,
    }))
}

/// The entries of a partition of the segment with head `head` whose bytes are `bytes`.
pub fn decode_vector_partition(
    path: &str,
    bytes: &[u8],
    head: &VectorHead,
) -> Result<VectorPartition> {
    let corrupt = |reason: &str| Error::corrupt(path, format!("vector index partition: {reason}"));
    let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(corrupt("truncated"));
    };
    if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
        return Err(corrupt("checksum mismatch"));
    }
    let entry = 8 + head.entry_payload();
    if body.len() % entry != 0 {
        return Err(corrupt("does not hold whole entries"));
    }
    let n = body.len() / entry;
    let (ids, payload) = body.split_at(8 * n);
    let ids = ids
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    match &head.codebooks {
        Some(books) => {
            if payload.iter().any(|&c| c as usize >= books.codewords) {
                return Err(corrupt("a code names no codeword"));
            }
            Ok(VectorPartition {
                ids,
                vectors: Vec::new(),
                codes: payload.to_vec(),
            })
        }
        None => Ok(VectorPartition {
            ids,
            vectors: payload
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or([0; 4])))
                .collect(),
            codes: Vec::new(),
        }),
    }
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
        codebooks: Option<&Codebooks>,
        partitions: &[VectorPartition],
    ) -> Result<WrittenVectorSegment> {
        let bytes = encode_vector_segment(dimension, centroids, codebooks, partitions);
        let path = TablePath::parse(&format!("_indices/{}/vectors.bin", uuid::Uuid::new_v4()))?;
        let file_size_bytes = bytes.len() as u64;
        self.put(&self.path(&path), Bytes::from(bytes)).await?;
        Ok(WrittenVectorSegment {
            path,
            file_size_bytes,
        })
    }

    /// The head of vector segment `segment` (cached): one ranged read, two when its
    /// centroids are many.
    pub(crate) async fn read_vector_head(&self, segment: &IndexSegment) -> Result<Arc<VectorHead>> {
        let path = segment.path.as_str();
        let load = async {
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
            Ok::<_, Error>(Arc::new(head))
        };
        let head = self.vector_heads.get_or_load(path, load).await?;
        let declared = segment
            .vector
            .map(|v| (v.dimension as usize, v.sub_vectors as usize));
        let found = (
            head.dimension,
            head.codebooks.as_ref().map_or(0, |b| b.sub_vectors),
        );
        if declared != Some(found) {
            return Err(Error::corrupt(
                path,
                format!(
                    "vector index segment of (dimension, sub-vectors) {found:?}, not the \
                     manifest's {declared:?}"
                ),
            ));
        }
        Ok(head)
    }

    /// Partitions `which` of vector segment `segment` (with head `head`): those not cached
    /// fetched together.
    pub(crate) async fn read_vector_partitions(
        &self,
        segment: &IndexSegment,
        head: &VectorHead,
        which: &[usize],
    ) -> Result<Vec<Arc<VectorPartition>>> {
        let path = segment.path.as_str();
        let key = |i: usize| format!("{path}#{i}");
        let mut found: Vec<Option<Arc<VectorPartition>>> = which
            .iter()
            .map(|&i| self.vector_partitions.get(&key(i)))
            .collect();
        let missing: Vec<usize> = (0..which.len()).filter(|&at| found[at].is_none()).collect();
        if !missing.is_empty() {
            let ranges: Vec<Range<u64>> = (missing.iter())
                .map(|&at| head.partitions[which[at]].clone())
                .collect();
            let location = self.path(&segment.path);
            let parts = self.object_store().get_ranges(&location, &ranges).await?;
            for (&at, bytes) in missing.iter().zip(&parts) {
                let partition = Arc::new(decode_vector_partition(path, bytes, head)?);
                self.vector_partitions
                    .insert(&key(which[at]), partition.clone());
                found[at] = Some(partition);
            }
        }
        Ok(found.into_iter().flatten().collect())
    }
}

/// The vectors of one fragment's vector column that no index segment covers, as an
/// indexed search reads them to search exactly: its live rows with a finite vector.
#[derive(Debug, Default)]
pub struct VectorRun {
    /// The rows' ids.
    pub ids: Vec<u64>,
    /// Their vectors, one after another.
    pub values: Vec<f32>,
}

impl VectorRun {
    /// The bytes it holds (what bounds the handle's cache of runs).
    pub(crate) fn bytes(run: &Arc<VectorRun>) -> usize {
        run.ids.len() * 8 + run.values.len() * 4
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
                ..Default::default()
            },
            VectorPartition::default(),
            VectorPartition {
                ids: vec![1 << 32],
                vectors: vec![-1.5, 9.0],
                ..Default::default()
            },
        ];
        (2, vec![0.5, 0.5, 0.0, 0.0, -1.0, 9.0], partitions)
    }

    /// `sample()`'s entries as codes of 2 sub-vectors over 3 codewords.
    fn quantized() -> (Codebooks, Vec<VectorPartition>) {
        let books = Codebooks {
            sub_vectors: 2,
            codewords: 3,
            values: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        };
        let (_, _, mut partitions) = sample();
        for (p, codes) in partitions
            .iter_mut()
            .zip([vec![0, 1, 2, 2], vec![], vec![1, 0]])
        {
            p.vectors.clear();
            p.codes = codes;
        }
        (books, partitions)
    }

    /// Each of `partitions` decodes from its place in `bytes` as written.
    fn assert_partitions_read_back(
        bytes: &[u8],
        head: &VectorHead,
        partitions: &[VectorPartition],
    ) {
        for (i, expected) in partitions.iter().enumerate() {
            let range = head.partitions[i].clone();
            let part = &bytes[range.start as usize..range.end as usize];
            assert_eq!(&decode_vector_partition("p", part, head).unwrap(), expected);
        }
    }

    #[test]
    fn segments_round_trip_partition_by_partition() {
        let (dimension, centroids, partitions) = sample();
        let bytes = encode_vector_segment(dimension, &centroids, None, &partitions);
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
        assert_partitions_read_back(&bytes, &head, &partitions);
    }

    #[test]
    fn quantized_segments_round_trip_with_their_codebooks() {
        let (_, centroids, _) = sample();
        let (books, partitions) = quantized();
        let bytes = encode_vector_segment(2, &centroids, Some(&books), &partitions);
        let size = bytes.len() as u64;
        let head = decode_vector_head("p", &bytes, size).unwrap().unwrap();
        assert_eq!(head.codebooks.as_ref(), Some(&books));
        assert_eq!((head.rows, head.partition_count()), (3, 3));
        assert_partitions_read_back(&bytes, &head, &partitions);
        // A code naming a codeword past the book (with a checksum that fits) is corrupt.
        let range = head.partitions[2].clone();
        let mut part = bytes[range.start as usize..range.end as usize].to_vec();
        part[8] = 3;
        let crc = crc32fast::hash(&part[..part.len() - 4]);
        let n = part.len();
        part[n - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            decode_vector_partition("p", &part, &head),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn damaged_or_truncated_segments_are_corrupt() {
        let (dimension, centroids, partitions) = sample();
        let (books, codes) = quantized();
        let is_corrupt = |r: Result<std::result::Result<VectorHead, usize>>| matches!(r, Err(Error::Corrupt { ref path, .. }) if path == "p");
        assert!(is_corrupt(decode_vector_head("p", b"NATALXX1\0\0\0\0", 3)));
        for bytes in [
            encode_vector_segment(dimension, &centroids, None, &partitions),
            encode_vector_segment(dimension, &centroids, Some(&books), &codes),
        ] {
            let size = bytes.len() as u64;
            let head_end = 16 + u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            assert!(is_corrupt(decode_vector_head("p", &bytes, size - 1)));
            assert!(is_corrupt(decode_vector_head("p", &bytes, size + 3)));
            for at in 12..head_end as usize {
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
            assert!(decode_vector_partition("p", &part, &head).is_err());
            assert!(decode_vector_partition("p", &part[..3], &head).is_err());
        }
    }
}
