//! The table against a model: random sequences of every operation, including concurrent
//! pairs, compared after every step with a plain in-memory map of id → row.
//!
//! After each step: every live row's id and values; no id ever reused; `resolve` finds
//! exactly the live rows; rows never moved sit at their birth address; and every retained
//! version still reads exactly as it did when it was committed, with the columns it had
//! (schema changes: `model_schema.rs`); and change reads between retained versions turn one
//! into the other, and lineage matches each row's history (`model_changes.rs`); the check
//! itself is `model_check.rs`. Most cases run with the handle's tiered merging of small fragments on: its merges are versions of their own,
//! checked as compactions are.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use natal::Error;
use natal::ManifestLayout;
use natal::{CleanupPolicy, SchemaChange, Table, TableOptions, TieredMerge};
use proptest::prelude::*;
use proptest::sample::Index;

use crate::common::*;
use crate::model_actions::{run, Action, Ran};
use crate::model_clone::Branches;
use crate::model_schema::{forget, plan_schema, schema_changed, schema_op, Extras, SchemaOp};

pub type State = BTreeMap<u64, (i64, i64)>;

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Append(u8),
    DeleteWhere {
        modulus: u8,
        rest: u8,
        /// Found by the scan's own filter (a SQL DELETE) rather than a batch predicate.
        filtered: bool,
    },
    DeleteIds(Vec<Index>),
    Update {
        modulus: u8,
        rest: u8,
        delta: i64,
        /// Found by the scan's own filter (a SQL UPDATE) rather than a batch predicate.
        filtered: bool,
    },
    UpdateIds(Vec<Index>, i64),
    /// Give `val` of some rows new values in row patches (`Table::patch_rows`).
    PatchIds(Vec<Index>, i64),
    Upsert {
        existing: Vec<Index>,
        new_rows: u8,
        delta: i64,
    },
    Compact {
        target: u8,
        /// Rewrite only small fragments, however many rows the others have deleted: older
        /// copies of moved rows then outlive the fragments the rows moved to.
        only_small: bool,
    },
    /// Delete some rows, update others, insert new ones, in one commit (what a MERGE
    /// commits: `Table::commit_changes`).
    Changes {
        deleted: Vec<Index>,
        updated: Vec<Index>,
        new_rows: u8,
        delta: i64,
    },
    Checkpoint,
    /// Start or stop recording change data (`Table::set_change_data_feed`).
    ChangeDataFeed(bool),
    /// Index `val` (the column updates change) under `val_idx`.
    Index,
    Overwrite(u8),
    Restore(Index),
    /// A clone (deep if true) of a retained version into a new table, which later
    /// operations may pick instead of the source (each checked against its own model).
    Clone(Index, bool),
    Cleanup {
        keep: u8,
    },
    Concurrent(Box<Op>, Box<Op>),
    /// A change to the extra columns (`model_schema.rs`).
    Schema(SchemaOp),
}

