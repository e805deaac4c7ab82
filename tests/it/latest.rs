//! Finding a table's latest version: one LIST per statement, resolved when the statement
//! is planned; none within a session's staleness limit, its own commits always seen.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::AsArray;
use object_store::memory::InMemory;

/// A statement resolves the latest version once, when it is planned: `count(*)` of a table
/// whose manifest the session's handle holds is one LIST and nothing else, and a filtered
/// read of a version written meanwhile LISTs once too, reading what it planned against.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_lists_the_versions_once() {
    use natal::internals::io::InstrumentedStore;
    let instrumented = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let ctx = datafusion::prelude::SessionContext::new();
    let url = url::Url::parse("counted://store").unwrap();
    ctx.register_object_store(&url, instrumented.clone());
    natal::datafusion::register(&ctx, "counted://store/root").unwrap();
    let sql = |q: &'static str| {
        let ctx = ctx.clone();
        async move { natal::datafusion::sql(&ctx, q).await?.collect().await }
    };
    sql("CREATE TABLE t (k BIGINT, v BIGINT)").await.unwrap();
    sql("INSERT INTO t SELECT value, value * 2 FROM generate_series(1, 1000)")
        .await
        .unwrap();
    sql("SELECT count(*) FROM t").await.unwrap();
    for query in [
        "SELECT count(*) FROM t",
        "SELECT sum(v) FROM t WHERE k > 990",
    ] {
        instrumented.reset();
        let batches = sql(query).await.unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        let tally = instrumented.tally();
        assert_eq!(tally.list, 1, "{query}: {tally:?}");
        if query.contains("count") {
            assert_eq!(tally.get, 0, "{query}: {tally:?}");
        }
    }
}

/// With a staleness limit, a statement reads the latest version the session listed within
/// the limit and sends no request to find it; another session's commit stays unseen until
/// then, while the session's own commits are seen at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staleness_limit_reads_the_recently_listed_latest_with_no_request() {
    use natal::datafusion::{register_with, CatalogOptions};
    use natal::internals::io::InstrumentedStore;
    let instrumented = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let url = url::Url::parse("counted://store").unwrap();
    let session = |staleness_limit: Duration| {
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_object_store(&url, instrumented.clone());
        register_with(
            &ctx,
            "counted://store/root",
            CatalogOptions { staleness_limit },
        )
        .unwrap();
        ctx
    };
    let (patient, writer) = (
        session(Duration::from_secs(3600)),
        session(Default::default()),
    );
    let sql = |ctx: &datafusion::prelude::SessionContext, q: String| {
        let ctx = ctx.clone();
        async move {
            let batches = natal::datafusion::sql(&ctx, &q).await?.collect().await?;
            Ok::<_, datafusion::error::DataFusionError>(batches)
        }
    };
    let count = |ctx: &datafusion::prelude::SessionContext| {
        let q = sql(ctx, "SELECT count(*) FROM t".into());
        async move {
            let batches = q.await.unwrap();
            let column = batches[0]
                .column(0)
                .as_primitive::<arrow::datatypes::Int64Type>();
            column.value(0)
        }
    };
    sql(&writer, "CREATE TABLE t (k BIGINT)".into())
        .await
        .unwrap();
    sql(
        &writer,
        "INSERT INTO t SELECT value FROM generate_series(1, 1000)".into(),
    )
    .await
    .unwrap();
    assert_eq!(count(&patient).await, 1000);
    instrumented.reset();
    assert_eq!(count(&patient).await, 1000);
    assert_eq!(
        instrumented.tally().total(),
        0,
        "{:?}",
        instrumented.tally()
    );

    sql(&writer, "INSERT INTO t VALUES (1001), (1002)".into())
        .await
        .unwrap();
    assert_eq!(count(&writer).await, 1002);
    instrumented.reset();
    assert_eq!(count(&patient).await, 1000, "within the limit: as listed");
    assert_eq!(
        instrumented.tally().total(),
        0,
        "{:?}",
        instrumented.tally()
    );

    sql(&patient, "INSERT INTO t VALUES (1003)".into())
        .await
        .unwrap();
    assert_eq!(
        count(&patient).await,
        1003,
        "its own commit, and all before it"
    );
}
