//! Checks that stampede's tests run on stampede's own source (a dev-dependency only).
//!
//! [`assert_layered`] holds a crate's modules to a list of layers: Cargo keeps the
//! crates layered, this keeps the modules inside one crate layered the same way.
//! [`public_surface`] lists what a crate shows other crates, for a test that keeps it
//! as narrow as what they use.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Panics, naming every offending import, unless the crate whose sources are under
/// `src` is layered as `layers` says (bottom first; each layer names top-level
/// modules, `"models"` for `src/models.rs` or `src/models/`):
///
/// - every top-level module is in exactly one layer (a new module has to be placed);
/// - a module imports another top-level module only if that one is in a lower layer
///   (modules of one layer do not import each other);
/// - no two modules import each other, directly or through others, at any depth
///   (inside one top-level module too).
///
/// Imports are read from the source text: `crate::`, `super::` and `self::` paths,
/// serde's `with = "crate::…"` included. Comments and test items (`#[cfg(test)]`
/// followed by a module or function) do not count; the rest of a file after a test
/// item does. Returns how many imports between modules were read, for the caller to
/// check that the scanner saw its crate.
pub fn assert_layered(src: &Path, layers: &[&[&str]]) -> usize {
    let modules = modules(src);
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let graph: BTreeMap<String, BTreeSet<String>> =
        modules.iter().map(|(name, code)| (name.clone(), references(name, code, &known))).collect();
    let imports: usize = graph.values().map(BTreeSet::len).sum();

    let layer_of = |module: &str| {
        let root = module.split("::").next().unwrap_or_default();
        layers.iter().position(|layer| layer.contains(&root))
    };
    let mut problems = Vec::new();
    for root in modules.keys().filter(|m| !m.is_empty() && !m.contains("::")) {
        if layer_of(root).is_none() && !is_test_only(src, root) {
            problems.push(format!("{root} is in no layer: add it to the layer list"));
        }
    }
    for (from, targets) in &graph {
        let Some(own) = layer_of(from) else { continue };
        for to in targets {
            let same_root = from.split("::").next() == to.split("::").next();
            if let Some(theirs) = layer_of(to) {
                if !same_root && theirs >= own {
                    problems.push(format!("{from} (layer {own}) imports {to} (layer {theirs})"));
                }
            }
        }
    }
    for cycle in import_cycles(&graph) {
        problems.push(format!("modules that import each other: {}", cycle.join(", ")));
    }
    assert!(problems.is_empty(), "{} is not layered as {layers:?}:\n{}", src.display(), problems.join("\n"));
    imports
}

/// A crate's public surface, read from its source: the modules other crates can name
/// (reached from `lib.rs` through `pub mod` declarations only — a `pub(crate) mod`
/// and everything under it is hidden) and, in those, the public items: each `pub`
/// function, method, type, trait, constant, static, re-export and field (`pub name:`),
/// test items left out.
#[derive(Debug)]
pub struct PublicSurface {
    /// The public modules' paths (`models::gateway`; `""` is the crate root), sorted.
    pub modules: Vec<String>,
    /// Public items in those modules.
    pub items: usize,
}

/// Reads the public surface of the crate whose sources are under `src`.
pub fn public_surface(src: &Path) -> PublicSurface {
    let sources = modules(src);
    let mut modules = vec![String::new()];
    let mut next = 0;
    while next < modules.len() {
        let module = modules[next].clone();
        next += 1;
        let code = sources.get(&module).map(String::as_str).unwrap_or_default();
        for line in code.lines() {
            let Some(name) = line.trim_start().strip_prefix("pub mod ").and_then(|rest| rest.strip_suffix(';')) else {
                continue;
            };
            let child = if module.is_empty() { name.to_string() } else { format!("{module}::{name}") };
            assert!(sources.contains_key(&child), "{}: `pub mod {name};` has no file", src.display());
            modules.push(child);
        }
    }
    modules.sort();
    let items = modules.iter().map(|module| public_items(&sources[module])).sum();
    PublicSurface { modules, items }
}

/// The `pub` items declared in `code` (test items already cut out); `const fn` counts
/// as a `const `.
fn public_items(code: &str) -> usize {
    const KINDS: &[&str] =
        &["fn ", "async fn ", "unsafe fn ", "struct ", "enum ", "const ", "static ", "type ", "trait ", "use ", "mod "];
    code.lines()
        .filter_map(|line| line.trim_start().strip_prefix("pub "))
        .filter(|rest| {
            let field = rest.split_once(':').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            field || KINDS.iter().any(|kind| rest.starts_with(kind))
        })
        .count()
}

/// A module the crate root declares only for tests (`#[cfg(test)]` or
/// `#[cfg(all(test, …))]` on the line before `mod tests;`).
fn is_test_only(src: &Path, root: &str) -> bool {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let lines: Vec<&str> = lib.lines().collect();
    lines.windows(2).any(|pair| {
        let attribute = pair[0].trim();
        pair[1].trim() == format!("mod {root};") && attribute.starts_with("#[cfg(") && attribute.contains("test")
    })
}