fn row_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u8..12).prop_map(Op::Append),
        (2u8..6, 0u8..6, any::<bool>()).prop_map(|(modulus, rest, filtered)| Op::DeleteWhere {
            modulus,
            rest: rest % modulus,
            filtered,
        }),
        prop::collection::vec(any::<Index>(), 1..4).prop_map(Op::DeleteIds),
        (2u8..6, 0u8..6, 1i64..50, any::<bool>()).prop_map(|(modulus, rest, delta, filtered)| {
            Op::Update {
                modulus,
                rest: rest % modulus,
                delta,
                filtered,
            }
        }),
        (prop::collection::vec(any::<Index>(), 1..4), 1i64..50)
            .prop_map(|(ids, delta)| Op::UpdateIds(ids, delta)),
        (prop::collection::vec(any::<Index>(), 1..4), 1i64..50)
            .prop_map(|(ids, delta)| Op::PatchIds(ids, delta)),
        (
            prop::collection::vec(any::<Index>(), 0..4),
            0u8..4,
            1i64..50
        )
            .prop_map(|(existing, new_rows, delta)| Op::Upsert {
                existing,
                new_rows,
                delta
            }),
        (2u8..30, any::<bool>())
            .prop_map(|(target, only_small)| Op::Compact { target, only_small }),
        (
            prop::collection::vec(any::<Index>(), 0..3),
            prop::collection::vec(any::<Index>(), 0..3),
            0u8..3,
            1i64..50
        )
            .prop_map(|(deleted, updated, new_rows, delta)| Op::Changes {
                deleted,
                updated,
                new_rows,
                delta
            }),
        Just(Op::Checkpoint),
        any::<bool>().prop_map(Op::ChangeDataFeed),
        Just(Op::Index),
        schema_op().prop_map(Op::Schema),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => row_op(),
        1 => (1u8..8).prop_map(Op::Overwrite),
        1 => any::<Index>().prop_map(Op::Restore),
        1 => (1u8..4).prop_map(|keep| Op::Cleanup { keep }),
        1 => (any::<Index>(), any::<bool>()).prop_map(|(at, deep)| Op::Clone(at, deep)),
        3 => (row_op(), row_op()).prop_map(|(a, b)| Op::Concurrent(Box::new(a), Box::new(b))),
    ]
}

pub(crate) struct Model {
    pub(crate) live: State,
    pub(crate) ever: HashSet<u64>,
    /// Ids whose rows were ever rewritten; all others must sit at their birth address.
    pub(crate) moved: HashSet<u64>,
    pub(crate) versions: Vec<(u64, State)>,
    pub(crate) next_key: i64,
    /// The extra columns now, and of every version.
    pub(crate) extras: Extras,
    pub(crate) schemas: HashMap<u64, Extras>,
    /// Names handed to extras so far (never reused).
    pub(crate) names: u32,
    /// Each live row's lineage now, and of every version: id → (created, last updated).
    pub(crate) lineage: Lineage,
    pub(crate) lineages: HashMap<u64, Lineage>,
    /// The table's patch share is 1: updates and upserts write row patches of the columns
    /// they change, where the table takes them (else it is 0: they rewrite).
    pub(crate) patch_share: bool,
}

/// Per id, the version that created the row and the version that last changed its values.
pub type Lineage = BTreeMap<u64, (u64, u64)>;

/// What an operation is expected to do to the model, computed against the state it read.
enum Expect {
    /// New rows (key, val) added with fresh ids, plus changed rows (id → new values), plus
    /// removed ids.
    Change {
        added: Vec<(i64, i64)>,
        changed: BTreeMap<u64, (i64, i64)>,
        removed: Vec<u64>,
        replace_all: bool,
        /// The extras (by tag) whose values the changed rows lose: those the plan saw, padded
        /// with NULL by the write (a row patch of them, or a rewrite); extras added since
        /// keep their values. `None`: they keep every value (an update that carries them,
        /// blob values by reference, or a patch of `val` and `name` only).
        forgets: Option<Vec<u32>>,
    },
    /// Values unchanged (compaction, checkpoint); rows may move.
    NoValueChange,
    Restore(State, Extras, Lineage),
    /// Rows unchanged; the extras go from `before` to `after`.
    Schema {
        before: Extras,
        after: Extras,
    },
}

impl Model {
    fn fresh_rows(&mut self, n: u8) -> Vec<(i64, i64)> {
        (0..n as i64)
            .map(|i| {
                self.next_key += 1;
                (self.next_key, i)
            })
            .collect()
    }
}

