//! What natal's plans carry between processes (a Ballista client, scheduler and executors):
//! a table pinned at a version, and a scan as its provider planned it. Not stored: a payload
//! lives as long as one query. It opens with [`WIRE_MAGIC`] and a wire version, so a
//! payload from another natal build, or none of natal's, is refused by name, never misread.

use std::ops::Range;

use prost::Message;

use super::proto;
use super::Metric;
use crate::error::{Error, Result};

/// The first bytes of every payload. Its zero first byte is a field tag no protobuf message
/// starts with, so a codec can tell natal's payloads from those it hands on.
pub const WIRE_MAGIC: [u8; 4] = [0x00, b'N', b'T', b'L'];

/// The wire version this natal writes and reads; any change to the messages bumps it.
pub const WIRE_VERSION: u8 = 2;

/// A table a query reads, pinned at the version the query was planned at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireTable {
    /// The table's root as a URL.
    pub url: String,
    /// The version every task reads.
    pub version: u64,
    /// `_rowid` and `_rowaddr` follow the user columns (the `t$rows` face).
    pub system_columns: bool,
}

/// One partition's share of a fragment: every row, or the offsets in `rows`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WirePiece {
    /// The fragment's id.
    pub fragment: u64,
    /// `None`: every row.
    pub rows: Option<Range<u32>>,
}

/// A scan as its table provider planned it, to be planned again over the same version and
/// read piece for piece.
#[derive(Debug, Clone, PartialEq)]
pub struct WireScan {
    /// The table and version.
    pub table: WireTable,
    /// Positions in the table's columns (system columns last), in output order.
    pub projection: Vec<usize>,
    /// The filters handed to the scan, each encoded by the caller (DataFusion's own
    /// expression encoding).
    pub filters: Vec<Vec<u8>>,
    /// At most this many rows.
    pub limit: Option<usize>,
    /// Blob columns read as their values' sizes.
    pub blob_sizes: Vec<String>,
    /// 0: blob values as bytes; 1: external values as references; 2: stored ones too.
    pub blob_references: u32,
    /// The output schema, encoded by the caller.
    pub output_schema: Vec<u8>,
    /// Each partition's pieces.
    pub partitions: Vec<Vec<WirePiece>>,
    /// A nearest-rows search standing in for the scan, if one does.
    pub nearest: Option<WireNearest>,
}

/// A search for the `k` rows of a scan nearest `query` in `column` through a vector index,
/// the scan's filters its pre-filter.
#[derive(Debug, Clone, PartialEq)]
pub struct WireNearest {
    /// The index searched (its name, for `EXPLAIN`).
    pub index: String,
    /// The vector column.
    pub column: String,
    /// The query vector.
    pub query: Vec<f32>,
    /// Rows answered, at most.
    pub k: usize,
    /// The distance ranked by.
    pub metric: Metric,
    /// Partitions probed in each segment.
    pub nprobes: usize,
    /// Candidates re-ranked by their exact vectors, as a multiple of `k`.
    pub refine_factor: Option<usize>,
}

/// A table a logical plan names: natal's, by place and version, or rows the sender holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireProvider {
    /// A natal table at a version.
    Table(WireTable),
    /// Rows (a metadata table's, a function's answer): each partition an Arrow IPC stream,
    /// encoded by the caller.
    Rows(Vec<Vec<u8>>),
    /// `natal_segment_placement('t', index, nodes)` of the table at a URL.
    Placement {
        /// The table's root as a URL.
        url: String,
        /// The index.
        index: String,
        /// Among how many nodes.
        nodes: u64,
    },
    /// `natal_changes('t', from, to)` of the table at a URL, its versions pinned.
    Changes {
        /// The table's root as a URL.
        url: String,
        /// The version compared against.
        from: u64,
        /// The version compared.
        to: u64,
    },
}

impl WireProvider {
    /// The payload: magic, wire version, message.
    pub fn encode(&self) -> Vec<u8> {
        let kind = match self {
            WireProvider::Table(table) => proto::wire_provider::Kind::Table(table_to_proto(table)),
            WireProvider::Rows(partitions) => proto::wire_provider::Kind::Rows(proto::WireRows {
                partitions: partitions.clone(),
            }),
            WireProvider::Placement { url, index, nodes } => {
                proto::wire_provider::Kind::Placement(proto::WirePlacement {
                    url: url.clone(),
                    index: index.clone(),
                    nodes: *nodes,
                })
            }
            WireProvider::Changes { url, from, to } => {
                proto::wire_provider::Kind::Changes(proto::WireChanges {
                    url: url.clone(),
                    from: *from,
                    to: *to,
                })
            }
        };
        sealed(&proto::WireProvider { kind: Some(kind) })
    }

