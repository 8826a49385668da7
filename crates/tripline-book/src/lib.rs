//! The README's and the book's Rust snippets, compiled and run by
//! `cargo test --doc -p tripline-book`: a snippet that stops compiling
//! (an API renamed, an import path moved) fails the test suite, so what a
//! newcomer copies works as shown. Each page is included whole as the doc
//! comment of an item that exists only under `cfg(doctest)`; its `rust`
//! blocks become doc-tests, every other block (`toml`, `sh`, `text`) is
//! left alone. Pages listed here are the pages that have Rust in them; a
//! test in this crate checks no page with a `rust` block is left out.

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct Readme;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/breaker.md")]
pub struct Breaker;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/policies.md")]
pub struct Policies;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/clusters.md")]
pub struct Clusters;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/operating.md")]
pub struct Operating;

/// The pages included above, relative to the repository root.
pub const PAGES_WITH_RUST: [&str; 5] = [
    "README.md",
    "docs/src/breaker.md",
    "docs/src/policies.md",
    "docs/src/clusters.md",
    "docs/src/operating.md",
];

#[cfg(test)]
mod tests {
    use super::PAGES_WITH_RUST;
    use std::path::Path;

    /// The README stays a front door: short, the two set-up commands first,
    /// and every audience's path ending in a link into the book.
    #[test]
    fn the_readme_is_a_front_door() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
        let lines = readme.lines().count();
        assert!(
            lines <= 250,
            "the README has {lines} lines; move detail into the book"
        );
        let try_it = readme
            .split("## Try it")
            .nth(1)
            .and_then(|s| s.split("```sh\n").nth(1))
            .and_then(|s| s.split("\n```").next())
            .expect("a Try it section with a sh block");
        let commands: Vec<&str> = try_it.lines().collect();
        assert_eq!(commands.len(), 2, "{commands:?}");
        assert!(commands[0].contains("demo --live"), "{}", commands[0]);
        assert_eq!(commands[1], "./scripts/test");
        let paths = readme
            .split("## Pick your path")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("the audiences' paths");
        for path in paths.split("\n### ").skip(1) {
            let title = path.lines().next().unwrap_or_default();
            if title == "Python" {
                assert!(path.contains("crates/tripline-py"), "{path}");
                continue;
            }
            assert!(
                path.contains("](docs/src/"),
                "{title}: no link into the book"
            );
        }
    }

    /// Every page of the book with a `rust` block is compiled above: a new
    /// chapter with code cannot slip past the doc-tests.
    #[test]
    fn every_page_with_rust_is_compiled() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut pages = vec![root.join("README.md")];
        let src = root.join("docs/src");
        for entry in std::fs::read_dir(&src).expect("docs/src") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
        for page in pages {
            let text = std::fs::read_to_string(&page).expect("page");
            let has_rust = text.lines().any(|l| l.trim_start().starts_with("```rust"));
            let relative = page
                .strip_prefix(&root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            if has_rust {
                assert!(
                    PAGES_WITH_RUST.contains(&relative.as_str()),
                    "{relative} has Rust snippets: include it in crates/tripline-book/src/lib.rs"
                );
            }
            // rustdoc runs a fence without a language as Rust: every block
            // says what it is.
            let mut inside = false;
            for (i, line) in text.lines().enumerate() {
                let l = line.trim_start();
                if let Some(tag) = l.strip_prefix("```") {
                    if !inside {
                        assert!(
                            !tag.trim().is_empty(),
                            "{relative}:{}: a code block without a language",
                            i + 1
                        );
                    }
                    inside = !inside;
                }
            }
        }
    }
}
