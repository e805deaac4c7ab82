//! The model test's check after each step: the latest version's rows, ids and addresses
//! against the model; `resolve` and takes of live and dead ids; index probes; every
//! retained version as it was committed, with its columns; change reads and lineage
//! (`model_changes.rs`).

use arrow::array::AsArray;
use arrow::datatypes::{Int64Type, UInt64Type};
use natal::{RowId, ScanRequest, Table};

use crate::common::read_rows;
use crate::model::{Model, State};
use crate::model_schema::check_extras;

/// A system column of a scan's batch.
fn system<'a>(batch: &'a arrow::array::RecordBatch, name: &str) -> &'a arrow::array::UInt64Array {
    batch
        .column_by_name(name)
        .expect("system column")
        .as_primitive::<UInt64Type>()
}

/// Checks `table` against `model` (see the module's notes).
pub(crate) async fn check(model: &Model, table: &Table) {
    let snapshot = table.latest().await.unwrap();
    assert_eq!(snapshot.version(), model.versions.last().unwrap().0);
    let actual = read_rows(&snapshot).await.unwrap();
    let values: State = actual.iter().map(|(id, r)| (*id, (r.key, r.val))).collect();
    assert_eq!(values, model.live, "live rows differ from the model");
    assert_eq!(snapshot.count_rows(), model.live.len() as u64);
    for (id, row) in &actual {
        if !model.moved.contains(id) {
            assert_eq!(
                row.addr, *id,
                "row {id} never moved but is not at its birth address"
            );
        }
        let resolved = snapshot.resolve(RowId::from_u64(*id)).await.unwrap();
        assert_eq!(
            resolved.map(|a| a.as_u64()),
            Some(row.addr),
            "resolve({id})"
        );
    }
    for dead in model
        .ever
        .iter()
        .filter(|id| !model.live.contains_key(id))
        .take(20)
    {
        assert_eq!(
            snapshot.resolve(RowId::from_u64(*dead)).await.unwrap(),
            None,
            "dead id {dead} resolves"
        );
    }
    // No dead id is found by a take either, whatever copies of its row remain.
    let dead: Vec<RowId> = model
        .ever
        .iter()
        .filter(|id| !model.live.contains_key(id))
        .map(|&id| RowId::from_u64(id))
        .collect();
    let found = snapshot.take(&dead, ScanRequest::default()).await.unwrap();
    assert_eq!(found.num_rows(), 0, "a take of the {} dead ids", dead.len());
    // A take of a few ids on a fresh snapshot (answered by a view of just those ids) finds
    // exactly the live ones, in the order asked, with their values and addresses.
    let dead = model.ever.iter().find(|id| !model.live.contains_key(id));
    let asked: Vec<u64> = dead
        .into_iter()
        .copied()
        .chain(actual.keys().rev().step_by(5).take(3).copied())
        .collect();
    let fresh = table.latest().await.unwrap();
    let ids: Vec<RowId> = asked.iter().map(|&id| RowId::from_u64(id)).collect();
    let request = ScanRequest {
        with_row_id: true,
        with_row_addr: true,
        ..Default::default()
    };
    let taken = fresh.take(&ids, request).await.unwrap();
    let got: Vec<(u64, u64, i64, i64)> = (0..taken.num_rows())
        .map(|i| {
            (
                system(&taken, natal::ROW_ID).value(i),
                system(&taken, natal::ROW_ADDR).value(i),
                taken.column(0).as_primitive::<Int64Type>().value(i),
                taken.column(1).as_primitive::<Int64Type>().value(i),
            )
        })
        .collect();
    let expected: Vec<(u64, u64, i64, i64)> = asked
        .iter()
        .filter_map(|id| actual.get(id).map(|r| (*id, r.addr, r.key, r.val)))
        .collect();
    assert_eq!(got, expected, "take of {asked:?}");
    crate::model_index::check_index(&model.live, &snapshot).await;
    for (version, state) in &model.versions {
        let old = read_rows(&table.at_version(*version).await.unwrap())
            .await
            .unwrap();
        let old: State = old.iter().map(|(id, r)| (*id, (r.key, r.val))).collect();
        assert_eq!(&old, state, "version {version} changed");
        check_extras(
            &table.at_version(*version).await.unwrap(),
            &model.schemas[version],
        )
        .await;
    }
    crate::model_changes::check_changes(model, table).await;
    crate::model_changes::check_lineage(model, table).await;
}
