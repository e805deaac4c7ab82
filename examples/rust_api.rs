//! natal's main job on a local directory: create a table, load rows, update, delete,
//! compact, checkpoint and time-travel — and watch every row keep its id.
//!
//! ```text
//! cargo run --release --example rust_api -- ./natal-demo
//! ```

use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use arrow::util::pretty::pretty_format_batches;
use futures::TryStreamExt;
use natal::RowId;
use natal::{CompactOptions, ScanRequest, Snapshot, Table, TableOptions};
use object_store::local::LocalFileSystem;

async fn show(title: &str, snapshot: &Snapshot) -> natal::Result<()> {
    let batches: Vec<RecordBatch> = snapshot
        .scan(ScanRequest {
            with_row_id: true,
            with_row_addr: true,
            ..Default::default()
        })
        .await?
        .try_collect()
        .await?;
    println!(
        "\n== {title} (version {}, {} rows)",
        snapshot.version(),
        snapshot.count_rows()
    );
    println!("{}", pretty_format_batches(&batches)?);
    Ok(())
}

fn batch(schema: &Arc<Schema>, ids: std::ops::Range<i64>) -> natal::Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(StringArray::from_iter_values(
                ids.map(|i| format!("item-{i}")),
            )),
        ],
    )?)
}

#[tokio::main]
async fn main() -> natal::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "./natal-demo".to_string());
    std::fs::create_dir_all(&dir)
        .map_err(|e| natal::Error::InvalidInput(format!("cannot create {dir}: {e}")))?;
    let store = Arc::new(LocalFileSystem::new_with_prefix(&dir)?);
    let name = format!("items_{}", chrono::Utc::now().timestamp_millis());
    let schema = Arc::new(Schema::new(vec![
        Field::new("sku", DataType::Int64, false),
        Field::new("label", DataType::Utf8, true),
    ]));
    let options = TableOptions {
        max_rows_per_fragment: 4,
        ..Default::default()
    };
    let table = Table::create(store, name.as_str().into(), &schema, options).await?;
    println!("created table '{name}' in {dir}");

    table.append(vec![batch(&schema, 0..6)?]).await?;
    show(
        "appended 6 rows: each _rowid is its birth address (fragment << 32 | offset)",
        &table.latest().await?,
    )
    .await?;

    let relabel = |b: &RecordBatch| -> natal::Result<RecordBatch> {
        let skus = b.column(0).as_primitive::<Int64Type>();
        // `b` holds the user columns, then `_rowid` and `_rowaddr`; the update returns the
        // user columns.
        Ok(RecordBatch::try_new(
            Arc::new(b.schema().project(&[0, 1])?),
            vec![
                b.column(0).clone(),
                Arc::new(StringArray::from_iter_values(
                    skus.values().iter().map(|s| format!("updated-{s}")),
                )),
            ],
        )?)
    };
    let sku_is = |wanted: i64| {
        move |b: &RecordBatch| -> natal::Result<arrow::array::BooleanArray> {
            Ok(b.column(0)
                .as_primitive::<Int64Type>()
                .iter()
                .map(|s| s.map(|s| s == wanted))
                .collect())
        }
    };
    table.update_where(sku_is(2), &relabel).await?;
    show(
        "updated sku 2: same _rowid, new _rowaddr",
        &table.latest().await?,
    )
    .await?;

    table.delete_where(sku_is(4)).await?;
    table.append(vec![batch(&schema, 6..8)?]).await?;
    let report = table
        .compact(CompactOptions {
            target_rows_per_fragment: Some(100),
            ..Default::default()
        })
        .await?;
    println!("\ncompaction: {report:?}");
    let latest = table.latest().await?;
    show(
        "deleted sku 4, appended 2 rows, compacted: every _rowid kept",
        &latest,
    )
    .await?;

    let view = latest.relocation_view().await?;
    println!(
        "relocation view: {} range entries, {} point entries, {} moved rows, {} bytes",
        view.range_entries().len(),
        view.point_count(),
        view.moved_rows(),
        view.heap_size()
    );
    let id = RowId::from_u64(2);
    println!(
        "resolve(_rowid {id}) -> {:?}",
        latest.resolve(id).await?.map(|a| a.to_string())
    );

    table.checkpoint().await?;
    show(
        "time travel: version 2, before any change",
        &table.at_version(2).await?,
    )
    .await?;
    Ok(())
}
