//! The checker on small source trees written to a temporary directory: a
//! tree that keeps the rules passes, and each kind of breach — through a
//! `use`, a `super::` path, a path expression, a macro call, a root
//! re-export — fails with a message naming the file, the import and the
//! rule.

use std::path::Path;

use crate::graph::{self, Graph};
use crate::rules::{self, Layers};

/// A crate with `src/` holding `files` (path relative to `src/`, text).
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
        std::fs::write(&path, text).expect("a source file");
    }
    dir
}

fn scan(dir: &Path, split: &[&str]) -> Graph {
    let split: Vec<String> = split.iter().map(|s| (*s).to_owned()).collect();
    graph::scan(&dir.join("src"), &split).expect("the tree parses")
}

/// The proxy's order, in miniature.
fn proxy_layers() -> Layers {
    let order = [&["proxy"][..], &["data", "control"], &["table"], &["http"]];
    Layers {
        order: order
            .iter()
            .map(|l| l.iter().map(|m| (*m).to_owned()).collect())
            .collect(),
        split: vec!["data".into(), "control".into()],
    }
}

/// A tree that keeps the miniature order; each test adds one file to it.
const CLEAN: &[(&str, &str)] = &[
    (
        "lib.rs",
        "mod control;\nmod data;\nmod http;\nmod proxy;\nmod table;\npub use table::Table;\n",
    ),
    (
        "proxy.rs",
        "use crate::{control::Control, data::Ctx};\nfn build(_: Ctx, _: Control) {}\n",
    ),
    (
        "data.rs",
        "mod server;\npub struct Ctx(crate::table::Table);\n",
    ),
    (
        "data/server.rs",
        "use super::super::http::Level;\nfn serve(_: &super::Ctx, _: Level) {}\n",
    ),
    ("control.rs", "mod reload;\npub struct Control;\n"),
    (
        "control/reload.rs",
        "fn publish() -> crate::Table { crate::table::Table }\n",
    ),
    (
        "table.rs",
        "pub struct Table;\nfn f() { let _ = format!(\"{}\", crate::http::NAME); }\n",
    ),
    (
        "http.rs",
        "pub struct Level;\npub const NAME: &str = \"x\";\n",
    ),
];

fn with(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files: Vec<(&str, &str)> = CLEAN
        .iter()
        .filter(|(p, _)| !extra.iter().any(|(e, _)| e == p))
        .copied()
        .collect();
    files.extend_from_slice(extra);
    tree(&files)
}

fn breaches(dir: &Path) -> Vec<String> {
    rules::breaches("mini", &scan(dir, &["data", "control"]), &proxy_layers())
}

#[test]
fn checker_passes_a_tree_that_keeps_the_order() {
    let dir = with(&[]);
    let graph = scan(dir.path(), &["data", "control"]);
    let edges: Vec<(String, String)> = graph
        .imports
        .iter()
        .map(|i| (i.from.clone(), i.to.clone()))
        .collect();
    for edge in [
        ("proxy", "control"),
        ("data::server", "http"),
        ("control::reload", "table"),
        ("table", "http"),
    ] {
        assert!(
            edges.contains(&(edge.0.into(), edge.1.into())),
            "{edge:?} found among {edges:?}"
        );
    }
    assert_eq!(breaches(dir.path()), Vec::<String>::new());
    assert!(rules::circles(&graph).is_empty());
}

#[test]
fn checker_refuses_the_data_side_importing_the_control_side() {
    let dir = with(&[(
        "data/server.rs",
        "use crate::control::Control;\nfn serve(_: Control) {}\n",
    )]);
    let found = breaches(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    let msg = &found[0];
    for part in [
        "src/data/server.rs:1",
        "`use crate::control::Control`",
        "data::server imports control",
        "never import each other",
    ] {
        assert!(msg.contains(part), "{part:?} in {msg}");
    }
}

#[test]
fn checker_refuses_a_lower_layer_reaching_up_by_any_path() {
    let cases = [
        (
            "http.rs",
            "pub struct Level;\npub const NAME: &str = \"x\";\nuse super::table::Table;\n",
            "`use super::table::Table`",
        ),
        (
            "http.rs",
            "pub struct Level;\npub const NAME: &str = \"x\";\nfn f() { crate::data::go(); }\n",
            "`crate::data::go`",
        ),
        (
            "http.rs",
            "pub struct Level;\npub const NAME: &str = \"x\";\nfn f() { dbg!(crate::proxy::X); }\n",
            "`crate::proxy::X (in a macro call)`",
        ),
        (
            "table.rs",
            "pub struct Table;\nfn f(_: crate::Table) {}\nfn g() -> crate::proxy::Running { todo!() }\n",
            "`crate::proxy::Running`",
        ),
    ];
    for (file, text, cited) in cases {
        let dir = with(&[(file, text)]);
        let found = breaches(dir.path());
        assert_eq!(found.len(), 1, "{file}: {text}\n{found:?}");
        let msg = &found[0];
        assert!(
            msg.contains(&format!("src/{file}:")) && msg.contains(cited) && msg.contains("upward"),
            "{msg}"
        );
    }
}

#[test]
fn checker_refuses_a_module_left_out_of_the_order() {
    let dir = with(&[("metrics.rs", "pub struct Counters;\n")]);
    let found = breaches(dir.path());
    assert!(
        found.iter().any(|m| m.contains("`metrics` is in no layer")),
        "{found:?}"
    );
}

#[test]
fn checker_finds_a_circle_and_the_imports_that_close_it() {
    let dir = with(&[
        (
            "http.rs",
            "pub struct Level;\npub const NAME: &str = \"x\";\nuse crate::Table;\n",
        ),
        (
            "lib.rs",
            "mod control;\nmod data;\nmod http;\nmod proxy;\nmod table;\npub use table::Table;\n",
        ),
    ]);
    let graph = scan(dir.path(), &[]);
    let circles = rules::circles(&graph);
    assert_eq!(circles.len(), 1, "{circles:?}");
    let (set, closing) = &circles[0];
    assert_eq!(
        set.iter().map(String::as_str).collect::<Vec<_>>(),
        ["http", "table"]
    );
    let msg = rules::describe_circle("mini", set, closing);
    for part in [
        "http, table",
        "http → table: src/http.rs:3: `use crate::Table`",
        "table → http: src/table.rs:2",
        "no circle",
    ] {
        assert!(msg.contains(part), "{part:?} in {msg}");
    }
}

#[test]
fn checker_ignores_doc_links_visibility_unit_tests_and_inline_modules_own_paths() {
    let dir = with(&[(
        "http.rs",
        "//! See [`Table`](crate::table::Table).\npub struct Level;\npub const NAME: &str = \"x\";\n\
         pub(in crate::http) fn f() {}\nmod inner { use super::Level; fn g(_: Level) {} }\n\
         #[cfg(test)]\nmod tests { use crate::proxy::build; }\n",
    )]);
    assert_eq!(breaches(dir.path()), Vec::<String>::new());
}
