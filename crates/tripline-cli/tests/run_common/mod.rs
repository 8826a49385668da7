//! Helpers for the `tripline run` tests: a state dir, the real binary,
//! and a clock override (`TRIPLINE_NOW`) so no test sleeps.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub const T0: u64 = 1_800_000_000;

pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.path("state")
    }

    /// `tripline run <args>` at Unix time `now`, state in this env.
    pub fn cmd(&self, now: u64, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tripline"));
        c.arg("run")
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(args)
            .env("TRIPLINE_NOW", now.to_string())
            .current_dir(self.dir.path());
        c
    }

    pub fn run(&self, now: u64, args: &[&str]) -> Output {
        self.cmd(now, args).output().expect("tripline runs")
    }

    pub fn spawn(&self, now: u64, args: &[&str]) -> Child {
        self.cmd(now, args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tripline starts")
    }

    /// Lines in a marker file the commands append to (0 if absent).
    pub fn lines(&self, name: &str) -> usize {
        std::fs::read_to_string(self.path(name)).map_or(0, |t| t.lines().count())
    }

    pub fn status(&self, now: u64, name: &str) -> String {
        let out = self.run(now, &["--status", name]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        String::from_utf8(out.stdout).expect("utf-8")
    }

    pub fn state_json(&self, name: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.state_dir().join(format!("{name}.json")))
            .expect("state file");
        serde_json::from_str(&text).expect("state is JSON")
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `sh -c script`, for the command part.
pub fn sh(script: &str) -> Vec<String> {
    vec!["--".into(), "sh".into(), "-c".into(), script.into()]
}

pub fn args<'a>(head: &[&'a str], tail: &'a [String]) -> Vec<&'a str> {
    head.iter()
        .copied()
        .chain(tail.iter().map(String::as_str))
        .collect()
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// Waits (bounded, 60 s) for a condition another process brings about: a
/// synchronisation with a real child process, not a timing assertion —
/// the breaker's own time is `TRIPLINE_NOW`.
#[allow(clippy::disallowed_methods)] // polling a real process needs real time
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
