//! TPC-H on natal beside DataFusion's own Parquet: what the `tpch` bench times and the
//! integration test checks. Data comes from the `tpchgen` generator in-process, streamed
//! through a DataFusion table of one partition per generator part, and is loaded the way a
//! user would load it: `INSERT INTO <t> SELECT` into natal, `COPY (SELECT ...) TO
//! '<dir>/<t>/' STORED AS PARQUET` with DataFusion's default writer options for Parquet.

#![allow(dead_code)] // the test uses a part of what the bench does

pub mod queries;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::catalog::{MemorySchemaProvider, TableProvider};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow,
    SupplierArrow,
};

/// The eight TPC-H tables, smallest first.
pub const TABLES: [&str; 8] = [
    "region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem",
];

/// The schema the generator's rows of `table` are in, before any row is made.
pub fn generated_schema(table: &str) -> SchemaRef {
    match table {
        "region" => RegionArrow::schema_ref(),
        "nation" => NationArrow::schema_ref(),
        "supplier" => SupplierArrow::schema_ref(),
        "customer" => CustomerArrow::schema_ref(),
        "part" => PartArrow::schema_ref(),
        "partsupp" => PartSuppArrow::schema_ref(),
        "orders" => OrderArrow::schema_ref(),
        _ => LineItemArrow::schema_ref(),
    }
}

type Batches =
    Box<dyn Iterator<Item = std::result::Result<RecordBatch, arrow::error::ArrowError>> + Send>;

/// The generator's rows of `table` at scale factor `sf`, part `part` (from 1) of `parts`.
fn generator(table: &str, sf: f64, part: i32, parts: i32) -> Batches {
    match table {
        "region" => Box::new(RegionArrow::new(RegionGenerator::new(sf, part, parts))),
        "nation" => Box::new(NationArrow::new(NationGenerator::new(sf, part, parts))),
        "supplier" => Box::new(SupplierArrow::new(SupplierGenerator::new(sf, part, parts))),
        "customer" => Box::new(CustomerArrow::new(CustomerGenerator::new(sf, part, parts))),
        "part" => Box::new(PartArrow::new(PartGenerator::new(sf, part, parts))),
        "partsupp" => Box::new(PartSuppArrow::new(PartSuppGenerator::new(sf, part, parts))),
        "orders" => Box::new(OrderArrow::new(OrderGenerator::new(sf, part, parts))),
        _ => Box::new(LineItemArrow::new(LineItemGenerator::new(sf, part, parts))),
    }
}

/// One part of a generated table, made anew each time it is read.
#[derive(Debug)]
struct GeneratedPart {
    table: String,
    schema: SchemaRef,
    sf: f64,
    part: i32,
    parts: i32,
}

impl PartitionStream for GeneratedPart {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let rows = generator(&self.table, self.sf, self.part, self.parts)
            .map(|batch| batch.map_err(|e| DataFusionError::ArrowError(Box::new(e), None)));
        Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            futures::stream::iter(rows),
        ))
    }
}

/// `table` at scale factor `sf` as a DataFusion table of `parts` partitions, generated as it
/// is read (the nation and region tables are one part: the generator makes them whole).
pub fn generated_table(table: &str, sf: f64, parts: usize) -> Result<Arc<dyn TableProvider>> {
    let schema = generated_schema(table);
    let parts = if matches!(table, "nation" | "region") {
        1
    } else {
        parts.max(1) as i32
    };
    let streams: Vec<Arc<dyn PartitionStream>> = (1..=parts)
        .map(|part| {
            Arc::new(GeneratedPart {
                table: table.to_string(),
                schema: schema.clone(),
                sf,
                part,
                parts,
            }) as Arc<dyn PartitionStream>
        })
        .collect();
    Ok(Arc::new(StreamingTable::try_new(schema, streams)?))
}

/// A session with the generated tables in schema `gen` of the default catalog.
pub fn generator_session(sf: f64) -> Result<SessionContext> {
    let ctx = SessionContext::new();
    let parts = ctx.state().config().target_partitions();
    let schema = Arc::new(MemorySchemaProvider::new());
    for table in TABLES {
        datafusion::catalog::SchemaProvider::register_table(
            schema.as_ref(),
            table.to_string(),
            generated_table(table, sf, parts)?,
        )?;
    }
    let catalog = ctx
        .catalog("datafusion")
        .ok_or_else(|| DataFusionError::Internal("no default catalog".into()))?;
    catalog.register_schema("gen", schema)?;
    Ok(ctx)
}