/// Plans `op` against `read` (the state it sees) and returns what to run and what to expect.
fn plan(op: &Op, read: &State, model: &mut Model) -> (Action, Expect) {
    let pick = |indexes: &[Index]| -> Vec<u64> {
        let ids: Vec<u64> = read.keys().copied().collect();
        let mut picked: Vec<u64> = if ids.is_empty() {
            vec![]
        } else {
            indexes.iter().map(|i| ids[i.index(ids.len())]).collect()
        };
        picked.sort_unstable();
        picked.dedup();
        picked
    };
    let matching = |m: u8, r: u8| -> Vec<u64> {
        read.iter()
            .filter(|(_, (k, _))| k.rem_euclid(m as i64) == r as i64)
            .map(|(id, _)| *id)
            .collect()
    };
    let planned: Vec<u32> = model.extras.iter().map(|e| e.tag).collect();
    let change = |added, changed, removed| Expect::Change {
        added,
        changed,
        removed,
        replace_all: false,
        forgets: Some(planned.clone()),
    };
    match op {
        Op::Append(n) => {
            let rows = model.fresh_rows(*n);
            (
                Action::Append(rows.clone()),
                change(rows, BTreeMap::new(), vec![]),
            )
        }
        Op::DeleteWhere {
            modulus,
            rest,
            filtered,
        } => (
            Action::DeleteWhere(*modulus, *rest, *filtered),
            change(vec![], BTreeMap::new(), matching(*modulus, *rest)),
        ),
        Op::DeleteIds(indexes) => {
            let ids = pick(indexes);
            (
                Action::DeleteIds(ids.clone()),
                change(vec![], BTreeMap::new(), ids),
            )
        }
        Op::Update {
            modulus,
            rest,
            delta,
            filtered,
        } => {
            let changed = matching(*modulus, *rest)
                .into_iter()
                .map(|id| (id, (read[&id].0, read[&id].1 + delta)))
                .collect();
            // The filtered form carries the extras, blob values as references to the
            // sidecars they stay in.
            (
                Action::Update(*modulus, *rest, *delta, *filtered),
                Expect::Change {
                    added: vec![],
                    changed,
                    removed: vec![],
                    replace_all: false,
                    forgets: (!*filtered).then(|| planned.clone()),
                },
            )
        }
        Op::UpdateIds(indexes, delta) => {
            let ids = pick(indexes);
            let changed = ids
                .iter()
                .map(|id| (*id, (read[id].0, read[id].1 + delta)))
                .collect();
            (
                Action::UpdateIds(ids, *delta),
                change(vec![], changed, vec![]),
            )
        }
        Op::PatchIds(indexes, delta) => {
            let ids = pick(indexes);
            let values = (ids.iter())
                .map(|id| (*id, (read[id].0, read[id].1 + delta)))
                .collect();
            let changed = ids
                .iter()
                .map(|id| (*id, (read[id].0, read[id].1 + delta)))
                .collect();
            // A patch leaves the row's other columns (the extras) as they were.
            (
                Action::PatchIds(values, *delta, None),
                Expect::Change {
                    added: vec![],
                    changed,
                    removed: vec![],
                    replace_all: false,
                    forgets: None,
                },
            )
        }
        Op::Upsert {
            existing,
            new_rows,
            delta,
        } => {
            let ids = pick(existing);
            let changed: BTreeMap<u64, (i64, i64)> = ids
                .iter()
                .map(|id| (*id, (read[id].0, read[id].1 + delta)))
                .collect();
            let added = model.fresh_rows(*new_rows);
            let input: Vec<(i64, i64)> = changed
                .values()
                .copied()
                .chain(added.iter().copied())
                .collect();
            (Action::Upsert(input), change(added, changed, vec![]))
        }
        Op::Changes {
            deleted,
            updated,
            new_rows,
            delta,
        } => {
            let removed = pick(deleted);
            let changed: BTreeMap<u64, (i64, i64)> = pick(updated)
                .into_iter()
                .filter(|id| !removed.contains(id))
                .map(|id| (id, (read[&id].0, read[&id].1 + delta)))
                .collect();
            let added = model.fresh_rows(*new_rows);
            // Updates of a delta a multiple of 4: `val` and `name` of the whole rows as row
            // patches, which leave the row's other columns (the extras) as they were, beside
            // the deletes and the inserts as new rows, in one version.
            if !changed.is_empty() && delta % 4 == 0 {
                let values = changed.clone().into_iter().collect();
                let beside = Some((added.clone(), removed.clone()));
                let action = Action::PatchIds(values, *delta, beside);
                let expect = Expect::Change {
                    added,
                    changed,
                    removed,
                    replace_all: false,
                    forgets: None,
                };
                return (action, expect);
            }
            let action = Action::Changes {
                deleted: removed.clone(),
                updated: changed.clone().into_iter().collect(),
                inserted: added.clone(),
            };
            (action, change(added, changed, removed))
        }
        Op::Compact { target, only_small } => (
            Action::Compact(*target as u64, *only_small),
            Expect::NoValueChange,
        ),
        Op::Checkpoint => (Action::Checkpoint, Expect::NoValueChange),
        Op::ChangeDataFeed(on) => (Action::ChangeDataFeed(*on), Expect::NoValueChange),
        Op::Index => (Action::Index, Expect::NoValueChange),
        Op::Overwrite(n) => {
            let rows = model.fresh_rows(*n);
            (
                Action::Overwrite(rows.clone()),
                Expect::Change {
                    added: rows,
                    changed: BTreeMap::new(),
                    removed: vec![],
                    replace_all: true,
                    forgets: Some(planned.clone()),
                },
            )
        }
        Op::Restore(index) => {
            let (version, state) = model.versions[index.index(model.versions.len())].clone();
            let extras = model.schemas[&version].clone();
            let lineage = model.lineages[&version].clone();
            (
                Action::Restore(version),
                Expect::Restore(state, extras, lineage),
            )
        }
        Op::Schema(op) => {
            let before = model.extras.clone();
            match plan_schema(op, &before, &mut model.names, read.keys().copied()) {
                Some((SchemaChange::AddColumn { name, data_type }, after))
                    if matches!(op, SchemaOp::AddValued(_)) =>
                {
                    (
                        Action::AddValued(name.column().to_string(), data_type),
                        Expect::Schema { before, after },
                    )
                }
                Some((change, after)) => (
                    Action::Alter(vec![change]),
                    Expect::Schema { before, after },
                ),
                None => (
                    Action::Alter(vec![]),
                    Expect::Schema {
                        after: before.clone(),
                        before,
                    },
                ),
            }
        }
        Op::Cleanup { .. } | Op::Concurrent(..) | Op::Clone(..) => {
            unreachable!("handled by the runner")
        }
    }
}

