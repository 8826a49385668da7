//! Crashes: a `kill -9` of a run holding the lock leaves a usable state;
//! a killed probe's lease is reclaimed as a failed probe; a state file
//! truncated at every byte offset is reported and replaced, never a crash.

mod run_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use run_common::{Env, T0, args, sh, stderr};

#[test]
fn kill_9_while_holding_the_lock_leaves_a_usable_state() {
    let env = Env::new();
    let fail = sh("exit 1");
    let a = args(&["--breaker", "build"], &fail);
    for _ in 0..4 {
        assert_eq!(env.run(T0, &a).status.code(), Some(1));
    }
    let before = env.state_json("build");

    // This run stops between writing its temp file and the rename, with
    // the lock held, until killed.
    let mut stalled = env
        .cmd(T0, &a)
        .env("TRIPLINE_TEST_STALL_LOCKED", "1")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut err = BufReader::new(stalled.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("reads");
    assert!(line.contains("stalled holding the lock"), "{line}");
    stalled.kill().expect("SIGKILL");
    stalled.wait().expect("reaped");

    // The old state is intact and the lock is free: the next runs proceed.
    assert_eq!(env.state_json("build"), before);
    for _ in 0..6 {
        assert_eq!(env.run(T0, &a).status.code(), Some(1));
    }
    assert_eq!(env.state_json("build")["checkpoint"]["state"], "open");
}

#[test]
fn a_killed_probe_is_reclaimed_as_a_failed_probe() {
    let env = Env::new();
    let fail = sh("exit 1");
    for _ in 0..10 {
        env.run(T0, &args(&["--breaker", "db"], &fail));
    }
    let hang = sh("echo $$ > started.txt; exec sleep 600");
    let mut probe = env.spawn(T0 + 30, &args(&["--breaker", "db"], &hang));
    run_common::wait_until("the probe to start", || env.lines("started.txt") > 0);
    assert!(
        env.status(T0 + 30, "db")
            .contains("half-open (1 probes in flight)")
    );
    // kill -9 the tripline process (its child sleeps on, orphaned).
    Command::new("kill")
        .args(["-9", &probe.id().to_string()])
        .status()
        .expect("kill");
    probe.wait().expect("reaped");
    // The next run reclaims the lease as a failure: reopened.
    let out = env.run(T0 + 31, &args(&["--breaker", "db"], &sh("exit 0")));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let s = env.state_json("db");
    assert_eq!(s["checkpoint"]["state"], "open");
    assert_eq!(s["counters"]["reclaimed"], 1);
    // The orphaned command (`exec sleep`, the shell's pid) is ours to end.
    let orphan = std::fs::read_to_string(env.path("started.txt")).expect("pid");
    Command::new("kill")
        .args(["-9", orphan.trim()])
        .status()
        .expect("kill");
}

#[test]
fn a_state_file_truncated_at_every_byte_offset_is_handled() {
    let env = Env::new();
    let fail = sh("exit 1");
    let a = args(&["--breaker", "t"], &fail);
    for _ in 0..10 {
        env.run(T0, &a);
    }
    // A half-open round in the log makes the file richer.
    env.run(T0 + 30, &args(&["--breaker", "t"], &sh("exit 0")));
    let path = env.state_dir().join("t.json");
    let full = std::fs::read(&path).expect("state");
    assert!(full.len() > 200, "{}", full.len());
    for cut in 0..full.len() {
        std::fs::write(&path, &full[..cut]).expect("truncate");
        let out = env.run(T0 + 40, &args(&["--breaker", "t"], &sh("exit 0")));
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(75),
            "cut at {cut}: {code:?} {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("unreadable") && stderr(&out).contains("fresh breaker"),
            "cut at {cut}: {}",
            stderr(&out)
        );
        // And the replacement is a valid state again.
        assert_eq!(env.state_json("t")["version"], 1);
    }
}
