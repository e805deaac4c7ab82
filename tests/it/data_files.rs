//! What a data file holds and how the scan hands it over: per-column statistics from the
//! writer's footer, pages of wide values, and view columns in one buffer per batch.

use std::sync::Arc;

use arrow::array::{
    Array, AsArray, BinaryViewArray, Float64Array, Int32Array, RecordBatch, StringArray,
    StringViewArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use natal::internals::format::{StatValue, MAX_STAT_BYTES};
use natal::{Table, TableOptions};
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::common::first_file_footer;

/// Parquet's reader gives a view column one buffer per page decoded; natal's scan hands each
/// batch its long values in one buffer, or operators that concatenate batches (a hash join's
/// build side) drag every page's buffer into each batch they emit (TPC-H q18 at SF 10).
#[tokio::test]
async fn scanned_view_columns_hold_their_values_in_one_buffer() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8View, false),
        Field::new("b", DataType::BinaryView, true),
    ]));
    let rows = 20_000;
    let names: Vec<String> = (0..rows).map(|i| format!("Customer#{i:012}")).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringViewArray::from_iter_values(names.iter())),
            Arc::new(BinaryViewArray::from_iter(
                names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (i % 3 != 0).then_some(n.as_bytes())),
            )),
        ],
    )
    .unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let table = Table::create(store, "v".into(), &schema, TableOptions::default())
        .await
        .unwrap();

    table.append(vec![batch]).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let batches: Vec<RecordBatch> = snapshot
        .scan(natal::ScanRequest::new())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut row = 0;
    for batch in &batches {
        // Several pages per batch, or the test shows nothing.
        assert!(batch.num_rows() > 2 * natal::internals::io::PAGE_ROWS);
        let strings = batch.column(0).as_string_view();
        let binaries = batch.column(1).as_binary_view();
        assert_eq!(strings.data_buffers().len(), 1);
        assert_eq!(binaries.data_buffers().len(), 1);
        for i in 0..batch.num_rows() {
            seen.push(strings.value(i).to_string());
            let expected = (row % 3 != 0).then_some(strings.value(i).as_bytes());
            assert_eq!(binaries.is_valid(i).then(|| binaries.value(i)), expected);
            row += 1;
        }
    }
    assert_eq!(seen, names);
}

#[tokio::test]
async fn data_files_carry_footer_statistics() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int32, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let long_min = "a".repeat(100);
    let long_max = format!("z{}", "y".repeat(99));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int32Array::from(vec![Some(5), None, Some(-3)])),
            Arc::new(Float64Array::from(vec![
                Some(1.5),
                Some(f64::NAN),
                Some(-2.0),
            ])),
            Arc::new(StringArray::from(vec![
                Some(long_min.as_str()),
                Some(long_max.as_str()),
                None,
            ])),
        ],
    )
    .unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let table = Table::create(store, "s".into(), &schema, TableOptions::default())
        .await
        .unwrap();
    table.append(vec![batch]).await.unwrap();
    let snapshot = table.latest().await.unwrap();
    let stats = &snapshot.manifest().fragments[0].files[0].column_stats;
    assert_eq!(stats[0].min, Some(StatValue::Int(-3)));
    assert_eq!(stats[0].max, Some(StatValue::Int(5)));
    assert_eq!(stats[0].null_count, Some(1));
    assert_eq!(stats[0].nan_count, None);
    assert_eq!(stats[1].nan_count, Some(1));
    assert_eq!(stats[1].min, Some(StatValue::Float(-2.0)));
    assert_eq!(stats[1].max, Some(StatValue::Float(1.5)));
    let (Some(StatValue::Utf8(min)), Some(StatValue::Utf8(max))) = (&stats[2].min, &stats[2].max)
    else {
        panic!("string bounds missing: {:?}", stats[2]);
    };
    assert!(stats[2].bounds_only);
    assert!(min.len() <= MAX_STAT_BYTES && max.len() <= MAX_STAT_BYTES);
    assert!(min.as_str() <= long_min.as_str() && max.as_str() >= long_max.as_str());
    assert_eq!(stats[2].null_count, Some(1));
}

/// Wide values get pages of about 128 KiB, not Parquet's 1 MiB (a read of a few rows
/// fetches little), and no page bounds (a footer of two 64-byte bounds a page for values
/// nothing prunes by); narrow columns keep `PAGE_ROWS` rows a page and their bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_values_get_small_pages_without_bounds() {
    use arrow::array::Int64Array;
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("doc", DataType::Utf8, false),
    ]));
    let table = Table::create(inner.clone(), "t".into(), &schema, Default::default())
        .await
        .unwrap();
    const ROWS: i64 = 4096;
    // 2 KiB a value, from a generator: no two alike, nothing for ZSTD to fold.
    let mut state = 7u64;
    let docs = StringArray::from_iter_values((0..ROWS).map(|_| {
        (0..128)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!("{:016x}", state >> 1)
            })
            .collect::<String>()
    }));
    let rows = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(0..ROWS)),
            Arc::new(docs),
        ],
    )
    .unwrap();
    table.append(vec![rows]).await.unwrap();
    let metadata = first_file_footer(&table, &inner).await;
    let pages = |column: usize| {
        let index = metadata.offset_index().expect("an offset index");
        index[0][column].page_locations().len()
    };
    // 4,096 keys fit in 4 pages of PAGE_ROWS; 8 MiB of values need 64 of 128 KiB (Parquet
    // closes a page once past the 64 KiB limit, adding values in sub-batches under it).
    assert!(pages(0) <= 5, "{} pages of keys", pages(0));
    assert!(
        (60..=80).contains(&pages(1)),
        "{} pages of values",
        pages(1)
    );
    let bounds = metadata.column_index().expect("a column index");
    assert!(
        !matches!(
            bounds[0][0],
            parquet::file::page_index::column_index::ColumnIndexMetaData::NONE
        ),
        "the keys keep their page bounds"
    );
    assert!(
        matches!(
            bounds[0][1],
            parquet::file::page_index::column_index::ColumnIndexMetaData::NONE
        ),
        "the wide values have none"
    );
}
