//! The two rules `layout.toml` states, checked on a [`Graph`]: no circle
//! between top-level modules, and a layered crate's imports go down only.
//! Every breach is one message naming the file, the import and the rule.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::graph::{Graph, Import};

/// `layout.toml`: which crates must be free of circles, and the layers of
/// the crates that have them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Library crates checked for circles between top-level modules.
    pub acyclic: Vec<String>,
    /// Circles known and being undone, per crate: a circle whose modules
    /// are all within one listed set is reported, not failed.
    #[serde(default)]
    pub known_circles: BTreeMap<String, Vec<Vec<String>>>,
    /// Layered crates by name.
    #[serde(default)]
    pub layers: BTreeMap<String, Layers>,
}

/// One crate's layers, from the top.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layers {
    /// Top-level modules by layer, the top first: a module imports only
    /// modules of later layers, never one of its own layer.
    pub order: Vec<Vec<String>>,
    /// Modules whose sub-modules are named apart in messages.
    #[serde(default)]
    pub split: Vec<String>,
}

/// The circles between `graph`'s top-level modules (strongly connected
/// sets of two or more), each with the imports that close it.
pub fn circles(graph: &Graph) -> Vec<(BTreeSet<String>, Vec<&Import>)> {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for import in &graph.imports {
        edges
            .entry(import.source_top())
            .or_default()
            .insert(import.target_top());
    }
    let reach = |from: &str| {
        let mut seen = BTreeSet::from([from.to_owned()]);
        let mut stack = vec![from.to_owned()];
        while let Some(m) = stack.pop() {
            for next in edges.get(m.as_str()).into_iter().flatten() {
                if seen.insert((*next).to_owned()) {
                    stack.push((*next).to_owned());
                }
            }
        }
        seen
    };
    // A few dozen modules: reachability from each is cheap and plain.
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        graph.modules.iter().map(|m| (m, reach(m))).collect();
    let mut out: Vec<(BTreeSet<String>, Vec<&Import>)> = Vec::new();
    for m in &graph.modules {
        let set: BTreeSet<String> = reachable[m]
            .iter()
            .filter(|other| reachable.get(other).is_some_and(|r| r.contains(m)))
            .cloned()
            .collect();
        if set.len() > 1 && !out.iter().any(|(s, _)| *s == set) {
            let mut closing: BTreeMap<(&str, &str), &Import> = BTreeMap::new();
            for import in &graph.imports {
                if set.contains(import.source_top()) && set.contains(import.target_top()) {
                    closing
                        .entry((import.source_top(), import.target_top()))
                        .or_insert(import);
                }
            }
            out.push((set, closing.into_values().collect()));
        }
    }
    out
}

/// One message per circle: its modules, and per pair one import closing it.
pub fn describe_circle(krate: &str, set: &BTreeSet<String>, closing: &[&Import]) -> String {
    let mut msg = format!(
        "{krate}: the top-level modules {} import each other in a circle (rule: no circle \
         between a crate's top-level modules; move what both need into a module below both, \
         or invert the dependency):",
        set.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    for import in closing {
        msg += &format!(
            "\n    {} → {}: {}",
            import.source_top(),
            import.target_top(),
            import.cite()
        );
    }
    msg
}

/// Every import against `layers`, and every module the order leaves out.
pub fn breaches(krate: &str, graph: &Graph, layers: &Layers) -> Vec<String> {
    let layer_of: BTreeMap<&str, usize> = layers
        .order
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |m| (m.as_str(), i)))
        .collect();
    let mut out: Vec<String> = graph
        .modules
        .iter()
        .filter(|m| !layer_of.contains_key(m.as_str()))
        .map(|m| {
            format!(
                "{krate}: the top-level module `{m}` is in no layer of layout.toml \
                 (rule: every module has a place in the order); add it to `order`"
            )
        })
        .collect();
    for import in &graph.imports {
        let (Some(&from), Some(&to)) = (
            layer_of.get(import.source_top()),
            layer_of.get(import.target_top()),
        ) else {
            continue;
        };
        if to > from {
            continue;
        }
        let rule = if to == from {
            format!(
                "modules of one layer ({}) never import each other",
                layers.order[from].join(", ")
            )
        } else {
            let below: Vec<String> = layers.order[from + 1..].iter().flatten().cloned().collect();
            match below.is_empty() {
                true => format!(
                    "`{}` is the bottom layer and imports no module",
                    import.source_top()
                ),
                false => format!(
                    "`{}` imports only {}",
                    import.source_top(),
                    below.join(", ")
                ),
            }
        };
        let way = if to == from {
            "across its layer"
        } else {
            "upward"
        };
        out.push(format!(
            "{}: {} imports {} {way} (rule, layout.toml for {krate}: {rule})",
            import.cite(),
            import.from,
            import.to
        ));
    }
    out
}
