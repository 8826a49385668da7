//! Which module imports which: every `.rs` file under a crate's `src/`,
//! parsed with `syn`, reduced to imports between top-level modules.
//!
//! An import is any path that names another module of the crate: a `use`
//! (`crate::`, `super::` or `self::` led, groups flattened), a path in an
//! expression, type or pattern (`crate::table::Table::build(..)`), and a
//! `crate::x` token run inside a macro call, whose body `syn` does not
//! parse. `super::` is resolved against the file's own module path (and
//! any inline `mod` it sits in), so `super::super::control` from
//! `data/forward.rs` counts as `control`. A path through a name the crate
//! root re-exports (`crate::Table` for `pub use table::Table`) counts as
//! the module the name comes from. Visibility paths (`pub(in crate::x)`)
//! and doc links are not imports, nor is what `#[cfg(test)]` items name:
//! a unit test may compose the whole crate, as the root does, to reach
//! the part it tests, and ships in no build.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

mod refs;

use refs::{Refs, flatten};

/// One import of another top-level module.
#[derive(Clone, Debug)]
pub struct Import {
    /// The importing file, relative to the crate's directory.
    pub file: PathBuf,
    /// Its line.
    pub line: usize,
    /// The importing module: `table`, or `data::forward` for a split module.
    pub from: String,
    /// The imported module, named the same way.
    pub to: String,
    /// The import as written, flattened: `use crate::control::reload::Reload`.
    pub text: String,
}

impl Import {
    /// The top-level module of `from`.
    pub fn source_top(&self) -> &str {
        top(&self.from)
    }

    /// The top-level module of `to`.
    pub fn target_top(&self) -> &str {
        top(&self.to)
    }

    /// Where, and what: `src/data/forward.rs:12: \`use crate::control::Control\``.
    pub fn cite(&self) -> String {
        format!("{}:{}: `{}`", self.file.display(), self.line, self.text)
    }
}

fn top(node: &str) -> &str {
    node.split("::").next().unwrap_or(node)
}

/// A crate's top-level modules and the imports between them.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every top-level module (a `src/x.rs` or `src/x/` beside `lib.rs`).
    pub modules: BTreeSet<String>,
    /// Imports that cross from one top-level module to another.
    pub imports: Vec<Import>,
}

/// Scans the crate whose `src/` is `src`; a module in `split` is named per
/// sub-module (`data::server`), the rest by their top-level name.
pub fn scan(src: &Path, split: &[String]) -> Result<Graph, String> {
    let crate_dir = src.parent().unwrap_or(src);
    let mut files = Vec::new();
    walk(src, &mut files)?;
    files.sort();
    let mut modules = BTreeSet::new();
    for file in &files {
        let rel = file.strip_prefix(src).map_err(|e| e.to_string())?;
        if let Some(first) = module_path(rel).first() {
            modules.insert(first.clone());
        }
    }
    let root = match files
        .iter()
        .find(|f| f.strip_prefix(src).ok() == Some(Path::new("lib.rs")))
    {
        Some(lib) => reexports(&parse(lib)?, &modules),
        None => BTreeMap::new(),
    };
    let mut graph = Graph {
        modules,
        imports: Vec::new(),
    };
    for file in &files {
        let rel = file.strip_prefix(src).map_err(|e| e.to_string())?;
        let path = module_path(rel);
        let Some(own) = path.first() else { continue }; // lib.rs, main.rs
        let mut refs = Refs::new(path.clone());
        refs.visit_file(&parse(file)?);
        for (segments, text, line) in refs.found {
            let Some(target) = resolve(&segments, &graph.modules, &root) else {
                continue;
            };
            if target.first() == Some(own) {
                continue;
            }
            graph.imports.push(Import {
                file: file.strip_prefix(crate_dir).unwrap_or(file).to_path_buf(),
                line,
                from: node(&path, src, split),
                to: node(&target, src, split),
                text,
            });
        }
    }
    Ok(graph)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn parse(file: &Path) -> Result<syn::File, String> {
    let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    syn::parse_file(&text).map_err(|e| format!("{}: does not parse: {e}", file.display()))
}

/// `data/forward/attempt.rs` → `[data, forward, attempt]`; `lib.rs` → `[]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut path: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = path.last_mut() {
        *last = last.trim_end_matches(".rs").to_owned();
    }
    if path.len() == 1 && (path[0] == "lib" || path[0] == "main") {
        path.clear();
    }
    path
}

/// The graph's name for a module path: its top level, or top and
/// sub-module when the top is split and the sub-module is a file.
fn node(path: &[String], src: &Path, split: &[String]) -> String {
    match path {
        [top, sub, ..] if split.contains(top) && is_module(src, top, sub) => {
            format!("{top}::{sub}")
        }
        [top, ..] => top.clone(),
        [] => String::new(),
    }
}

fn is_module(src: &Path, top: &str, sub: &str) -> bool {
    let dir = src.join(top);
    dir.join(format!("{sub}.rs")).is_file() || dir.join(sub).is_dir()
}

/// Names the crate root re-exports, by the top-level module they come from.
fn reexports(lib: &syn::File, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for item in &lib.items {
        if let syn::Item::Use(item) = item {
            let mut leaves = Vec::new();
            flatten(&item.tree, &mut Vec::new(), &mut leaves);
            for (path, name) in leaves {
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                let module = match path.as_slice() {
                    ["crate" | "self", m, ..] | [m, ..] => *m,
                    [] => continue,
                };
                if modules.contains(module) && name != "*" {
                    names.insert(name, module.to_owned());
                }
            }
        }
    }
    names
}

/// Resolves a `crate::`, `self::` or `super::` led path to the crate module
/// path it names, if it names a top-level module.
fn resolve(
    segments: &[String],
    modules: &BTreeSet<String>,
    root: &BTreeMap<String, String>,
) -> Option<Vec<String>> {
    let abs = segments.to_vec();
    let first = abs.first()?;
    if let Some(module) = root.get(first).filter(|_| !modules.contains(first)) {
        return Some(vec![module.clone()]);
    }
    modules.contains(first).then_some(abs)
}