impl Expect {
    /// True when the model says the operation changes nothing, so it must publish nothing.
    fn changes_nothing(&self) -> bool {
        match self {
            Expect::Change {
                added,
                changed,
                removed,
                replace_all,
                ..
            } => added.is_empty() && changed.is_empty() && removed.is_empty() && !replace_all,
            // Compaction and indexing publish when they find work; the model cannot tell.
            Expect::NoValueChange => false,
            Expect::Restore(..) => false,
            Expect::Schema { before, after } => before == after,
        }
    }
}

/// Applies a committed operation's expectation to the model, checking new ids on the way.
async fn apply(model: &mut Model, expect: Expect, ran: Ran, table: &Table) {
    let last = model.versions.last().map_or(0, |v| v.0);
    let Ran { version, published } = ran;
    if !published {
        // Nothing to do (nothing matched, no rows given, nothing to compact or index):
        // nothing published, and the model agrees nothing changes.
        assert!(
            matches!(expect, Expect::NoValueChange) || expect.changes_nothing(),
            "an operation that changes rows published nothing"
        );
        assert!(
            version <= last,
            "an unpublished version {version} is past {last}"
        );
        return;
    }
    assert!(
        !expect.changes_nothing(),
        "an operation that changes nothing published version {version}"
    );
    assert_eq!(version, last + 1, "versions are consecutive");
    let actual = read_rows(&table.at_version(version).await.unwrap())
        .await
        .unwrap();
    match expect {
        Expect::Change {
            added,
            changed,
            removed,
            replace_all,
            forgets,
        } => {
            if replace_all {
                model.live.clear();
                model.lineage.clear();
            }
            if let Some(tags) = forgets {
                forget(&mut model.extras, &tags, changed.keys().copied());
            }
            for id in removed {
                assert!(model.live.remove(&id).is_some(), "removed id {id} was live");
                model.lineage.remove(&id);
            }
            for (id, values) in changed {
                assert!(
                    model.live.insert(id, values).is_some(),
                    "changed id {id} was live"
                );
                model.moved.insert(id);
                if let Some(lineage) = model.lineage.get_mut(&id) {
                    lineage.1 = version;
                }
            }
            let mut new_ids: Vec<u64> = actual
                .keys()
                .filter(|id| !model.live.contains_key(id))
                .copied()
                .collect();
            new_ids.sort_unstable();
            assert_eq!(new_ids.len(), added.len(), "new rows get new ids");
            let mut new_rows: Vec<(i64, i64)> = new_ids
                .iter()
                .map(|id| (actual[id].key, actual[id].val))
                .collect();
            let mut added = added;
            new_rows.sort_unstable();
            added.sort_unstable();
            assert_eq!(new_rows, added);
            for id in new_ids {
                assert!(!model.ever.contains(&id), "id {id} reused");
                assert_eq!(actual[&id].addr, id, "a new row's id is its birth address");
                model.live.insert(id, (actual[&id].key, actual[&id].val));
                model.lineage.insert(id, (version, version));
            }
        }
        Expect::NoValueChange => {
            let before = read_rows(&table.at_version(version - 1).await.unwrap())
                .await
                .unwrap();
            for (id, row) in &actual {
                if before.get(id).is_some_and(|b| b.addr != row.addr) {
                    model.moved.insert(*id);
                }
            }
        }
        Expect::Restore(state, extras, lineage) => {
            model.live = state;
            model.extras = extras;
            model.lineage = lineage;
        }
        Expect::Schema { after, .. } => model.extras = schema_changed(&model.extras, after),
    }
    model.ever.extend(model.live.keys().copied());
    model.versions.push((version, model.live.clone()));
    model.schemas.insert(version, model.extras.clone());
    model.lineages.insert(version, model.lineage.clone());
}