    /// Reads a payload [`Self::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        match unsealed::<proto::WireProvider>(bytes)?.kind {
            Some(proto::wire_provider::Kind::Table(table)) => {
                Ok(WireProvider::Table(table_from_proto(table)?))
            }
            Some(proto::wire_provider::Kind::Rows(rows)) => Ok(WireProvider::Rows(rows.partitions)),
            Some(proto::wire_provider::Kind::Placement(p)) => Ok(WireProvider::Placement {
                url: p.url,
                index: p.index,
                nodes: p.nodes,
            }),
            Some(proto::wire_provider::Kind::Changes(c)) => Ok(WireProvider::Changes {
                url: c.url,
                from: c.from,
                to: c.to,
            }),
            None => Err(bad("a table of no known kind")),
        }
    }
}

impl WireScan {
    /// The payload: magic, wire version, message.
    pub fn encode(&self) -> Vec<u8> {
        let message = proto::WireScan {
            table: Some(table_to_proto(&self.table)),
            projection: self.projection.iter().map(|&p| p as u32).collect(),
            filters: self.filters.clone(),
            limit: self.limit.map(|l| l as u64),
            blob_sizes: self.blob_sizes.clone(),
            blob_references: self.blob_references,
            output_schema: self.output_schema.clone(),
            partitions: (self.partitions.iter())
                .map(|pieces| proto::WirePartition {
                    pieces: pieces.iter().map(piece_to_proto).collect(),
                })
                .collect(),
            nearest: self.nearest.as_ref().map(|n| proto::WireNearest {
                index: n.index.clone(),
                column: n.column.clone(),
                query: n.query.clone(),
                k: n.k as u64,
                metric: n.metric.name().to_string(),
                nprobes: n.nprobes as u64,
                refine_factor: n.refine_factor.map(|r| r as u64),
            }),
        };
        sealed(&message)
    }

    /// Reads a payload [`Self::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let message = unsealed::<proto::WireScan>(bytes)?;
        let table = message
            .table
            .ok_or_else(|| bad("a scan without its table"))?;
        let partitions = (message.partitions.into_iter())
            .map(|p| p.pieces.into_iter().map(piece_from_proto).collect())
            .collect::<Result<_>>()?;
        Ok(Self {
            table: table_from_proto(table)?,
            projection: message.projection.iter().map(|&p| p as usize).collect(),
            filters: message.filters,
            limit: (message.limit)
                .map(|l| usize::try_from(l).map_err(|_| bad("a limit beyond this machine")))
                .transpose()?,
            blob_sizes: message.blob_sizes,
            blob_references: message.blob_references,
            output_schema: message.output_schema,
            partitions,
            nearest: message.nearest.map(nearest_from_proto).transpose()?,
        })
    }
}

fn nearest_from_proto(nearest: proto::WireNearest) -> Result<WireNearest> {
    let count = |n: u64, what: &str| {
        usize::try_from(n).map_err(|_| Error::PlanPayload(format!("{what} beyond this machine")))
    };
    let metric = Metric::parse(&nearest.metric)
        .ok_or_else(|| Error::PlanPayload(format!("unknown metric {:?}", nearest.metric)))?;
    Ok(WireNearest {
        index: nearest.index,
        column: nearest.column,
        query: nearest.query,
        k: count(nearest.k, "a k")?,
        metric,
        nprobes: count(nearest.nprobes, "nprobes")?,
        refine_factor: (nearest.refine_factor)
            .map(|r| count(r, "a refine factor"))
            .transpose()?,
    })
}

/// The payload of a set of row ids (`natal_rowid_in`'s).
pub fn encode_row_ids(ids: &[u64]) -> Vec<u8> {
    sealed(&proto::WireRowIds { ids: ids.to_vec() })
}

/// Reads a payload [`encode_row_ids`] wrote.
pub fn decode_row_ids(bytes: &[u8]) -> Result<Vec<u64>> {
    Ok(unsealed::<proto::WireRowIds>(bytes)?.ids)
}

/// True when `bytes` open with [`WIRE_MAGIC`]: natal's, whatever its wire version.
pub fn is_wire_payload(bytes: &[u8]) -> bool {
    bytes.starts_with(&WIRE_MAGIC)
}

fn bad(reason: &str) -> Error {
    Error::PlanPayload(reason.to_string())
}

fn sealed(message: &impl Message) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(WIRE_MAGIC.len() + 1 + message.encoded_len());
    bytes.extend_from_slice(&WIRE_MAGIC);
    bytes.push(WIRE_VERSION);
    message.encode(&mut bytes).expect("a Vec grows to fit");
    bytes
}

