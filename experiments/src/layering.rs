//! The crate's layering, enforced: every module imports only from its own layer or
//! the layers below it, and no two modules import from each other, directly or
//! through others. Read from the source text (`crate::`, `super::` and `self::`
//! paths, serde's `with = "crate::…"` included); test code is not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Bottom first.
const LAYERS: &[&str] = &["base", "inputs", "scenario", "models", "resolved", "run", "verify", "optimize"];

/// Module path (`models::gateway::fixture`) → source text without its tests.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &[String], found: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                let mut inner = prefix.to_vec();
                inner.push(stem);
                walk(&path, &inner, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut name = prefix.to_vec();
                if stem != "mod" && stem != "lib" {
                    name.push(stem);
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                // Comments (doc links included) are not imports.
                let code: String =
                    code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
                found.insert(name.join("::"), code);
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[], &mut found);
    found
}

/// The modules `module`'s code refers to (the longest known prefix of each path).
fn references(module: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let own: Vec<&str> = if module.is_empty() { vec![] } else { module.split("::").collect() };
    let mut found = BTreeSet::new();
    for (anchor, base) in
        [("crate::", Vec::new()), ("super::", own[..own.len().saturating_sub(1)].to_vec()), ("self::", own.clone())]
    {
        for (at, _) in code.match_indices(anchor) {
            let preceded = code[..at].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            if preceded {
                continue;
            }
            let rest = &code[at + anchor.len()..];
            let path: Vec<&str> = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or_default()
                .split("::")
                .filter(|s| !s.is_empty())
                .collect();
            let mut full: Vec<&str> = base.clone();
            full.extend(path);
            while !full.is_empty() && !known.contains(&full.join("::")) {
                full.pop();
            }
            let target = full.join("::");
            if !target.is_empty() && target != module && !module.starts_with(&format!("{target}::")) {
                found.insert(target);
            }
        }
    }
    found
}

fn layer(module: &str) -> Option<usize> {
    let root = module.split("::").next().unwrap_or_default();
    LAYERS.iter().position(|l| *l == root)
}

#[test]
fn imports_point_down_the_layers_and_form_no_cycle() {
    let modules = modules();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let graph: BTreeMap<String, BTreeSet<String>> =
        modules.iter().map(|(name, code)| (name.clone(), references(name, code, &known))).collect();
    assert!(graph["run::pipeline"].contains("run::runner"), "the scanner sees imports: {:?}", graph["run::pipeline"]);
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            if let (Some(a), Some(b)) = (layer(from), layer(to)) {
                if b > a {
                    upward.push(format!("{from} → {to}"));
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up the layers {LAYERS:?}:\n{}", upward.join("\n"));

    // Depth-first search for a back edge.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, bool>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(node, false); // on the stack
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(false) => {
                    let start = stack.iter().position(|n| *n == next).unwrap();
                    let mut cycle: Vec<String> = stack[start..].iter().map(|s| s.to_string()).collect();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(true) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, state, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node, true);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node.as_str()) {
            if let Some(cycle) = visit(node, &graph, &mut state, &mut Vec::new()) {
                panic!("an import cycle: {}", cycle.join(" → "));
            }
        }
    }
}
