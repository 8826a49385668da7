//! The command's own behaviour: exit codes propagated, `--fail-on-exit`,
//! `--timeout`, forwarded signals, operator controls and the open exit code.

mod run_common;

use std::process::Command;

use run_common::{Env, T0, args, sh, stderr};

#[test]
fn exit_codes_propagate_and_only_listed_codes_count_as_failures() {
    let env = Env::new();
    let out = env.run(
        T0,
        &args(&["--breaker", "e", "--fail-on-exit", "1,2"], &sh("exit 3")),
    );
    assert_eq!(out.status.code(), Some(3));
    let out = env.run(
        T0,
        &args(&["--breaker", "e", "--fail-on-exit", "1,2"], &sh("exit 2")),
    );
    assert_eq!(out.status.code(), Some(2));
    let c = &env.state_json("e")["counters"];
    assert_eq!(
        (c["ignored"].as_u64(), c["failed"].as_u64()),
        (Some(1), Some(1))
    );
    // stdout passes through.
    let out = env.run(T0, &["--breaker", "e", "--", "echo", "hello"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    // A command that cannot start: 127, and no evidence either way.
    let out = env.run(T0, &["--breaker", "e", "--", "/nonexistent/cmd"]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(env.state_json("e")["counters"]["cancelled"], 1);
}

#[test]
fn a_timeout_kills_the_command_and_counts_a_failure() {
    let env = Env::new();
    let out = env.run(
        T0,
        &[
            "--breaker",
            "slow",
            "--timeout",
            "200ms",
            "--",
            "sleep",
            "30",
        ],
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("timed out after 200ms"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.state_json("slow")["counters"]["failed"], 1);
}

#[test]
fn sigterm_is_forwarded_and_the_run_counts_as_cancelled() {
    let env = Env::new();
    let script = sh("trap 'exit 42' TERM; echo up > up.txt; while :; do sleep 0.01; done");
    let mut child = env.spawn(T0, &args(&["--breaker", "sig"], &script));
    run_common::wait_until("the command to start", || env.path("up.txt").exists());
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(42), "the child's own exit code");
    let c = &env.state_json("sig")["counters"];
    assert_eq!(
        (c["failed"].as_u64(), c["cancelled"].as_u64()),
        (Some(0), Some(1))
    );
}

#[test]
fn operators_force_open_reset_and_choose_the_open_exit_code() {
    let env = Env::new();
    assert_eq!(env.run(T0, &["--force-open", "op"]).status.code(), Some(0));
    assert!(env.status(T0, "op").contains("forced open"));
    let out = env.run(
        T0 + 3600,
        &[
            "--breaker",
            "op",
            "--open-exit-code",
            "99",
            "--",
            "touch",
            "ran",
        ],
    );
    assert_eq!(out.status.code(), Some(99));
    assert!(stderr(&out).contains("forced open"), "{}", stderr(&out));
    assert!(!env.path("ran").exists());
    assert_eq!(env.run(T0, &["--reset", "op"]).status.code(), Some(0));
    let out = env.run(T0, &["--breaker", "op", "--", "touch", "ran"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(env.path("ran").exists());
}
