//! Codecs that carry natal's tables and scans between processes with DataFusion's plan
//! encoding (datafusion-proto), as Ballista sends plans from client to scheduler to
//! executors. [`NatalLogicalCodec`] sends a natal table as its URL and the version the
//! statement pinned; [`NatalPhysicalCodec`] sends natal's file scan as what its provider
//! was asked plus each partition's pieces, and a nearest-rows search (`NatalNearestExec`)
//! as the scan it stands in for plus the search. Every other node, table or function goes to the
//! codec each wraps (Ballista's own, which encodes its shuffle nodes), unchanged: natal's
//! payloads open with a byte no protobuf message starts with (`format::WIRE_MAGIC`).
//!
//! Natal's write plans are not sent: a statement commits one version from one session
//! (`sent.rs` refuses them on a scheduler; this codec refuses to send the nodes).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::catalog::{MemTable, TableProvider};
use datafusion::common::TableReference;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF, WindowUDF};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::logical_plan::{DefaultLogicalExtensionCodec, LogicalExtensionCodec};
use datafusion_proto::physical_plan::{
    DefaultPhysicalExtensionCodec, PhysicalExtensionCodec, PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf;
use prost::Message;

use super::sent::{blob_references_code, SentScan, SentTable};
use crate::datafusion::functions::change_feed::ChangesProvider;
use crate::datafusion::functions::placement::PlacementProvider;
use crate::datafusion::provider::NatalTableProvider;
use crate::datafusion::scan::file_source::{
    data_source_exec, NatalFileSource, NatalPieces, ScanSource,
};
use crate::datafusion::scan::nearest::NearestExec;
use crate::datafusion::scan::partitions::Piece;
use crate::datafusion::scan::rowid_list::RowIdIn;
use crate::format::{
    decode_row_ids, encode_row_ids, is_wire_payload, WirePiece, WireProvider, WireScan, WireTable,
};
use crate::table::Table;

/// The payload error as DataFusion reports it.
fn payload_error(error: crate::Error) -> DataFusionError {
    DataFusionError::from(error)
}

fn damaged(what: impl std::fmt::Display) -> DataFusionError {
    payload_error(crate::Error::PlanPayload(what.to_string()))
}

/// The URL of `table`'s root, for another process to open it by.
fn table_url(table: &Table) -> Result<String> {
    let Some(store_url) = &table.options().store_url else {
        return Err(DataFusionError::Plan(format!(
            "the natal table at {} cannot be sent to another process: its store's URL is \
             unknown (open it through natal::datafusion::register or open_table)",
            table.store().display()
        )));
    };
    // `file://` + `/` + `tmp/t`; `s3://bucket` (or `s3://bucket/`) + `/` + `warehouse/t`.
    let base = match store_url.strip_suffix('/') {
        Some(base) if !store_url.ends_with("://") => base,
        _ => store_url,
    };
    Ok(format!("{base}/{}", table.store().root()))
}

/// natal's functions that hold data of their own (`natal_rowid_in`'s ids), encoded; other
/// functions are `inner`'s.
fn encode_udf(
    node: &ScalarUDF,
    buf: &mut Vec<u8>,
    inner: impl FnOnce(&ScalarUDF, &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    match node.inner().downcast_ref::<RowIdIn>() {
        Some(row_ids) => {
            buf.extend_from_slice(&encode_row_ids(row_ids.ids()));
            Ok(())
        }
        None => inner(node, buf),
    }
}

/// [`encode_udf`]'s functions back; other functions are `inner`'s.
fn decode_udf(
    name: &str,
    buf: &[u8],
    inner: impl FnOnce(&str, &[u8]) -> Result<Arc<ScalarUDF>>,
) -> Result<Arc<ScalarUDF>> {
    if !(is_wire_payload(buf) && name.starts_with(RowIdIn::NAME)) {
        return inner(name, buf);
    }
    let function = RowIdIn::function(decode_row_ids(buf).map_err(payload_error)?);
    if function.name() != name {
        return Err(damaged(format!(
            "{name} does not hold the ids its name shows"
        )));
    }
    Ok(Arc::new(function))
}

/// `batches` as an Arrow IPC stream.
fn ipc_stream(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut writer = StreamWriter::try_new(Vec::new(), schema)?;
    for batch in batches {
        writer.write(batch)?;
    }
    Ok(writer.into_inner()?)
}

/// The batches of an Arrow IPC stream [`ipc_stream`] wrote.
fn rows_of(stream: &[u8]) -> Result<Vec<RecordBatch>> {
    let reader = StreamReader::try_new(std::io::Cursor::new(stream), None).map_err(damaged)?;
    reader.map(|batch| batch.map_err(damaged)).collect()
}

/// Encodes natal's tables (latest, `t@v7`, `t$rows`) and tables held as rows (natal's
/// metadata tables: memory tables), and hands everything else to `inner`.
#[derive(Debug)]
pub struct NatalLogicalCodec {
    inner: Arc<dyn LogicalExtensionCodec>,
}

impl NatalLogicalCodec {
    /// natal's tables, and `inner` for every other table, node and function (Ballista's
    /// `BallistaLogicalExtensionCodec` on a cluster).
    pub fn new(inner: Arc<dyn LogicalExtensionCodec>) -> Self {
        Self { inner }
    }
}

impl Default for NatalLogicalCodec {
    fn default() -> Self {
        Self::new(Arc::new(DefaultLogicalExtensionCodec {}))
    }
}

impl LogicalExtensionCodec for NatalLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        if !is_wire_payload(buf) {
            return self
                .inner
                .try_decode_table_provider(buf, table_ref, schema, ctx);
        }
        match WireProvider::decode(buf).map_err(payload_error)? {
            WireProvider::Table(wire) => Ok(Arc::new(SentTable::new(wire, schema))),
            WireProvider::Rows(partitions) => {
                let partitions = (partitions.iter())
                    .map(|stream| rows_of(stream))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Arc::new(MemTable::try_new(schema, partitions)?))
            }
            WireProvider::Placement { url, index, nodes } => Ok(Arc::new(PlacementProvider {
                table: super::sent::open(&url, &ctx.runtime_env())?,
                index,
                nodes,
            })),
            WireProvider::Changes { url, from, to } => {
                let table = super::sent::open(&url, &ctx.runtime_env())?;
                Ok(Arc::new(ChangesProvider::sent(table, (from, to), schema)))
            }
        }
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let wire = if let Some(natal) = node.downcast_ref::<NatalTableProvider>() {
            WireProvider::Table(WireTable {
                url: table_url(natal.table())?,
                // The version the statement resolved when it was planned: every task reads it.
                version: natal.pinned_snapshot().version(),
                system_columns: natal.view().system_columns,
            })
        } else if let Some(sent) = node.downcast_ref::<SentTable>() {
            WireProvider::Table(sent.wire().clone())
        } else if let Some(placement) = node.downcast_ref::<PlacementProvider>() {
            WireProvider::Placement {
                url: table_url(&placement.table)?,
                index: placement.index.clone(),
                nodes: placement.nodes,
            }
        } else if let Some(changes) = node.downcast_ref::<ChangesProvider>() {
            let (from, to) = changes.range();
            WireProvider::Changes {
                url: table_url(changes.table())?,
                from,
                to,
            }
        } else if let Some(memory) = node.downcast_ref::<MemTable>() {
            // natal's metadata tables and functions' answers: rows resolved at planning,
            // for the version the statement pinned.
            let partitions = (memory.batches.iter())
                .map(|partition| {
                    let batches = partition.try_read().map_err(|_| {
                        DataFusionError::Plan(format!(
                            "'{table_ref}' is being written to; it cannot be sent now"
                        ))
                    })?;
                    ipc_stream(&node.schema(), &batches)
                })
                .collect::<Result<Vec<_>>>()?;
            WireProvider::Rows(partitions)
        } else {
            return self
                .inner
                .try_encode_table_provider(table_ref, node, buf)
                .map_err(|e| {
                    DataFusionError::Plan(format!(
                        "'{table_ref}' cannot be sent to another process: {e}"
                    ))
                });
        };
        buf.extend_from_slice(&wire.encode());
        Ok(())
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn datafusion::datasource::file_format::FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn datafusion::datasource::file_format::FileFormatFactory>,
    ) -> Result<()> {
        self.inner.try_encode_file_format(buf, node)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        decode_udf(name, buf, |name, buf| self.inner.try_decode_udf(name, buf))
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_udf(node, buf, |node, buf| self.inner.try_encode_udf(node, buf))
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.inner.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

/// Encodes natal's file scan (`NatalScanExec::as_data_source`) and hands every other node
/// to `inner`.
#[derive(Debug)]
pub struct NatalPhysicalCodec {
    inner: Arc<dyn PhysicalExtensionCodec>,
}

impl NatalPhysicalCodec {
    /// natal's scans, and `inner` for every other node and function (Ballista's
    /// `BallistaPhysicalExtensionCodec` on a cluster).
    pub fn new(inner: Arc<dyn PhysicalExtensionCodec>) -> Self {
        Self { inner }
    }
}

impl Default for NatalPhysicalCodec {
    fn default() -> Self {
        Self::new(Arc::new(DefaultPhysicalExtensionCodec {}))
    }
}

/// The scan a natal file source reads, as the wire carries it (its pieces left out).
fn wire_of(source: &NatalFileSource, config: &FileScanConfig) -> Result<WireScan> {
    wire_of_scan(source.scan(), config.limit, config.file_schema().as_ref())
}

/// The scan `scan` plans, with at most `limit` rows of `schema`, as the wire carries it
/// (no pieces, no search).
fn wire_of_scan(scan: &ScanSource, limit: Option<usize>, schema: &Schema) -> Result<WireScan> {
    let logical = NatalLogicalCodec::default();
    let filters = |filters: &[datafusion::logical_expr::Expr]| {
        (filters.iter())
            .map(|f| Ok(serialize_expr(f, &logical)?.encode_to_vec()))
            .collect::<Result<Vec<_>>>()
    };
    let schema = protobuf::Schema::try_from(schema)?;
    let mut wire = match scan {
        ScanSource::Planned(plan) => WireScan {
            table: WireTable {
                url: table_url(&plan.origin.table)?,
                version: plan.snapshot.version(),
                system_columns: plan.origin.system_columns,
            },
            projection: plan.origin.projection.clone(),
            filters: filters(&plan.origin.filters)?,
            limit: None,
            blob_sizes: plan.blob_sizes.clone(),
            blob_references: blob_references_code(plan.blob_references),
            output_schema: Vec::new(),
            partitions: Vec::new(),
            nearest: None,
        },
        ScanSource::Sent(sent) => sent.wire.clone(),
    };
    wire.limit = limit;
    wire.output_schema = schema.encode_to_vec();
    Ok(wire)
}

/// Each file group's pieces, in group order.
fn pieces_of_groups(config: &FileScanConfig) -> Result<Vec<Vec<WirePiece>>> {
    (config.file_groups.iter())
        .map(|group| {
            let mut pieces = Vec::new();
            for file in group.files() {
                let Some(NatalPieces(of_file)) = file.extension::<NatalPieces>() else {
                    return Err(DataFusionError::Internal(format!(
                        "{} is not a natal partition (no pieces)",
                        file.object_meta.location
                    )));
                };
                pieces.extend(of_file.iter().map(|p| WirePiece {
                    fragment: u64::from(p.fragment),
                    rows: p.rows.clone(),
                }));
            }
            Ok(pieces)
        })
        .collect()
}

impl PhysicalExtensionCodec for NatalPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !is_wire_payload(buf) {
            return self.inner.try_decode(buf, inputs, ctx, proto_converter);
        }
        let mut wire = WireScan::decode(buf).map_err(payload_error)?;
        let logical = NatalLogicalCodec::default();
        let filters = (wire.filters.iter())
            .map(|bytes| {
                let node = protobuf::LogicalExprNode::decode(bytes.as_slice()).map_err(damaged)?;
                Ok(parse_expr(&node, ctx, &logical)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let schema = protobuf::Schema::decode(wire.output_schema.as_slice()).map_err(damaged)?;
        let output: SchemaRef = Arc::new(Schema::try_from(&schema)?);
        let groups = std::mem::take(&mut wire.partitions)
            .into_iter()
            .map(|pieces| {
                let pieces = (pieces.into_iter())
                    .map(|p| {
                        let fragment = u32::try_from(p.fragment)
                            .map_err(|_| damaged(format!("fragment id {}", p.fragment)))?;
                        Ok(Piece {
                            fragment,
                            rows: p.rows,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok((pieces, None))
            })
            .collect::<Result<Vec<_>>>()?;
        let limit = wire.limit;
        let nearest = wire.nearest.take();
        let sent = SentScan::new(
            wire,
            filters,
            output.clone(),
            ctx.runtime_env(),
            ctx.session_config().clone(),
        );
        if let Some(nearest) = nearest {
            return Ok(Arc::new(NearestExec::sent(Arc::new(sent), nearest, output)));
        }
        let scan = ScanSource::Sent(Arc::new(sent));
        Ok(data_source_exec(scan, output, groups, limit, None))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(exec) = node.downcast_ref::<DataSourceExec>() {
            if let Some((config, source)) = exec.downcast_to_file_source::<NatalFileSource>() {
                let mut wire = wire_of(source, config)?;
                wire.partitions = pieces_of_groups(config)?;
                buf.extend_from_slice(&wire.encode());
                return Ok(());
            }
        }
        if let Some(search) = node.downcast_ref::<NearestExec>() {
            let mut wire = wire_of_scan(search.scan(), None, search.schema().as_ref())?;
            wire.nearest = Some(search.wire());
            buf.extend_from_slice(&wire.encode());
            return Ok(());
        }
        if natal_write(node.as_ref()) {
            return Err(DataFusionError::Plan(format!(
                "{} cannot run in another process: natal commits each statement as one \
                 version from one session; run writes on a local natal session",
                node.name()
            )));
        }
        self.inner.try_encode(node, buf, proto_converter)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        decode_udf(name, buf, |name, buf| self.inner.try_decode_udf(name, buf))
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_udf(node, buf, |node, buf| self.inner.try_encode_udf(node, buf))
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.inner.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

/// True for natal's plan nodes that commit (and the scan in its local form, which only
/// its file-scan form may leave the process as).
fn natal_write(node: &dyn ExecutionPlan) -> bool {
    node.is::<crate::datafusion::write::dml::DmlExec>()
        || node.is::<crate::datafusion::write::merge::MergeExec>()
        || node.is::<crate::datafusion::scan::exec::NatalScanExec>()
        || (node.downcast_ref::<datafusion::datasource::sink::DataSinkExec>())
            .is_some_and(|sink| sink.sink().is::<crate::datafusion::write::dml::NatalSink>())
}
