//! Crashes: a `kill -9` of a run holding the lock leaves a usable state;
//! a killed probe's slot is freed at once (abandoned), a lease nobody can
//! judge is reclaimed as a failed probe when it expires; a state file
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
    // The fifth failure reaches the default minimum of 5 runs and trips.
    assert_eq!(env.run(T0, &a).status.code(), Some(1));
    assert_eq!(env.state_json("build")["checkpoint"]["state"], "open");
}

/// One probe at a time, so a dead probe holding the slot blocks the round.
const ONE_PROBE: &str = r#"
window = { kind = "count", size = 4 }
minimum_calls = 4
open_duration = "10s"
half_open = { policy = "consecutive", successes = 1 }
max_half_open_duration = "2h"
"#;

/// Trips breaker `p`, starts a probe whose command prints its pid and
/// hangs, and `kill -9`s the probe's tripline process once the command
/// runs. Returns the orphaned command's pid (the test's to end).
fn kill_a_probe_mid_command(env: &Env) -> String {
    std::fs::write(env.path("p.toml"), ONE_PROBE).expect("config");
    let head = ["--breaker", "p", "--config", "p.toml"];
    for _ in 0..4 {
        assert_eq!(
            env.run(T0, &args(&head, &sh("exit 1"))).status.code(),
            Some(1)
        );
    }
    let hang = sh("echo $$; exec sleep 600");
    let mut probe = env
        .cmd(T0 + 10, &args(&head, &hang))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    // The command's first line (passed through by tripline) says it runs.
    let mut orphan = String::new();
    BufReader::new(probe.stdout.take().expect("stdout"))
        .read_line(&mut orphan)
        .expect("reads");
    // While the probe lives, it holds the only slot.
    let out = env.run(T0 + 10, &args(&head, &sh("exit 0")));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    probe.kill().expect("SIGKILL");
    probe.wait().expect("reaped");
    orphan.trim().to_owned()
}

fn end(pid: &str) {
    Command::new("kill")
        .args(["-9", pid])
        .status()
        .expect("kill");
}

#[test]
fn a_killed_probe_frees_its_slot_at_once_as_abandoned() {
    let env = Env::new();
    let orphan = kill_a_probe_mid_command(&env);
    // Same instant, long before the lease expires: the owner is dead, so
    // the next run probes at once; its success closes the breaker.
    std::fs::create_dir_all(env.path("prom")).expect("textfile dir");
    let out = env.run(
        T0 + 10,
        &args(
            &["--breaker", "p", "--config", "p.toml", "--textfile", "prom"],
            &sh("exit 0"),
        ),
    );
    end(&orphan);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let metrics = std::fs::read_to_string(env.path("prom/p.prom")).expect("metrics");
    assert!(
        metrics.contains("tripline_run_total{breaker=\"p\",outcome=\"abandoned\"} 1"),
        "{metrics}"
    );
    let s = env.state_json("p");
    assert_eq!(s["checkpoint"]["state"], "closed");
    assert_eq!(s["counters"]["abandoned"], 1);
    assert_eq!(s["counters"]["reclaimed"], 0);
    assert!(
        env.status(T0 + 10, "p").ends_with("1 abandoned probe\n"),
        "{}",
        env.status(T0 + 10, "p")
    );
}

#[test]
fn a_lease_from_another_boot_waits_for_its_expiry_and_fails_the_probe() {
    let env = Env::new();
    let orphan = kill_a_probe_mid_command(&env);
    end(&orphan);
    // The same lease as if taken before a reboot (or on another machine
    // sharing the dir): its pid means nothing here, so it is not judged.
    let path = env.state_dir().join("p.json");
    let mut s = env.state_json("p");
    s["log"][0]["owner"]["boot_id"] = "another-boot".into();
    std::fs::write(&path, serde_json::to_vec(&s).expect("json")).expect("write");
    let head = ["--breaker", "p", "--config", "p.toml"];
    let out = env.run(T0 + 10, &args(&head, &sh("exit 0")));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    // Once the lease (an hour without --timeout) has expired, it counts as
    // a failed probe: the breaker reopens.
    let out = env.run(T0 + 10 + 3600, &args(&head, &sh("exit 0")));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let s = env.state_json("p");
    assert_eq!(s["checkpoint"]["state"], "open");
    assert_eq!(s["counters"]["reclaimed"], 1);
    assert_eq!(s["counters"]["abandoned"], 0);
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
