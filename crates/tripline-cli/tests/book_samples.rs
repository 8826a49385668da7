//! Every config shown whole in the README and the book passes `tripline
//! check` as printed: a reader who copies one gets a file tripline takes.
//! A sample is marked by a line right before its ```` ```toml ```` block:
//! `<!-- check: proxy -->` (a proxy config) and `<!-- check: breaker -->`
//! (a breaker config), both checked by `tripline check`, and
//! `<!-- check: document -->` (a pushed config document), checked by
//! `tripline config check`. Fragments of a file, shown to explain one
//! section, are left unmarked.

#[path = "support/run.rs"]
mod support;

use std::path::{Path, PathBuf};

use support::{Dir, tripline};

/// The marks, each with the file name its sample is written to and the
/// command that checks it.
const MARKS: [(&str, &str, &[&str]); 3] = [
    ("<!-- check: proxy -->", "proxy.toml", &["check"]),
    ("<!-- check: breaker -->", "breaker.toml", &["check"]),
    (
        "<!-- check: document -->",
        "document.toml",
        &["config", "check"],
    ),
];

/// A marked sample: the line of its block, its TOML, and its mark's index
/// in [`MARKS`].
struct Sample {
    line: usize,
    toml: String,
    kind: usize,
}

/// The README and every chapter of the book.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![root.join("README.md")];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root.join("docs/src"))
        .expect("docs/src")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    pages.extend(chapters);
    pages
}

/// The marked samples of `text`.
fn marked_samples(text: &str) -> Vec<Sample> {
    let lines: Vec<&str> = text.lines().collect();
    let mut samples = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(kind) = MARKS.iter().position(|(mark, _, _)| line.trim() == *mark) else {
            continue;
        };
        let fence = lines.get(i + 1).map(|l| l.trim());
        assert_eq!(
            fence,
            Some("```toml"),
            "line {}: the mark must stand right before a ```toml block",
            i + 1
        );
        let body: Vec<&str> = lines[i + 2..]
            .iter()
            .take_while(|l| l.trim() != "```")
            .copied()
            .collect();
        samples.push(Sample {
            line: i + 2,
            toml: body.join("\n") + "\n",
            kind,
        });
    }
    samples
}

#[test]
fn every_marked_config_passes_check() {
    let dir = Dir::new();
    let mut checked = [0; MARKS.len()];
    let mut in_readme = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        let name = page
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        for Sample { line, toml, kind } in marked_samples(&text) {
            let (mark, file_name, command) = MARKS[kind];
            let file = dir.write(file_name, &toml);
            let args: Vec<&str> = command
                .iter()
                .copied()
                .chain([file.to_str().expect("path")])
                .collect();
            let out = tripline(args);
            assert_eq!(
                out.status,
                0,
                "{name}:{line}: the sample marked {mark} does not pass `tripline {}`:\n{}\n{toml}",
                command.join(" "),
                out.stderr
            );
            checked[kind] += 1;
            if name == "README.md" && kind == 0 {
                in_readme += 1;
            }
        }
    }
    // The quick starts (README and book), the reference's samples, and
    // the breaker and document samples of the book.
    assert!(in_readme >= 1, "the README's proxy quick start is marked");
    assert!(
        checked[0] >= 5,
        "only {} marked proxy configs found",
        checked[0]
    );
    assert!(
        checked[1] >= 2,
        "only {} marked breaker configs found",
        checked[1]
    );
    assert!(
        checked[2] >= 2,
        "only {} marked documents found",
        checked[2]
    );
}

#[test]
fn a_sample_that_names_a_missing_file_would_fail() {
    // The check is real: the sample the README once showed (a TLS cluster
    // whose CA file nobody has) is refused, naming the file.
    let dir = Dir::new();
    let file = dir.write(
        "proxy.toml",
        "[[listeners]]\naddress = \"127.0.0.1:8080\"\n\n[[routes]]\nname = \"p\"\ncluster = \"payments\"\n\n\
         [clusters.payments]\nendpoints = [\"payments.internal:443\"]\n\
         tls = { ca = \"internal-ca.pem\", alpn = [\"h2\", \"http/1.1\"] }\n",
    );
    let out = tripline(["check", file.to_str().expect("path")]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("internal-ca.pem"), "{}", out.stderr);
}
