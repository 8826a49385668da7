//! The README's library snippet is `examples/thirty_seconds.rs` (below its
//! doc comment), which compiles and runs: a newcomer's first paste works,
//! and `cargo run --example thirty_seconds` prints what the README shows.
//! (The README's copy is also compiled and run as a doc-test by the
//! `tripline-book` crate.)

use std::path::Path;

#[test]
fn the_readme_snippet_is_the_example_that_compiles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).expect("README");
    let example =
        std::fs::read_to_string(root.join("examples/thirty_seconds.rs")).expect("example");
    let program: Vec<&str> = example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .collect();
    assert!(
        program.len() > 20,
        "the example has a program below its doc"
    );
    let snippet = readme
        .split("### A Rust library")
        .nth(1)
        .and_then(|s| s.split("```rust\n").nth(1))
        .and_then(|s| s.split("\n```").next())
        .expect("the README's library snippet");
    let snippet: Vec<&str> = snippet.lines().collect();
    assert_eq!(snippet, program, "README snippet and example differ");
}

#[test]
fn the_readme_shows_the_output_of_a_trip_and_a_recovery() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).expect("README");
    let example =
        std::fs::read_to_string(root.join("examples/thirty_seconds.rs")).expect("example");
    for line in [
        "payments: closed → open (failure rate 100% ≥ 50% over 5 calls; open for 5.0s)",
        "payments: half_open → closed (3 probes succeeded)",
    ] {
        assert!(readme.contains(line), "the README shows {line:?}");
        assert!(example.contains(line), "the example's doc shows {line:?}");
    }
}