fn unsealed<M: Message + Default>(bytes: &[u8]) -> Result<M> {
    let Some(rest) = bytes.strip_prefix(&WIRE_MAGIC) else {
        return Err(bad("not a natal payload"));
    };
    match rest.split_first() {
        Some((&WIRE_VERSION, message)) => {
            M::decode(message).map_err(|e| Error::PlanPayload(format!("damaged: {e}")))
        }
        Some((other, _)) => Err(Error::PlanPayload(format!(
            "wire version {other} is another natal's (this one reads {WIRE_VERSION}): run \
             the same natal build on the client, the scheduler and every executor"
        ))),
        None => Err(bad("truncated before its wire version")),
    }
}

fn table_to_proto(table: &WireTable) -> proto::WireTable {
    proto::WireTable {
        url: table.url.clone(),
        version: table.version,
        system_columns: table.system_columns,
    }
}

fn table_from_proto(table: proto::WireTable) -> Result<WireTable> {
    if table.url.is_empty() {
        return Err(bad("a table without its URL"));
    }
    Ok(WireTable {
        url: table.url,
        version: table.version,
        system_columns: table.system_columns,
    })
}

fn piece_to_proto(piece: &WirePiece) -> proto::WirePiece {
    proto::WirePiece {
        fragment: piece.fragment,
        start: piece.rows.as_ref().map(|r| r.start),
        end: piece.rows.as_ref().map(|r| r.end),
    }
}

fn piece_from_proto(piece: proto::WirePiece) -> Result<WirePiece> {
    let rows = match (piece.start, piece.end) {
        (None, None) => None,
        (Some(start), Some(end)) if start < end => Some(start..end),
        _ => return Err(bad("a piece whose rows are not a range")),
    };
    Ok(WirePiece {
        fragment: piece.fragment,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan() -> WireScan {
        WireScan {
            table: WireTable {
                url: "s3://bucket/warehouse/t".into(),
                version: 7,
                system_columns: true,
            },
            projection: vec![2, 0, 4],
            filters: vec![vec![1, 2, 3], vec![]],
            limit: Some(10),
            blob_sizes: vec!["image".into()],
            blob_references: 2,
            output_schema: vec![9, 9],
            partitions: vec![
                vec![WirePiece {
                    fragment: 0,
                    rows: None,
                }],
                vec![],
                vec![WirePiece {
                    fragment: 3,
                    rows: Some(5..9),
                }],
            ],
            nearest: None,
        }
    }

    #[test]
    fn payloads_round_trip() {
        let scan = scan();
        assert_eq!(WireScan::decode(&scan.encode()).unwrap(), scan);
        let search = WireScan {
            nearest: Some(WireNearest {
                index: "e_idx".into(),
                column: "e".into(),
                query: vec![0.5, -1.0, f32::MIN_POSITIVE],
                k: 10,
                metric: Metric::Cosine,
                nprobes: 32,
                refine_factor: Some(4),
            }),
            ..scan.clone()
        };
        assert_eq!(WireScan::decode(&search.encode()).unwrap(), search);
        for provider in [
            WireProvider::Table(scan.table.clone()),
            WireProvider::Rows(vec![vec![1, 2], vec![]]),
            WireProvider::Placement {
                url: "file:///w/t".into(),
                index: "by_city".into(),
                nodes: 3,
            },
            WireProvider::Changes {
                url: "s3://b/t".into(),
                from: 3,
                to: 9,
            },
        ] {
            assert_eq!(WireProvider::decode(&provider.encode()).unwrap(), provider);
        }
        assert!(is_wire_payload(&scan.encode()));
        let ids = [1, 5, u64::MAX];
        assert_eq!(decode_row_ids(&encode_row_ids(&ids)).unwrap(), ids);
    }

    #[test]
    fn foreign_damaged_and_other_version_payloads_are_refused_by_name() {
        let mut other = scan().encode();
        other[WIRE_MAGIC.len()] = WIRE_VERSION + 1;
        let message = WireScan::decode(&other).unwrap_err().to_string();
        assert!(message.contains("another natal"), "{message}");
        let encoded = scan().encode();
        for cut in [0, 3, 5, encoded.len() / 2, encoded.len() - 1] {
            assert!(matches!(
                WireScan::decode(&encoded[..cut]),
                Err(Error::PlanPayload(_))
            ));
        }
        assert!(matches!(
            WireProvider::decode(b"\x0a\x03abc"),
            Err(Error::PlanPayload(_))
        ));
        let unknown_metric = proto::WireScan {
            table: Some(table_to_proto(&scan().table)),
            nearest: Some(proto::WireNearest {
                metric: "manhattan".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let message = WireScan::decode(&sealed(&unknown_metric))
            .unwrap_err()
            .to_string();
        assert!(message.contains("unknown metric"), "{message}");
    }
}
