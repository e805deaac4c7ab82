//! Adding natal's physical rule to a session that is already built, without changing what
//! else the session holds.
//!
//! DataFusion fixes a session's physical optimizer rules when its state is built, so
//! `register` rebuilds the state (`SessionStateBuilder::new_from_existing`). That rebuild
//! registers every function again from the values of the name → function maps, in hash-map
//! order, and a function's aliases are registered with it: a built-in whose alias is a name
//! the application gave a function of its own (DataFusion's `array_has`, alias
//! `array_contains`, beside datafusion-spark's `array_contains`) could win that name back.
//! So the functions are handed to the builder in an order that rebuilds each name's entry as
//! it was: a function whose name or alias another function holds now is registered before
//! that one.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::physical_optimizer::PhysicalOptimizerRule;

/// `state` rebuilt with `rules` as its last physical optimizer rules; its functions under
/// the same names, its session id, catalogs, options and other rules as they were.
pub(super) fn with_physical_rules(
    state: &SessionState,
    rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> SessionState {
    let mut builder = SessionStateBuilder::new_from_existing(state.clone())
        .with_session_id(state.session_id().to_string());
    for rule in rules {
        builder = builder.with_physical_optimizer_rule(rule);
    }
    *builder.scalar_functions() = Some(in_registration_order(state.scalar_functions(), |f| {
        names(f.name(), f.aliases())
    }));
    *builder.aggregate_functions() =
        Some(in_registration_order(state.aggregate_functions(), |f| {
            names(f.name(), f.aliases())
        }));
    *builder.window_functions() = Some(in_registration_order(state.window_functions(), |f| {
        names(f.name(), f.aliases())
    }));
    *builder.higher_order_functions() =
        Some(in_registration_order(state.higher_order_functions(), |f| {
            names(f.name(), f.aliases())
        }));
    builder.build()
}

fn names<'a>(name: &'a str, aliases: &'a [String]) -> Vec<&'a str> {
    std::iter::once(name)
        .chain(aliases.iter().map(String::as_str))
        .collect()
}

/// The functions of `registered` (name → function, as a session holds them; one function
/// under its name and each alias) in an order whose registration, each function under the
/// names `names_of` gives it, leaves every name of `registered` to the function it holds
/// now. A function that claims a name another holds goes before that one; where two claim
/// each other's names (no order rebuilds both) they keep name order.
fn in_registration_order<F: ?Sized>(
    registered: &HashMap<String, Arc<F>>,
    names_of: impl Fn(&F) -> Vec<&str>,
) -> Vec<Arc<F>> {
    // Distinct functions by identity, in name order so the result does not depend on the
    // map's hashing.
    let mut by_name: Vec<(&String, &Arc<F>)> = registered.iter().collect();
    by_name.sort_by(|a, b| a.0.cmp(b.0));
    let mut functions: Vec<Arc<F>> = Vec::new();
    let mut index: HashMap<*const F, usize> = HashMap::new();
    for (_, function) in by_name {
        index.entry(Arc::as_ptr(function)).or_insert_with(|| {
            functions.push(function.clone());
            functions.len() - 1
        });
    }
    // after[i]: the functions that must be registered after function i.
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); functions.len()];
    let mut waiting_on = vec![0usize; functions.len()];
    for (i, function) in functions.iter().enumerate() {
        for name in names_of(function) {
            let Some(holder) = registered.get(name) else {
                continue;
            };
            let holder = index[&Arc::as_ptr(holder)];
            if holder != i {
                after[i].push(holder);
                waiting_on[holder] += 1;
            }
        }
    }
    // Kahn's algorithm, always taking the first ready function in name order.
    let mut order = Vec::with_capacity(functions.len());
    let mut placed = vec![false; functions.len()];
    let mut ready: std::collections::BTreeSet<usize> = (0..functions.len())
        .filter(|&i| waiting_on[i] == 0)
        .collect();
    while order.len() < functions.len() {
        let next = match ready.pop_first() {
            Some(next) => next,
            // A cycle: the first function not yet placed breaks it.
            None => match placed.iter().position(|p| !p) {
                Some(next) => next,
                None => break,
            },
        };
        if placed[next] {
            continue;
        }
        placed[next] = true;
        order.push(functions[next].clone());
        for &later in &after[next] {
            waiting_on[later] = waiting_on[later].saturating_sub(1);
            if waiting_on[later] == 0 && !placed[later] {
                ready.insert(later);
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in function: a name and its aliases.
    struct Named(&'static str, Vec<String>);

    fn register(map: &mut HashMap<String, Arc<Named>>, f: &Arc<Named>) {
        for alias in &f.1 {
            map.insert(alias.clone(), f.clone());
        }
        map.insert(f.0.to_string(), f.clone());
    }

    fn rebuilt(map: &HashMap<String, Arc<Named>>) -> HashMap<String, Arc<Named>> {
        let mut out = HashMap::new();
        for f in in_registration_order(map, |f| names(f.0, &f.1)) {
            register(&mut out, &f);
        }
        out
    }

    fn same(a: &HashMap<String, Arc<Named>>, b: &HashMap<String, Arc<Named>>) -> bool {
        a.len() == b.len()
            && a.iter()
                .all(|(k, f)| b.get(k).is_some_and(|g| Arc::ptr_eq(f, g)))
    }

    #[test]
    fn a_function_under_a_built_ins_alias_keeps_that_name() {
        let has = Arc::new(Named("array_has", vec!["array_contains".into()]));
        let spark = Arc::new(Named("array_contains", vec![]));
        let other = Arc::new(Named("abs", vec![]));
        let mut map = HashMap::new();
        for f in [&has, &other, &spark] {
            register(&mut map, f);
        }
        assert!(Arc::ptr_eq(&map["array_contains"], &spark));
        let back = rebuilt(&map);
        assert!(same(&map, &back));
        // Registered the other way round, the built-in holds the name, and keeps it.
        let mut map = HashMap::new();
        for f in [&spark, &has] {
            register(&mut map, f);
        }
        assert!(Arc::ptr_eq(&map["array_contains"], &has));
        assert!(same(&map, &rebuilt(&map)));
    }

    #[test]
    fn chains_of_aliases_rebuild_as_registered() {
        // c takes b's alias, then a takes c's: every order of registration is rebuilt.
        let a = Arc::new(Named("a", vec!["x".into()]));
        let b = Arc::new(Named("b", vec!["y".into(), "x".into()]));
        let c = Arc::new(Named("c", vec!["y".into()]));
        for order in [[&a, &b, &c], [&b, &c, &a], [&c, &b, &a], [&b, &a, &c]] {
            let mut map = HashMap::new();
            for f in order {
                register(&mut map, f);
            }
            assert!(same(&map, &rebuilt(&map)));
        }
    }
}
