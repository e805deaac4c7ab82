//! The model test's index check: probes of the `val` index find every live row holding the
//! probed values, whatever happened to the rows since the index was built.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{AsArray, Int64Array};
use arrow::datatypes::{Int64Type, UInt64Type};
use natal::ScanRequest;

use crate::model::State;
use crate::model_actions::INDEX;

/// A probe of the `val` index finds every live row holding the probed values (it may find
/// more; a scan's filter decides), however the rows were updated, moved or deleted since.
pub async fn check_index(live: &State, snapshot: &natal::Snapshot) {
    use natal::IndexLookup;
    if snapshot.manifest().indexes.field_of(INDEX).is_none() {
        return;
    }
    let mut wanted: Vec<i64> = live.values().step_by(3).take(3).map(|r| r.1).collect();
    wanted.push(i64::MIN);
    let values = Arc::new(Int64Array::from(wanted.clone()));
    probe_matches(live, snapshot, IndexLookup::Values(values), |v| {
        wanted.contains(&v)
    })
    .await;
    // Ranges: from a live value (included) to 10 above it (excluded), and open-ended.
    let low = live.values().next().map_or(0, |r| r.1);
    let bound = |v: i64, inclusive| Some((Arc::new(Int64Array::from(vec![v])) as _, inclusive));
    let ranges: [(IndexLookup, ValueTest); 3] = [
        (
            IndexLookup::Range {
                low: bound(low, true),
                high: bound(low + 10, false),
            },
            Box::new(move |v| v >= low && v < low + 10),
        ),
        (
            IndexLookup::Range {
                low: bound(low, false),
                high: None,
            },
            Box::new(move |v| v > low),
        ),
        (
            IndexLookup::Range {
                low: None,
                high: bound(low, true),
            },
            Box::new(move |v| v <= low),
        ),
    ];
    for (lookup, wanted) in ranges {
        probe_matches(live, snapshot, lookup, wanted).await;
    }
}

type ValueTest = Box<dyn Fn(i64) -> bool>;

/// A scan narrowed by `lookup` holds every live row whose `val` passes `wanted`.
async fn probe_matches(
    live: &State,
    snapshot: &natal::Snapshot,
    lookup: natal::IndexLookup,
    wanted: impl Fn(i64) -> bool,
) {
    let described = format!("{lookup:?}");
    let request = ScanRequest {
        with_row_id: true,
        index: Some(Arc::new(natal::IndexProbe::new(INDEX, lookup))),
        ..Default::default()
    };
    let batches: Vec<arrow::array::RecordBatch> =
        futures::TryStreamExt::try_collect(snapshot.scan(request).await.unwrap())
            .await
            .unwrap();
    let mut found = BTreeMap::new();
    for batch in batches {
        let vals = batch.column(1).as_primitive::<Int64Type>();
        let ids = batch
            .column_by_name(natal::ROW_ID)
            .expect("_rowid")
            .as_primitive::<UInt64Type>();
        for i in 0..batch.num_rows() {
            if wanted(vals.value(i)) {
                found.insert(ids.value(i), vals.value(i));
            }
        }
    }
    let expected: BTreeMap<u64, i64> = live
        .iter()
        .filter(|(_, r)| wanted(r.1))
        .map(|(id, r)| (*id, r.1))
        .collect();
    assert_eq!(found, expected, "index probe {described}");
}
