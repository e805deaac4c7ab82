//! A filter's string and binary columns that the scan does not return are decoded as views
//! (no value copied out of its page); the answers must be those of the columns read as
//! stored, and a column the scan returns keeps the table's type.

use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::TryStreamExt;
use natal::{RowPredicate, ScanRequest};

use crate::common::{batch, memory_table, physical_plan, run, sorted_rows};

/// `name` ends with `suffix`; records the type each batch brought `name` in.
#[derive(Debug)]
struct NameEndsWith {
    suffix: String,
    columns: Vec<String>,
    seen: Mutex<Vec<DataType>>,
    /// The most value buffers a view column came in.
    most_buffers: Mutex<usize>,
}

impl NameEndsWith {
    fn new(suffix: &str) -> Arc<Self> {
        Arc::new(Self {
            suffix: suffix.to_string(),
            columns: vec!["name".to_string()],
            seen: Mutex::new(Vec::new()),
            most_buffers: Mutex::new(0),
        })
    }

    fn types_seen(&self) -> Vec<DataType> {
        let mut seen = self.seen.lock().unwrap().clone();
        seen.dedup();
        seen
    }
}

impl std::fmt::Display for NameEndsWith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "name LIKE '%{}'", self.suffix)
    }
}

impl RowPredicate for NameEndsWith {
    fn columns(&self) -> &[String] {
        &self.columns
    }
    fn needs_row_id(&self) -> bool {
        false
    }
    fn needs_row_addr(&self) -> bool {
        false
    }
    fn view_columns(&self) -> &[String] {
        &self.columns
    }
    fn evaluate(&self, batch: &RecordBatch) -> natal::Result<BooleanArray> {
        let names = batch.column(0);
        self.seen.lock().unwrap().push(names.data_type().clone());
        if let Some(views) = names.as_string_view_opt() {
            let mut most = self.most_buffers.lock().unwrap();
            *most = (*most).max(views.data_buffers().len());
        }
        let ends = |name: Option<&str>| name.map(|n| n.ends_with(&self.suffix));
        Ok(match names.data_type() {
            DataType::Utf8View => names.as_string_view().iter().map(ends).collect(),
            _ => names.as_string::<i32>().iter().map(ends).collect(),
        })
    }
}

/// The columns `returned` of the rows of `snapshot` that pass `filter`.
async fn scan_filtered(
    snapshot: &natal::Snapshot,
    returned: &[&str],
    filter: Arc<NameEndsWith>,
) -> Vec<RecordBatch> {
    let request = ScanRequest::new()
        .columns(returned.iter().copied())
        .filter(filter);
    let rows = snapshot.scan(request).await.unwrap();
    rows.try_collect().await.unwrap()
}

#[tokio::test]
async fn a_filter_sees_views_of_the_string_columns_the_scan_does_not_return() {
    let (table, _store) = memory_table(1_000).await;
    let rows: Vec<(i64, i64)> = (0..5_000).map(|k| (k, k * 3)).collect();
    table.append(vec![batch(&rows)]).await.unwrap();
    let snapshot = table.snapshot().await.unwrap();
    // `name` is `n{key}-{val}`: it ends with 7 where `3 * key` does.
    let expected: Vec<i64> = (0..5_000).filter(|k| (k * 3) % 10 == 7).collect();

    for returned in [vec!["key"], vec!["key", "name"]] {
        let filter = NameEndsWith::new("7");
        let batches = scan_filtered(&snapshot, &returned, filter.clone()).await;
        let mut keys: Vec<i64> = (batches.iter())
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, expected, "returning {returned:?}");
        let (seen, output) = match returned.len() {
            // Read for the filter alone: a view.
            1 => (vec![DataType::Utf8View], None),
            // Returned: the table's type, for the filter too.
            _ => (vec![DataType::Utf8], Some(DataType::Utf8)),
        };
        assert_eq!(filter.types_seen(), seen, "returning {returned:?}");
        if let Some(output) = output {
            assert!(batches.iter().all(|b| b.column(1).data_type() == &output));
        }
    }
}

#[tokio::test]
async fn a_filter_sees_view_columns_as_decoded_and_a_scan_returns_them_in_one_buffer() {
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("key", DataType::Int64, false),
        arrow::datatypes::Field::new("name", DataType::Utf8View, true),
    ]));
    let store = Arc::new(object_store::memory::InMemory::new());
    let options = natal::TableOptions::default();
    let table = natal::Table::create(store, "t".into(), &schema, options)
        .await
        .unwrap();
    // Values past a view's 12 inline bytes, over many pages.
    let keys = arrow::array::Int64Array::from_iter_values(0..20_000);
    let names = arrow::array::StringViewArray::from_iter_values(
        (0..20_000).map(|k| format!("a name long enough to be stored apart {k}")),
    );
    let rows = RecordBatch::try_new(schema, vec![Arc::new(keys), Arc::new(names)]).unwrap();
    table.append(vec![rows]).await.unwrap();
    let snapshot = table.snapshot().await.unwrap();

    for returned in [vec!["key"], vec!["key", "name"]] {
        let filter = NameEndsWith::new("7");
        let batches = scan_filtered(&snapshot, &returned, filter.clone()).await;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 2_000, "returning {returned:?}");
        assert_eq!(filter.types_seen(), vec![DataType::Utf8View]);
        let most = *filter.most_buffers.lock().unwrap();
        match returned.len() {
            // Read for the filter alone: the pages' buffers as decoded, none copied.
            1 => assert!(most > 1, "{most} buffers"),
            // Returned: its long values in one buffer, as every scan returns them.
            _ => {
                assert_eq!(most, 1);
                let one = |b: &RecordBatch| b.column(1).as_string_view().data_buffers().len() == 1;
                assert!(batches.iter().all(one));
            }
        }
    }
}

