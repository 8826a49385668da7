//! The README's first snippet is the body of `examples/thirty_seconds.rs`,
//! which compiles and runs: a newcomer's first paste works.

#[test]
fn the_readme_snippet_is_the_example_that_compiles() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).expect("README");
    let example =
        std::fs::read_to_string(root.join("examples/thirty_seconds.rs")).expect("example");
    let marked: Vec<&str> = example
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("// README begin"))
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with("// README end"))
        .map(|l| l.strip_prefix("        ").unwrap_or(l))
        .collect();
    assert!(marked.len() > 20, "the markers frame the snippet");
    let snippet = readme
        .split("## A breaker in thirty seconds")
        .nth(1)
        .and_then(|s| s.split("```rust\n").nth(1))
        .and_then(|s| s.split("\n```").next())
        .expect("the README's thirty-seconds snippet");
    let body: Vec<&str> = snippet
        .lines()
        .skip_while(|l| !l.starts_with("let breaker"))
        .collect();
    assert_eq!(body, marked, "README snippet and example differ");
}
