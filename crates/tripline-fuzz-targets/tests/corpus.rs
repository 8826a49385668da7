//! Replays the checked-in fuzz corpus through every target on stable: the
//! seeds (valid and hostile inputs) and every input a fuzzer once crashed
//! on, so a fixed crash stays fixed without a nightly toolchain.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::PathBuf;

use tripline_fuzz_targets::{TARGETS, Target};

fn corpus_dir(target: &Target) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target.name)
}

/// Runs every corpus file of `target`, naming the file that fails.
fn replay(name: &str) {
    let target = TARGETS
        .iter()
        .find(|t| t.name == name)
        .expect("a target of that name");
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 12,
        "{}: only {} corpus files; seed at least a dozen",
        dir.display(),
        files.len()
    );
    for file in files {
        let data = std::fs::read(&file).unwrap();
        let outcome = std::panic::catch_unwind(|| (target.run)(&data));
        assert!(outcome.is_ok(), "{name} fails on {}", file.display());
    }
}

#[test]
fn every_target_has_a_test_here_and_a_fuzz_target() {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/fuzz_targets");
    let tests = include_str!("corpus.rs");
    for target in TARGETS {
        assert!(
            tests.contains(&format!("replay(\"{}\")", target.name)),
            "{} is not replayed here",
            target.name
        );
        let file = fuzz.join(format!("{}.rs", target.name));
        assert!(file.exists(), "no cargo-fuzz target {}", file.display());
    }
}

#[test]
fn breaker_config_toml() {
    replay("breaker_config_toml");
}

#[test]
fn breaker_config_yaml() {
    replay("breaker_config_yaml");
}

#[test]
fn breaker_config_json() {
    replay("breaker_config_json");
}

#[test]
fn retry_config() {
    replay("retry_config");
}

#[test]
fn proxy_config() {
    replay("proxy_config");
}

#[test]
fn scenario() {
    replay("scenario");
}

#[test]
fn config_document() {
    replay("config_document");
}

#[test]
fn deadline_headers() {
    replay("deadline_headers");
}

#[test]
fn retry_after() {
    replay("retry_after");
}

#[test]
fn failback_log() {
    replay("failback_log");
}

#[test]
fn snapshot_restore() {
    replay("snapshot_restore");
}

#[test]
fn proxy_request() {
    replay("proxy_request");
}
