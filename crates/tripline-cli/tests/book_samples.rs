//! Every proxy config shown in the README and the book passes `tripline
//! check` as printed: a reader who copies one gets a file the proxy starts
//! with. A sample is marked by the line `<!-- check: proxy -->` right
//! before its ```` ```toml ```` block (fragments of a file, shown to
//! explain one section, are left unmarked).

#[path = "support/run.rs"]
mod support;

use std::path::{Path, PathBuf};

use support::{Dir, tripline};

const MARK: &str = "<!-- check: proxy -->";

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

/// The marked samples of `text`: (line of the block, its TOML).
fn marked_samples(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut samples = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != MARK {
            continue;
        }
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
        samples.push((i + 2, body.join("\n") + "\n"));
    }
    samples
}

#[test]
fn every_marked_proxy_config_passes_check() {
    let dir = Dir::new();
    let mut checked = 0;
    let mut in_readme = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        let name = page
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        for (line, toml) in marked_samples(&text) {
            let file = dir.write("proxy.toml", &toml);
            let out = tripline(["check", file.to_str().expect("path")]);
            assert_eq!(
                out.status, 0,
                "{name}:{line}: the proxy config does not pass `tripline check`:\n{}\n{toml}",
                out.stderr
            );
            checked += 1;
            if name == "README.md" {
                in_readme += 1;
            }
        }
    }
    // The quick starts (README and book) and the reference's samples.
    assert!(in_readme >= 1, "the README's proxy quick start is marked");
    assert!(checked >= 5, "only {checked} marked proxy configs found");
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