/// Module path (`models::gateway::fixture`, `""` for the crate root) → its code.
fn modules(src: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &[String], found: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let stem = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
            if path.is_dir() {
                let mut inner = prefix.to_vec();
                inner.push(stem);
                walk(&path, &inner, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut name = prefix.to_vec();
                if stem != "mod" && stem != "lib" && stem != "main" {
                    name.push(stem);
                }
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                found.insert(name.join("::"), without_tests(&without_comments(&text)));
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(src, &[], &mut found);
    found
}

fn without_comments(text: &str) -> String {
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The code with every `#[cfg(test)]` item cut out: the attribute, then the item up
/// to its `;` or the brace that closes its block.
fn without_tests(code: &str) -> String {
    const TEST: &str = "#[cfg(test)]";
    let mut kept = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(TEST) {
        kept.push_str(&rest[..at]);
        let item = &rest[at + TEST.len()..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    kept.push_str(rest);
    kept
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
            let prefix_len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            let mut full: Vec<&str> = base.clone();
            full.extend(rest[..prefix_len].split("::").filter(|s| !s.is_empty()));
            let mut paths = vec![full.clone()];
            // `use crate::x::{a::Y, b}`: each member of the group (one level deep).
            if let Some(group) = rest[prefix_len..].strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                paths = group
                    .split(',')
                    .map(|member| {
                        let mut path = full.clone();
                        path.extend(member.trim().split("::").filter(|s| !s.is_empty() && !s.contains('{')));
                        path
                    })
                    .collect();
            }
            for mut path in paths {
                while !path.is_empty() && !known.contains(&path.join("::")) {
                    path.pop();
                }
                let target = path.join("::");
                if !target.is_empty() && target != module && !module.starts_with(&format!("{target}::")) {
                    found.insert(target);
                }
            }
        }
    }
    found
}

/// Every set of modules that import each other, directly or through others (the
/// strongly connected components with more than one module; Tarjan's algorithm).
fn import_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Search<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Search<'a> {
        fn visit(&mut self, node: &'a str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next.as_str()]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next.as_str()) {
                    let low = self.low[node].min(self.index[next.as_str()]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let start = self.stack.iter().position(|n| *n == node).expect("on the stack");
                let component: Vec<String> = self.stack.drain(start..).map(str::to_string).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut search =
        Search { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for node in graph.keys() {
        if !search.index.contains_key(node.as_str()) {
            search.visit(node);
        }
    }
    search.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn failure(files: &[(&str, &str)], layers: &[&[&str]]) -> Option<String> {
        let dir = crate_with(files);
        let result = std::panic::catch_unwind(|| {
            assert_layered(dir.path(), layers);
        });
        result.err().map(|e| e.downcast_ref::<String>().cloned().unwrap_or_default())
    }

    const LIB: &str = "pub mod low;\npub mod high;\n#[cfg(test)]\nmod tests;\n";

    #[test]
    fn downward_imports_pass_and_upward_ones_are_named() {
        let good = [("lib.rs", LIB), ("low.rs", "pub struct A;"), ("high.rs", "use crate::low::A;"), ("tests.rs", "")];
        assert_eq!(failure(&good, &[&["low"], &["high"]]), None);
        let bad = [("lib.rs", LIB), ("low.rs", "use crate::high::B;"), ("high.rs", "pub struct B;"), ("tests.rs", "")];
        let message = failure(&bad, &[&["low"], &["high"]]).expect("an upward import fails");
        assert!(message.contains("low (layer 0) imports high (layer 1)"), "{message}");
    }

    #[test]
    fn a_module_in_no_layer_and_a_cycle_inside_a_module_fail() {
        let files = [("lib.rs", LIB), ("low.rs", ""), ("high.rs", ""), ("tests.rs", "")];
        let message = failure(&files, &[&["low"]]).expect("high has no layer");
        assert!(message.contains("high is in no layer"), "{message}");
        let files = [
            ("lib.rs", "pub mod low;\n"),
            ("low/mod.rs", "pub mod a;\npub mod b;"),
            ("low/a.rs", "use super::b::X;"),
            ("low/b.rs", "use crate::low::{a::Y};"),
        ];
        let message = failure(&files, &[&["low"]]).expect("a and b import each other");
        assert!(message.contains("modules that import each other: low::a, low::b"), "{message}");
    }

    #[test]
    fn test_items_do_not_count_but_the_code_after_them_does() {
        let files = [
            ("lib.rs", LIB),
            ("low.rs", "#[cfg(test)]\nmod t { use crate::high::B; }\nuse crate::high::C;"),
            ("high.rs", ""),
            ("tests.rs", ""),
        ];
        let message = failure(&files, &[&["low"], &["high"]]).expect("the import after the test module counts");
        assert_eq!(message.matches("imports high").count(), 1, "{message}");
        let only_test = [
            ("lib.rs", LIB),
            ("low.rs", "#[cfg(test)]\nmod t { use crate::high::B; }"),
            ("high.rs", ""),
            ("tests.rs", ""),
        ];
        assert_eq!(failure(&only_test, &[&["low"], &["high"]]), None);
    }
}
