//! Runs the real `tripline` binary on scenario files written to a temp dir.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of the binary produced.
pub struct Output {
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    pub fn text(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("utf-8 stdout")
    }

    pub fn json(&self) -> serde_json::Value {
        assert_eq!(self.status, 0, "stderr: {}", self.stderr);
        serde_json::from_slice(&self.stdout).expect("stdout is JSON")
    }
}

/// A temp dir holding scenario files.
pub struct Dir(tempfile::TempDir);

impl Dir {
    pub fn new() -> Dir {
        Dir(tempfile::tempdir().expect("temp dir"))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Writes `src` as `name` and returns its path.
    pub fn write(&self, name: &str, src: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, src).expect("write scenario");
        p
    }
}

/// Runs `tripline ARGS...`.
pub fn tripline<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(args)
        .output()
        .expect("run tripline");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The bundled scenario `name` in the repository's `scenarios/`.
pub fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}