/// Where one run keeps its two copies of the data.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// natal's root: one sub-directory per table.
    pub natal: PathBuf,
    /// DataFusion's Parquet: one directory of files per table.
    pub parquet: PathBuf,
}

impl Dirs {
    pub fn under(root: &Path) -> Self {
        Self {
            natal: root.join("natal"),
            parquet: root.join("parquet"),
        }
    }
}

/// Loads every table into natal (`INSERT INTO`) and writes it as Parquet (`COPY`), both
/// from the generator at `sf`.
pub async fn load(dirs: &Dirs, sf: f64) -> Result<()> {
    std::fs::create_dir_all(&dirs.natal)?;
    std::fs::create_dir_all(&dirs.parquet)?;
    let ctx = generator_session(sf)?;
    natal::datafusion::register(&ctx, &dirs.natal.to_string_lossy())?;
    for table in TABLES {
        // CREATE TABLE AS collects its rows in memory first (DataFusion hands the catalog a
        // memory table); a load of any size creates the table empty and streams into it.
        for sql in [
            format!("CREATE TABLE {table} AS SELECT * FROM gen.{table} WHERE false"),
            format!("INSERT INTO {table} SELECT * FROM gen.{table}"),
        ] {
            ctx.sql(&sql).await?.collect().await?;
        }
        copy_to_parquet(&ctx, &format!("gen.{table}"), &parquet_dir(dirs, table)).await?;
    }
    Ok(())
}

/// Each table's TPC-H primary key.
pub const KEYS: [(&str, &[&str]); 8] = [
    ("lineitem", &["l_orderkey", "l_linenumber"]),
    ("orders", &["o_orderkey"]),
    ("customer", &["c_custkey"]),
    ("part", &["p_partkey"]),
    ("partsupp", &["ps_partkey", "ps_suppkey"]),
    ("supplier", &["s_suppkey"]),
    ("nation", &["n_nationkey"]),
    ("region", &["r_regionkey"]),
];

/// Copies of the natal tables under `keyed` that declare their primary keys ([`KEYS`]),
/// rows streamed from the loaded ones.
pub async fn load_keyed(dirs: &Dirs, keyed: &Path) -> Result<()> {
    std::fs::create_dir_all(keyed)?;
    let ctx = natal_session(dirs)?;
    for (table, key) in KEYS {
        let frame = ctx.sql(&format!("SELECT * FROM {table}")).await?;
        let schema = frame.schema().as_arrow().clone();
        let rows = frame.execute_stream().await?;
        let rows = rows
            .map(|batch| batch.map_err(|e| natal::Error::External(Box::new(e))))
            .boxed();
        let declared = natal::Declarations {
            constraints: vec![natal::TableConstraint::PrimaryKey(
                key.iter().map(|c| c.to_string()).collect(),
            )],
            ..Default::default()
        };
        let location = keyed.join(table).to_string_lossy().to_string();
        let (store, path) = natal::datafusion::resolve_location(&ctx.runtime_env(), &location)?;
        let options = natal::TableOptions::default();
        natal::Table::create_declared(store, path, (&schema, &declared), options, rows).await?;
    }
    Ok(())
}

/// `COPY (SELECT * FROM <source>) TO '<dir>/' STORED AS PARQUET`: DataFusion's writer with
/// its defaults.
pub async fn copy_to_parquet(ctx: &SessionContext, source: &str, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    ctx.sql(&format!(
        "COPY (SELECT * FROM {source}) TO '{}/' STORED AS PARQUET",
        dir.to_string_lossy()
    ))
    .await?
    .collect()
    .await?;
    Ok(())
}

pub fn parquet_dir(dirs: &Dirs, table: &str) -> PathBuf {
    dirs.parquet.join(table)
}

