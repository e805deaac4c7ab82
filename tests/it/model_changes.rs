//! Change reads against the model: for pairs of retained versions, `Table::changes(a, b)`
//! applied to the model's rows of `a` gives its rows of `b`, ids included; each change
//! carries the version of the row's last change in the range, which the model's history
//! confirms; and rows only moved (compaction, merges) are never reported. And lineage:
//! every live row's `_row_created_version` and `_row_updated_version`, in every retained
//! version, are the model's record of its history.

use std::collections::HashMap;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type};
use natal::Table;

use crate::model::{Model, State};

/// One reported change: (version, id, kind, key, val, the other user columns' values).
type Change = (u64, u64, String, i64, i64, String);

/// The values of `batch`'s row `row` in its user columns other than `key` and `val`, as text.
fn other_values(batch: &RecordBatch, row: usize) -> String {
    let options = arrow::util::display::FormatOptions::default();
    let system = [
        natal::ROW_ID,
        natal::CHANGE_TYPE,
        natal::COMMIT_VERSION,
        natal::COMMIT_TIMESTAMP,
    ];
    let schema = batch.schema();
    let shown: Vec<String> = (schema.fields().iter().zip(batch.columns()))
        .filter(|(f, _)| !["key", "val"].contains(&f.name().as_str()))
        .filter(|(f, _)| !system.contains(&f.name().as_str()))
        .map(|(f, column)| {
            let formatter = arrow::util::display::ArrayFormatter::try_new(column, &options);
            format!("{}={}", f.name(), formatter.unwrap().value(row))
        })
        .collect();
    shown.join(",")
}

fn changes_of(batches: &[RecordBatch]) -> Vec<Change> {
    let mut out = Vec::new();
    for batch in batches {
        let column = |name: &str| batch.column_by_name(name).expect(name);
        let (ids, kinds, versions) = (
            column(natal::ROW_ID).as_primitive::<UInt64Type>(),
            column(natal::CHANGE_TYPE).as_string::<i32>(),
            column(natal::COMMIT_VERSION).as_primitive::<UInt64Type>(),
        );
        let (keys, vals) = (
            column("key").as_primitive::<Int64Type>(),
            column("val").as_primitive::<Int64Type>(),
        );
        for i in 0..batch.num_rows() {
            out.push((
                versions.value(i),
                ids.value(i),
                kinds.value(i).to_string(),
                keys.value(i),
                vals.value(i),
                other_values(batch, i),
            ));
        }
    }
    out
}

/// The columns other than `key` and `val` of row `id` at `version`, as a change shows them.
async fn others_at(table: &Table, version: u64, id: u64) -> String {
    let snapshot = table.at_version(version).await.unwrap();
    let ids = [natal::RowId::from_u64(id)];
    let row = snapshot.take(&ids, Default::default()).await.unwrap();
    assert_eq!(row.num_rows(), 1, "row {id} at version {version}");
    other_values(&row, 0)
}

/// The change read of the last step and of the whole retained history.
pub(crate) async fn check_changes(model: &Model, table: &Table) {
    let n = model.versions.len();
    let mut pairs = vec![(0, n - 1), (n.saturating_sub(2), n - 1)];
    pairs.dedup();
    for (i, j) in pairs {
        check_pair(model, table, i, j).await;
    }
}

