//! The model test's clones: a case's table and the clones made of it, each a branch with
//! its own model that operations pick at random. After a cleanup every branch is read
//! whole again: a shallow clone whose source removed a file it reads must say so (the
//! documented rule), and is left alone from then on.

use std::collections::HashMap;
use std::sync::Arc;

use natal::Table;
use proptest::sample::Index;

use crate::model::{step, Model, Op};
use crate::model_check::check;

/// The table and its clones, each with its model and whether it is a shallow clone (which
/// may read its source's files).
pub(crate) struct Branches {
    branches: Vec<(Table, Model, bool)>,
    clones: u32,
    store: Arc<dyn object_store::ObjectStore>,
}

impl Branches {
    pub(crate) fn new(
        table: Table,
        model: Model,
        store: Arc<dyn object_store::ObjectStore>,
    ) -> Self {
        Self {
            branches: vec![(table, model, false)],
            clones: 0,
            store,
        }
    }

    /// Runs `op` on the branch `at` picks, and checks it.
    pub(crate) async fn step(&mut self, at: &Index, op: &Op) {
        let picked = at.index(self.branches.len());
        match op {
            // At most two clones a case: each is checked after every step it takes.
            Op::Clone(version, deep) if self.clones < 2 => {
                self.clones += 1;
                let (table, model, _) = &self.branches[picked];
                let root = format!("c{}", self.clones);
                let (clone, branch) =
                    clone_branch((version, *deep), model, table, (&self.store, &root)).await;
                check(&branch, &clone).await;
                self.branches.push((clone, branch, !*deep));
            }
            Op::Clone(..) => {}
            op => {
                let (table, model, _) = &mut self.branches[picked];
                step(op, model, table).await;
                check(model, table).await;
            }
        }
        if matches!(op, Op::Cleanup { .. }) {
            self.drop_broken_clones().await;
        }
    }

    /// The documented rule: a shallow clone reads its source's files while the source
    /// keeps them. Every branch still reads each version it keeps, or is a shallow clone
    /// that says a file of its source is gone; such a clone is left alone from here.
    async fn drop_broken_clones(&mut self) {
        let mut kept = Vec::new();
        for (table, model, shallow) in std::mem::take(&mut self.branches) {
            // A fresh handle, as a new process would read it: a file the handle cached
            // before the source's cleanup removed it must not hide its loss.
            let (store, root) = (table.store().underlying(), table.store().root());
            let fresh = Table::open_with(store.clone(), root.clone(), table.options().clone());
            match readable(&model, &fresh).await {
                Ok(()) => kept.push((table, model, shallow)),
                Err(e) => {
                    assert!(
                        shallow,
                        "a table that is no shallow clone does not read: {e}"
                    );
                    assert!(e.contains("shallow-cloned"), "{e}");
                }
            }
        }
        self.branches = kept;
    }

    /// Checks every branch against its model.
    pub(crate) async fn check_all(&self) {
        for (table, model, _) in &self.branches {
            check(model, table).await;
        }
    }
}

/// A clone of `table` (deep, or shallow) at one of `model`'s retained versions, at `root`,
/// with its own model: that version's rows, ids and columns.
async fn clone_branch(
    (at, deep): (&Index, bool),
    model: &Model,
    table: &Table,
    (store, root): (&Arc<dyn object_store::ObjectStore>, &str),
) -> (Table, Model) {
    let (version, state) = model.versions[at.index(model.versions.len())].clone();
    let target = natal::CloneTarget {
        store: store.clone(),
        root: root.into(),
        options: table.options().clone(),
        source_name: "t".into(),
    };
    let (clone, committed) = match deep {
        true => table.deep_clone(version, target).await.unwrap(),
        false => table.shallow_clone(version, target).await.unwrap(),
    };
    assert_eq!(committed.version, version);
    // Ids the clone's lineage held (those born in the source after `version` may be born
    // again in the clone: another table).
    let ever = (model.versions.iter())
        .filter(|(v, _)| *v <= version)
        .flat_map(|(_, s)| s.keys().copied())
        .collect();
    let extras = model.schemas[&version].clone();
    let lineage = model.lineages[&version].clone();
    let branch = Model {
        live: state.clone(),
        ever,
        moved: model.moved.clone(),
        versions: vec![(version, state)],
        next_key: model.next_key,
        extras: extras.clone(),
        schemas: HashMap::from([(version, extras)]),
        names: model.names,
        lineages: HashMap::from([(version, lineage.clone())]),
        lineage,
        patch_share: model.patch_share,
    };
    (clone, branch)
}

/// The model check of `table` (every retained version, takes, resolves, index probes),
/// with every retained version's relocation view and index probes too (what a restore
/// of it would read), or why a read in it failed: a panic's message.
async fn readable(model: &Model, table: &Table) -> Result<(), String> {
    use futures::FutureExt;
    let every_version = async {
        check(model, table).await;
        for (version, state) in &model.versions {
            let snapshot = table.at_version(*version).await.unwrap();
            snapshot.relocation_view().await.unwrap();
            crate::model_index::check_index(state, &snapshot).await;
        }
    };
    let checked = std::panic::AssertUnwindSafe(every_version).catch_unwind();
    checked.await.map_err(|panic| {
        (panic.downcast_ref::<String>().cloned())
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}