/// `name` from the environment as a number, or `default`.
pub fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of `times`.
pub fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// A fresh session over the natal tables, its settings DataFusion's defaults overridden by
/// `DATAFUSION_*` variables (as datafusion-cli reads them: to measure a setting).
pub fn natal_session(dirs: &Dirs) -> Result<SessionContext> {
    let ctx = SessionContext::new_with_config(SessionConfig::from_env()?);
    natal::datafusion::register(&ctx, &dirs.natal.to_string_lossy())?;
    Ok(ctx)
}

/// A fresh session over the Parquet files, as DataFusion registers Parquet tables.
pub async fn parquet_session(dirs: &Dirs) -> Result<SessionContext> {
    parquet_session_with(dirs, false).await
}

/// [`parquet_session`] with `datafusion.execution.parquet.pushdown_filters` set to `pushdown`
/// (filters evaluated inside the Parquet reader, the other columns decoded only for the rows
/// that pass).
pub async fn parquet_session_with(dirs: &Dirs, pushdown: bool) -> Result<SessionContext> {
    let config =
        SessionConfig::new().set_bool("datafusion.execution.parquet.pushdown_filters", pushdown);
    let ctx = SessionContext::new_with_config(config);
    for table in TABLES {
        let dir = parquet_dir(dirs, table);
        ctx.register_parquet(
            table,
            format!("{}/", dir.to_string_lossy()),
            ParquetReadOptions::default(),
        )
        .await?;
    }
    Ok(ctx)
}

/// Query `q` (1-based) with its parameters for scale factor `sf`.
pub fn query(q: usize, sf: f64) -> String {
    queries::QUERIES[q - 1].replace("FRACTION", &format!("{}", 0.0001 / sf))
}

/// Runs query `q` (1-based) at scale factor `sf` and returns its rows.
pub async fn run(ctx: &SessionContext, q: usize, sf: f64) -> Result<Vec<RecordBatch>> {
    ctx.sql(&query(q, sf)).await?.collect().await
}

/// An answer as text lines, one per row, in a canonical order: ties under a query's ORDER BY
/// may come out in either order, and the rows, not their order among equals, are the answer.
pub fn canonical(batches: &[RecordBatch]) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for batch in batches {
        let formatters: Vec<_> = batch
            .columns()
            .iter()
            .map(|c| {
                arrow::util::display::ArrayFormatter::try_new(
                    c.as_ref(),
                    &arrow::util::display::FormatOptions::default(),
                )
            })
            .collect::<std::result::Result<_, _>>()?;
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            lines.push(cells.join("|"));
        }
    }
    lines.sort();
    Ok(lines)
}

/// Churn that keeps the logical content: 10% of lineitem's rows updated to their own values,
/// 1% of orders and of lineitem deleted and inserted again, then every table compacted.
pub async fn churn(dirs: &Dirs) -> Result<()> {
    let ctx = natal_session(dirs)?;
    let keep = Arc::new(MemorySchemaProvider::new());
    ctx.catalog("datafusion")
        .ok_or_else(|| DataFusionError::Internal("no default catalog".into()))?
        .register_schema("keep", keep.clone())?;
    ctx.sql("UPDATE lineitem SET l_comment = l_comment WHERE (l_orderkey + l_linenumber) % 10 = 3")
        .await?
        .collect()
        .await?;
    for (table, key) in [("orders", "o_orderkey"), ("lineitem", "l_orderkey")] {
        let kept = ctx
            .sql(&format!("SELECT * FROM {table} WHERE {key} % 100 = 7"))
            .await?;
        let schema: SchemaRef = Arc::new(kept.schema().as_arrow().clone());
        let rows = kept.collect().await?;
        let memory = datafusion::catalog::MemTable::try_new(schema, vec![rows])?;
        datafusion::catalog::SchemaProvider::register_table(
            keep.as_ref(),
            table.to_string(),
            Arc::new(memory),
        )?;
        ctx.sql(&format!("DELETE FROM {table} WHERE {key} % 100 = 7"))
            .await?
            .collect()
            .await?;
        ctx.sql(&format!("INSERT INTO {table} SELECT * FROM keep.{table}"))
            .await?
            .collect()
            .await?;
    }
    for table in TABLES {
        ctx.sql(&format!("SELECT * FROM natal_compact('{table}')"))
            .await?
            .collect()
            .await?;
    }
    Ok(())
}

/// Bytes of every file under `dir`.
pub fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                bytes_under(&path)
            } else {
                e.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}
