//! A failed statement leaves no trace: a write whose input fails part way deletes the data
//! files it wrote, a table created from rows that fail is not created, and a failed
//! `CREATE EXTERNAL TABLE` creates no directory.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use natal::{Error, Table, TableOptions};
use object_store::ObjectStore;

use crate::common::*;

async fn files(store: &Arc<dyn ObjectStore>) -> BTreeSet<String> {
    store
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap()
}

/// Ten full fragments' worth of rows, then an error from the input.
fn rows_then_failure(
) -> futures::stream::BoxStream<'static, natal::Result<arrow::array::RecordBatch>> {
    let rows: Vec<(i64, i64)> = (0..40).map(|k| (k, k)).collect();
    futures::stream::iter([
        Ok(batch(&rows)),
        Err(Error::InvalidInput("the input failed".into())),
    ])
    .boxed()
}

#[tokio::test]
async fn an_append_whose_input_fails_leaves_no_data_file() {
    let (table, store) = memory_table(4).await;
    table.append(vec![batch(&[(1, 1)])]).await.unwrap();
    let before = files(&store).await;
    let err = table.append_stream(rows_then_failure()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert_eq!(
        files(&store).await,
        before,
        "the ten fragments written were deleted"
    );
    assert_eq!(table.latest().await.unwrap().version(), 2);
}

#[tokio::test]
async fn a_table_created_from_failing_rows_is_not_created() {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let options = TableOptions {
        max_rows_per_fragment: 4,
        ..Default::default()
    };
    let failed = Table::create_from(
        store.clone(),
        "t".into(),
        &schema(),
        options.clone(),
        rows_then_failure(),
    )
    .await;
    assert!(matches!(failed, Err(Error::InvalidInput(_))), "{failed:?}");
    assert!(files(&store).await.is_empty(), "{:?}", files(&store).await);
    let reopened = Table::open(store.clone(), "t".into()).latest().await;
    assert!(matches!(reopened, Err(Error::TableNotFound { .. })));

    // The place is free: the same table is created there, in one version with its rows.
    let rows = futures::stream::iter([Ok(batch(&[(1, 10), (2, 20)]))]).boxed();
    let (table, committed) = Table::create_from(store, "t".into(), &schema(), options, rows)
        .await
        .unwrap();
    assert_eq!((committed.version, committed.figures.rows_added), (1, 2));
    assert_eq!(table.latest().await.unwrap().count_rows(), 2);
}

#[tokio::test]
async fn a_schema_natal_cannot_store_creates_nothing() {
    use arrow::datatypes::{DataType, Field, Schema};
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    // A struct holding a dictionary of structs: Parquet's Arrow writer has no encoding for
    // it, and natal stores such a dictionary in another shape only as a column of its own.
    let point = DataType::Struct(vec![Field::new("x", DataType::Int32, true)].into());
    let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(point));
    let span = DataType::Struct(vec![Field::new("d", dictionary, true)].into());
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("span", span, true),
    ]);
    let err = Table::create(store.clone(), "t".into(), &schema, TableOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("column span has type Struct(\"d\": Dictionary(Int32, Struct")),
        "{err}"
    );
    assert!(files(&store).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_create_external_table_creates_no_directory() {
    let (dir, ctx) = catalog_session();
    let location = dir.path().join("never");
    let sql = format!(
        "CREATE EXTERNAL TABLE never (k BIGINT, d INT DEFAULT 'five') STORED AS NATAL \
         LOCATION '{}'",
        location.display()
    );
    let err = ctx.sql(&sql).await.unwrap_err();
    assert!(err.to_string().contains("DEFAULT"), "{err}");
    assert!(!location.exists(), "{} was created", location.display());
    let missing = format!(
        "CREATE EXTERNAL TABLE missing STORED AS NATAL LOCATION '{}'",
        dir.path().join("missing").display()
    );
    assert!(ctx.sql(&missing).await.is_err());
    assert!(!dir.path().join("missing").exists());
}