/// Records the versions a handle's tiered merges published after its write (values
/// unchanged, rows may move); whether there were any.
async fn absorb_merges(model: &mut Model, table: &Table) -> bool {
    let latest = table.latest().await.unwrap().version();
    let mut merged = false;
    while let Some(&(last, _)) = model.versions.last().filter(|(v, _)| *v < latest) {
        let merge = Ran {
            version: last + 1,
            published: true,
        };
        apply(model, Expect::NoValueChange, merge, table).await;
        merged = true;
    }
    merged
}

/// Ids whose rows `a` rewrote or removed between `before` and `after`.
fn touched(before: &State, after: &State) -> HashSet<u64> {
    before
        .iter()
        .filter(|(id, v)| after.get(id) != Some(v))
        .map(|(id, _)| *id)
        .collect()
}

pub(crate) async fn step(op: &Op, model: &mut Model, table: &Table) {
    match op {
        Op::Cleanup { keep } => {
            let policy = CleanupPolicy {
                keep_versions: *keep as usize,
                keep_newer_than: Duration::ZERO,
                min_file_age: Duration::ZERO,
            };
            table.cleanup(policy).await.unwrap();
            let removed = model.versions.len().saturating_sub(*keep as usize);
            for (version, _) in model.versions.drain(..removed) {
                assert!(matches!(
                    table.at_version(version).await,
                    Err(Error::VersionNotFound { .. })
                ));
            }
        }
        Op::Concurrent(a, b) => {
            let read_version = model.versions.last().unwrap().0;
            let read = model.live.clone();
            let handle_a = table.planned_at(table.at_version(read_version).await.unwrap());
            let handle_b = table.planned_at(table.at_version(read_version).await.unwrap());
            let (action_a, expect_a) = plan(a, &read, model);
            let (action_b, expect_b) = plan(b, &read, model);
            let schema = Arc::new(
                table
                    .at_version(read_version)
                    .await
                    .unwrap()
                    .schema()
                    .clone(),
            );
            let changes_schema =
                |e: &Expect| matches!(e, Expect::Schema { before, after } if before != after);
            let schemas_collide = changes_schema(&expect_a) && changes_schema(&expect_b);
            let version = run(&handle_a, &action_a, &schema).await.unwrap();
            apply(model, expect_a, version, table).await;
            let merged_after_a = absorb_merges(model, table).await;
            let touched_by_a = touched(&read, &model.live);
            let result = run(&handle_b, &action_b, &schema).await;
            let conflicts = match &expect_b {
                Expect::Change {
                    changed, removed, ..
                } => changed
                    .keys()
                    .chain(removed.iter())
                    .any(|id| touched_by_a.contains(id)),
                _ => false,
            } || schemas_collide;
            match result {
                Err(e) if e.is_conflict() => {
                    // Compaction gives way to an update or compaction of its input fragments.
                    let rewrote = merged_after_a
                        || matches!(
                            action_a,
                            Action::Update(..)
                                | Action::UpdateIds(..)
                                | Action::PatchIds(..)
                                | Action::Upsert(_)
                                | Action::Changes { .. }
                                | Action::Compact(..)
                        );
                    // What writes row patches (an update with an even delta does:
                    // `model_actions::run`).
                    let writes_patches = |a: &Action| {
                        matches!(a, Action::PatchIds(..))
                            || matches!(a, Action::Update(_, _, d, true) if d % 2 == 0)
                            || (model.patch_share
                                && matches!(
                                    a,
                                    Action::Update(..) | Action::UpdateIds(..) | Action::Upsert(_)
                                ))
                    };
                    // An index segment gives way to one covering the same fragments, to a
                    // compaction that rewrote all of them, or to patches of its column.
                    let indexed_meanwhile = matches!(action_b, Action::Index)
                        && (merged_after_a
                            || writes_patches(&action_a)
                            || matches!(action_a, Action::Index | Action::Compact(..)));
                    // A patch follows rows a compaction moved, and gives way to an index of
                    // its column.
                    let patch_gives_way =
                        writes_patches(&action_b) && matches!(action_a, Action::Index);
                    // Values computed for a column give way to rows written meanwhile, and
                    // rows rewritten give way to values computed meanwhile.
                    let rewrites = |a: &Action| {
                        matches!(
                            a,
                            Action::Update(..)
                                | Action::UpdateIds(..)
                                | Action::Upsert(_)
                                | Action::Changes { .. }
                                | Action::Compact(..)
                        )
                    };
                    let valued_meanwhile = (matches!(action_b, Action::AddValued(..))
                        && (merged_after_a
                            || rewrites(&action_a)
                            || matches!(
                                action_a,
                                Action::Append(_) | Action::Overwrite(_) | Action::PatchIds(..)
                            )))
                        || (matches!(action_a, Action::AddValued(..)) && rewrites(&action_b))
                        // A patch the table refused runs as an update (`model_actions::run`).
                        || (matches!(action_a, Action::AddValued(..))
                            && matches!(action_b, Action::PatchIds(..))
                            && e.to_string().contains("update planned"));
                    // An update keeping blob values where they are gives way to a
                    // compaction that repacked their sidecars meanwhile.
                    let repacked_meanwhile = matches!(action_b, Action::Update(.., true))
                        && (merged_after_a || matches!(action_a, Action::Compact(..)))
                        && e.to_string().contains("repacked meanwhile");
                    // A patch gives way to a schema change that dropped or retyped a column
                    // it patches (the rewrite of rows carries them over it).
                    let patched_column_changed = writes_patches(&action_b)
                        && matches!(action_a, Action::Alter(..))
                        && e.to_string()
                            .contains("a patched column was dropped or widened");
                    let allowed = conflicts
                        || patched_column_changed
                        || (matches!(action_b, Action::Compact(..)) && rewrote)
                        || indexed_meanwhile
                        || patch_gives_way
                        || valued_meanwhile
                        || repacked_meanwhile;
                    assert!(
                        allowed,
                        "unexpected conflict for {action_b:?} after {action_a:?}: {e}"
                    );
                }
                Err(e) => panic!("{action_b:?} after {action_a:?} failed: {e}"),
                Ok(version) => {
                    assert!(!conflicts, "{action_b:?} should conflict with {action_a:?}");
                    apply(model, expect_b, version, table).await;
                    absorb_merges(model, table).await;
                }
            }
        }
        op => {
            let read = model.live.clone();
            let (action, expect) = plan(op, &read, model);
            let schema = Arc::new(table.latest().await.unwrap().schema().clone());
            let version = run(table, &action, &schema)
                .await
                .unwrap_or_else(|e| panic!("{action:?}: {e}"));
            apply(model, expect, version, table).await;
            absorb_merges(model, table).await;
        }
    }
}