async fn check_pair(model: &Model, table: &Table, i: usize, j: usize) {
    let (from, before) = &model.versions[i];
    let (to, after) = &model.versions[j];
    let states: HashMap<u64, &State> = model.versions.iter().map(|(v, s)| (*v, s)).collect();
    let read = table
        .changes(*from, *to)
        .await
        .unwrap_or_else(|e| panic!("changes({from}, {to}): {e}"));
    let changes = changes_of(&read.batches);
    // Report order: by row id (a row's preimage just before its postimage).
    assert!(
        changes.windows(2).all(|w| w[0].1 <= w[1].1),
        "changes({from}, {to}) not in row-id order"
    );
    let mut state = before.clone();
    let mut preimages: HashMap<u64, ((i64, i64), String)> = HashMap::new();
    let what = |c: &Change| format!("changes({from}, {to}) reported {c:?}");
    for change in &changes {
        let (version, id, kind, key, val, others) = change;
        assert!(from < version && version <= to, "{}", what(change));
        let (at, just_before) = (states[version], states[&(version - 1)]);
        match kind.as_str() {
            "delete" | "update_preimage" => {
                assert_eq!(state.remove(id), Some((*key, *val)), "{}", what(change));
                if kind == "delete" {
                    assert!(just_before.contains_key(id), "{}", what(change));
                    assert!(!at.contains_key(id), "{}", what(change));
                } else {
                    preimages.insert(*id, ((*key, *val), others.clone()));
                }
            }
            "update_postimage" | "insert" => {
                assert_eq!(state.insert(*id, (*key, *val)), None, "{}", what(change));
                assert_eq!(at.get(id), Some(&(*key, *val)), "{}", what(change));
                if kind == "insert" {
                    // The model follows `key` and `val`; when they were there just before,
                    // the row's other columns changed then (a restore to another schema).
                    if just_before.get(id) == Some(&(*key, *val)) {
                        let (was, now) = (
                            others_at(table, version - 1, *id).await,
                            others_at(table, *version, *id).await,
                        );
                        assert_ne!(was, now, "{}", what(change));
                    }
                    assert!(!before.contains_key(id), "{}", what(change));
                } else {
                    let old = preimages.get(id).cloned();
                    let Some((old, old_others)) = old else {
                        panic!("a postimage without its preimage: {}", what(change));
                    };
                    // Updates change values; a row a restore put back as it was is no
                    // change. The model follows `key` and `val`; when they stay, another
                    // column changed (a restore to a version before a column was filled).
                    if old == (*key, *val) {
                        assert_ne!(&old_others, others, "{}", what(change));
                    } else if just_before.get(id) == Some(&(*key, *val)) {
                        // `key` and `val` were so already: the change is of the row's other
                        // columns then (a restore to another schema), its last in the range.
                        let (was, now) = (
                            others_at(table, version - 1, *id).await,
                            others_at(table, *version, *id).await,
                        );
                        assert_ne!(was, now, "{}", what(change));
                    }
                }
            }
            other => panic!("unknown change type {other}"),
        }
    }
    assert_eq!(
        &state, after,
        "changes({from}, {to}) applied to {from} do not give {to}"
    );
    let count = |kind: &str| changes.iter().filter(|c| c.2 == kind).count() as u64;
    assert_eq!(
        (read.inserted, read.updated, read.deleted),
        (count("insert"), count("update_postimage"), count("delete"))
    );
    // Undated, deletes carry `to`; every change else is the same.
    let undated = natal::ChangeRequest {
        undated_deletes: true,
        ..Default::default()
    };
    let read = table
        .changes_with(*from, *to, undated)
        .await
        .unwrap_or_else(|e| panic!("undated changes({from}, {to}): {e}"));
    let mut undated = changes_of(&read.batches);
    let mut dated: Vec<Change> = (changes.into_iter())
        .map(|c| match c.2.as_str() {
            "delete" => (*to, c.1, c.2, c.3, c.4, c.5),
            _ => c,
        })
        .collect();
    undated.sort();
    dated.sort();
    assert_eq!(undated, dated, "undated changes({from}, {to})");
}

/// Every retained version's lineage columns against the model's.
pub(crate) async fn check_lineage(model: &Model, table: &Table) {
    for (version, _) in &model.versions {
        let snapshot = table.at_version(*version).await.unwrap();
        let request = natal::ScanRequest {
            columns: Some(vec![]),
            with_row_id: true,
            with_lineage: true,
            ..Default::default()
        };
        let batches: Vec<RecordBatch> =
            futures::TryStreamExt::try_collect(snapshot.scan(request).await.unwrap())
                .await
                .unwrap();
        let mut read = crate::model::Lineage::new();
        for batch in &batches {
            let column = |name: &str| batch.column_by_name(name).expect(name).clone();
            let ids = column(natal::ROW_ID);
            let created = column(natal::ROW_CREATED_VERSION);
            let updated = column(natal::ROW_UPDATED_VERSION);
            let (ids, created, updated) = (
                ids.as_primitive::<UInt64Type>(),
                created.as_primitive::<UInt64Type>(),
                updated.as_primitive::<UInt64Type>(),
            );
            for i in 0..batch.num_rows() {
                assert!(
                    created.is_valid(i) && updated.is_valid(i),
                    "lineage recorded"
                );
                read.insert(ids.value(i), (created.value(i), updated.value(i)));
            }
        }
        assert_eq!(
            read, model.lineages[version],
            "the lineage of version {version}"
        );
    }
}