/// A session over a natal catalog whose `VARCHAR` and `BYTEA` are views (DataFusion's
/// default) or `Utf8` and `Binary`.
fn session(views: bool) -> (tempfile::TempDir, SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    let config =
        SessionConfig::new().set_bool("datafusion.sql_parser.map_string_types_to_utf8view", views);
    let ctx = SessionContext::new_with_config(config);
    natal::datafusion::register(&ctx, dir.path().to_str().unwrap()).unwrap();
    (dir, ctx)
}

async fn rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    sorted_rows(&ctx.sql(sql).await.unwrap().collect().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_filters_on_utf8_columns_read_as_views_answer_as_over_the_stored_columns() {
    filters_read_as_views_answer_alike(false, ["Utf8", "Binary"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_filters_on_view_columns_read_as_decoded_answer_alike() {
    filters_read_as_views_answer_alike(true, ["Utf8View", "Binary"]).await;
}

/// A table whose `VARCHAR` and `BYTEA` columns are stored as `types`, filtered on them
/// through natal and through DataFusion's memory table of the same rows.
async fn filters_read_as_views_answer_alike(views: bool, types: [&str; 2]) {
    let (_dir, ctx) = session(views);
    run(
        &ctx,
        "CREATE TABLE t (k BIGINT NOT NULL, s VARCHAR, b BYTEA)",
    )
    .await;
    for (from, to) in [(0, 9_999), (10_000, 14_999)] {
        run(
            &ctx,
            &format!(
                "INSERT INTO t SELECT value, \
                   CASE WHEN value % 13 = 0 THEN NULL ELSE 'v' || ((value * 7919) % 20000) END, \
                   CAST('b' || (value % 97) AS BYTEA) \
                 FROM generate_series({from}, {to})"
            ),
        )
        .await;
    }
    run(&ctx, "DELETE FROM t WHERE k % 11 = 4").await;
    run(&ctx, "UPDATE t SET s = 'moved' || k WHERE k % 101 = 5").await;
    assert_eq!(
        rows(
            &ctx,
            "SELECT DISTINCT arrow_typeof(s) AS s, arrow_typeof(b) AS b FROM t"
        )
        .await,
        rows(
            &ctx,
            &format!("SELECT '{}' AS s, '{}' AS b", types[0], types[1])
        )
        .await,
        "the table stores {types:?}"
    );
    // The same rows in memory: DataFusion's own answers.
    let all = ctx
        .sql("SELECT * FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let memory = datafusion::datasource::MemTable::try_new(all[0].schema(), vec![all]).unwrap();
    ctx.register_table("m", Arc::new(memory)).unwrap();

    let queries = [
        ("SELECT k FROM {} WHERE s LIKE '%17%'", true),
        ("SELECT k FROM {} WHERE s > 'v5' AND length(s) = 4", true),
        (
            "SELECT k FROM {} WHERE starts_with(s, 'moved') OR s IS NULL",
            true,
        ),
        ("SELECT k FROM {} WHERE b = CAST('b42' AS BYTEA)", true),
        ("SELECT k FROM {} WHERE upper(s) LIKE 'V1%'", true),
        // Returned: read as stored.
        ("SELECT k, s FROM {} WHERE s LIKE '%17%'", false),
        // A filter that asks for the type: the stored one answers.
        ("SELECT k FROM {} WHERE arrow_typeof(s) = '{type}'", false),
    ];
    let queries = queries.map(|(q, as_views)| (q.replace("{type}", types[0]), as_views));
    for (query, as_views) in &queries {
        let (query, as_views) = (query.as_str(), *as_views);
        let natal = rows(&ctx, &query.replace("{}", "t")).await;
        let memory = rows(&ctx, &query.replace("{}", "m")).await;
        assert!(natal.len() > 1, "{query} finds rows");
        assert_eq!(natal, memory, "{query}");
        let (_, plan) = physical_plan(&ctx, &query.replace("{}", "t")).await;
        assert_eq!(plan.contains("filter_views="), as_views, "{query}: {plan}");
    }
    // A returned string column keeps its type.
    let batches = ctx
        .sql("SELECT s FROM t WHERE s LIKE 'v1%'")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let stored = |b: &RecordBatch| b.column(0).data_type().to_string();
    assert!(!batches.is_empty() && batches.iter().all(|b| stored(b) == types[0]));
}