/// `files`: every carried sequence goes to a `_rowids/` file, every fragment's per-row versions
/// to a `_lineage/` file, and the fragment list to
/// `_fragments/` segments of two; otherwise everything rides inline in the manifest.
/// `merge`: the fan-in of the handle's tiered merging of small fragments, if on.
/// `feed`: the table records change data from its creation.
/// `patch_share`: the table's patch share is 1 (`Model::patch_share`), else 0.
async fn run_case(
    ops: Vec<(Index, Op)>,
    fragment_rows: u64,
    files: bool,
    merge: Option<u32>,
    (feed, patch_share): (bool, bool),
) {
    let (table, store) = memory_table_with(TableOptions {
        external_stores: Some(crate::common::model_blob_stores()),
        max_rows_per_fragment: fragment_rows,
        layout: if files {
            ManifestLayout {
                row_ids_inline_limit: 0,
                lineage_inline_limit: 0,
                fragments_per_segment: 2,
            }
        } else {
            ManifestLayout {
                row_ids_inline_limit: usize::MAX,
                lineage_inline_limit: usize::MAX,
                fragments_per_segment: usize::MAX,
            }
        },
        merge: merge.map(|fan_in| TieredMerge { fan_in }),
        change_data_feed: feed,
        // Set either way: natal's default share would patch some updates of some schemas.
        patch_max_share: Some(if patch_share { 1.0 } else { 0.0 }),
        ..Default::default()
    })
    .await;
    let model = Model {
        live: State::new(),
        ever: HashSet::new(),
        moved: HashSet::new(),
        versions: vec![(1, State::new())],
        next_key: 0,
        extras: Extras::new(),
        schemas: HashMap::from([(1, Extras::new())]),
        names: 0,
        lineage: Lineage::new(),
        lineages: HashMap::from([(1, Lineage::new())]),
        patch_share,
    };
    let mut branches = Branches::new(table, model, store);
    for (at, op) in &ops {
        branches.step(at, op).await;
    }
    branches.check_all().await;
}

fn cases() -> u32 {
    std::env::var("NATAL_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn table_matches_model(
        ops in prop::collection::vec((any::<Index>(), op()), 1..24),
        fragment_rows in 2u64..9,
        files in any::<bool>(),
        merge in prop::option::weighted(0.6, 2u32..4),
        feed in any::<bool>(),
        patch_share in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(run_case(ops, fragment_rows, files, merge, (feed, patch_share)));
    }
}
