//! Inline blob values are read only when a row needs them: sizes, `t$blobs` and a filter's
//! rejected rows take the descriptors' small leaves, never the inline bytes; the rows a filter
//! or limit keeps get their bytes (and right ones) from the data file's pages that hold them.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::array::{Array, AsArray, BinaryArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, UInt64Type};
use futures::TryStreamExt;
use natal::{BlobColumn, BlobKind, ScanMetrics, ScanRequest, Snapshot, Table, TableOptions};
use object_store::memory::InMemory;

const ROWS: i64 = 600;
const VALUE_BYTES: usize = 2048;

/// Every value inline (below 64 KiB), of `VALUE_BYTES` bytes; every 7th NULL.
fn schema() -> SchemaRef {
    let blob = BlobColumn::default();
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("img", DataType::Binary, true).with_metadata(blob.to_metadata()),
    ]))
}

/// Bytes that do not compress: pages are what they hold.
fn value_of(key: i64) -> Option<Vec<u8>> {
    let mut state = (key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    };
    (key % 7 != 3).then(|| (0..VALUE_BYTES).map(|_| next()).collect())
}

async fn inline_table() -> Table {
    let keys = 0..ROWS;
    let values: Vec<Option<Vec<u8>>> = keys.clone().map(value_of).collect();
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(keys)),
            Arc::new(BinaryArray::from_iter(values.iter().map(|v| v.as_deref()))),
        ],
    )
    .unwrap();
    let store = Arc::new(InMemory::new());
    let table = Table::create(store, "t".into(), &schema(), TableOptions::default())
        .await
        .unwrap();
    table.append(vec![batch]).await.unwrap();
    table
}

/// The rows `request` reads and the bytes it read.
async fn measured(snapshot: &Snapshot, request: ScanRequest) -> (Vec<RecordBatch>, u64) {
    let metrics = Arc::new(ScanMetrics::default());
    let request = ScanRequest {
        metrics: Some(metrics.clone()),
        ..request
    };
    let rows = snapshot
        .scan(request)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    (rows, metrics.bytes_read.load(Ordering::Relaxed))
}

const PAYLOAD: u64 = ROWS as u64 * VALUE_BYTES as u64;

#[tokio::test]
async fn a_filter_reads_inline_bytes_of_the_rows_it_keeps_only() {
    let snapshot = inline_table().await.latest().await.unwrap();
    let whole = ScanRequest::new().columns(["key", "img"]);
    let (_, all) = measured(&snapshot, whole).await;
    assert!(all > PAYLOAD / 2, "a whole read reads the values: {all}");
    // One row in 100, with its id and address: the values must be the keys' own.
    let kept = ScanRequest::new()
        .columns(["key", "img"])
        .with_row_id()
        .with_row_addr()
        .filter(crate::common::KeyModulo::new(100, 3));
    let (rows, read) = measured(&snapshot, kept).await;
    assert!(read < PAYLOAD / 10, "read {read} of {PAYLOAD} for 6 rows");
    let mut keys = Vec::new();
    for batch in &rows {
        assert_eq!(batch.num_columns(), 4);
        assert_eq!(batch.schema().field(1).data_type(), &DataType::Binary);
        let values = batch.column(1).as_binary::<i32>();
        for row in 0..batch.num_rows() {
            let key = batch.column(0).as_primitive::<Int64Type>().value(row);
            let value = (!values.is_null(row)).then(|| values.value(row).to_vec());
            assert_eq!(value, value_of(key), "key {key}");
            let addr = batch.column(3).as_primitive::<UInt64Type>().value(row);
            assert_eq!(addr & 0xffff_ffff, key as u64, "rows keep their addresses");
            keys.push(key);
        }
    }
    assert_eq!(keys, [3, 103, 203, 303, 403, 503]);
    // Only the blob column, limited: the first rows' bytes, nothing of the rest.
    let limited = ScanRequest {
        limit: Some(4),
        ..ScanRequest::new().columns(["img"])
    };
    let (rows, read) = measured(&snapshot, limited).await;
    assert!(read < PAYLOAD / 10, "read {read} of {PAYLOAD} for 4 rows");
    let values: Vec<Option<Vec<u8>>> = rows
        .iter()
        .flat_map(|b| {
            let values = b.column(0).as_binary::<i32>().clone();
            (0..values.len()).map(move |i| (!values.is_null(i)).then(|| values.value(i).to_vec()))
        })
        .collect();
    assert_eq!(values, (0..4).map(value_of).collect::<Vec<_>>());
}

#[tokio::test]
async fn sizes_and_places_read_no_inline_bytes() {
    let table = inline_table().await;
    let snapshot = table.latest().await.unwrap();
    let sizes = ScanRequest {
        blob_sizes: vec!["img".into()],
        ..ScanRequest::new().columns(["key", "img"])
    };
    let (rows, read) = measured(&snapshot, sizes).await;
    assert!(read < PAYLOAD / 10, "read {read} of {PAYLOAD} for sizes");
    for batch in &rows {
        let sizes = batch.column(1).as_primitive::<Int64Type>();
        for row in 0..batch.num_rows() {
            let key = batch.column(0).as_primitive::<Int64Type>().value(row);
            let size = (!sizes.is_null(row)).then(|| sizes.value(row) as usize);
            assert_eq!(size, value_of(key).map(|v| v.len()), "key {key}");
        }
    }
    let places = snapshot.blob_places("img").await.unwrap();
    assert_eq!(places.len(), ROWS as usize);
    for (at, (_, place)) in places.iter().enumerate() {
        let value = value_of(at as i64);
        assert_eq!(place.kind, value.as_ref().map(|_| BlobKind::Inline));
        assert_eq!(place.size, value.map(|v| v.len() as u64));
    }
    // Descriptors asked for lean come without the inline field; whole ones hold it.
    for (lean, fields) in [(true, 5), (false, 6)] {
        let request = ScanRequest {
            blob_descriptors: true,
            lean_blob_descriptors: lean,
            ..ScanRequest::new().columns(["img"])
        };
        let (rows, _) = measured(&snapshot, request).await;
        let DataType::Struct(described) = rows[0].schema().field(0).data_type().clone() else {
            panic!("descriptors are structs");
        };
        assert_eq!(described.len(), fields);
    }
}
