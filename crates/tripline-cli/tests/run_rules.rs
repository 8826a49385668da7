//! `warm_up`, `cooldown` and `min_state_duration` across runs: each run is
//! a new process, yet the warm-up counts from the breaker's first run, the
//! cooldown from the run that closed it and the hold from the run that
//! changed its state — the state file carries those moments. Time moves
//! through `TRIPLINE_NOW`, never by sleeping.

mod run_common;

use run_common::{Env, T0, args, sh, stderr};

/// A small breaker: 4 runs decide, 50% trips, 10 s open, one probe.
const BASE: &str = r#"
window = { kind = "count", size = 4 }
minimum_calls = 4
failure_rate_threshold = 0.5
open_duration = "10s"
half_open = { policy = "consecutive", successes = 1 }
"#;

fn env_with(extra: &str) -> Env {
    let env = Env::new();
    std::fs::write(env.path("b.toml"), format!("{BASE}{extra}")).expect("write config");
    env
}

/// `tripline run --breaker b --config b.toml -- sh -c 'exit CODE'` at
/// `T0 + at`; returns tripline's exit code.
fn run(env: &Env, at: u64, code: u8) -> Option<i32> {
    let cmd = sh(&format!("exit {code}"));
    let out = env.run(
        T0 + at,
        &args(&["--breaker", "b", "--config", "b.toml"], &cmd),
    );
    assert!(
        !stderr(&out).contains("not supported"),
        "refused: {}",
        stderr(&out)
    );
    out.status.code()
}

fn state(env: &Env) -> String {
    env.state_json("b")["checkpoint"]["state"]
        .as_str()
        .expect("state")
        .to_owned()
}

#[test]
fn a_warm_up_counts_from_the_first_run_not_from_each_run() {
    let env = env_with("warm_up = { duration = \"60s\", mode = \"no_trip\" }\n");
    assert_eq!(run(&env, 0, 0), Some(0));
    // 30 s into the warm-up: four failures in four runs do not trip.
    for _ in 0..4 {
        assert_eq!(run(&env, 30, 1), Some(1));
    }
    assert_eq!(state(&env), "closed");
    // 61 s after the first run the warm-up is over — though every run is
    // a new process — and the next failure trips.
    assert_eq!(run(&env, 61, 1), Some(1));
    assert_eq!(state(&env), "open");
    assert_eq!(run(&env, 61, 0), Some(75));
}

#[test]
fn a_cooldown_after_recovery_carries_into_later_runs() {
    let cooldown = "cooldown = { duration = \"60s\", failure_rate_threshold = 0.25 }\n";
    for (after, trips) in [(10, true), (71, false)] {
        let env = env_with(cooldown);
        for _ in 0..4 {
            assert_eq!(run(&env, 0, 1), Some(1));
        }
        assert_eq!(state(&env), "open");
        // The probe at 10 s closes it: the cooldown starts in that run.
        assert_eq!(run(&env, 10, 0), Some(0));
        assert_eq!(state(&env), "closed");
        // One failure in four: 25% trips within the cooldown's 60 s (the
        // stricter threshold), not after it (the normal 50%).
        for code in [0, 0, 0, 1] {
            assert_eq!(run(&env, 10 + after, code), Some(i32::from(code)));
        }
        let expected = if trips { "open" } else { "closed" };
        assert_eq!(state(&env), expected, "{after} s after recovery");
    }
}

#[test]
fn min_state_duration_holds_each_state_from_the_run_that_entered_it() {
    let env = env_with("min_state_duration = \"30s\"\n");
    // The breaker closes (is created) at T0.
    assert_eq!(run(&env, 0, 0), Some(0));
    // 10 s later four failures reach the threshold, but closed is held:
    // every run still runs its command.
    for _ in 0..4 {
        assert_eq!(run(&env, 10, 1), Some(1));
    }
    assert_eq!(state(&env), "closed");
    // 31 s after it closed, the next run's outcome re-judges the window
    // (three failures in four) and trips; open for max(10 s, 30 s).
    assert_eq!(run(&env, 31, 0), Some(0));
    assert_eq!(state(&env), "open");
    assert_eq!(run(&env, 60, 0), Some(75));
    // The probe at 61 s succeeds, but half-open is held for 30 s too: the
    // close waits, and no further probe is admitted meanwhile.
    assert_eq!(run(&env, 61, 0), Some(0));
    assert!(
        env.status(T0 + 62, "b").contains("half-open"),
        "{}",
        env.status(T0 + 62, "b")
    );
    assert_eq!(run(&env, 62, 0), Some(75));
    // 30 s after half-open began, the decision applies: closed, and this
    // run is admitted as a closed one.
    assert_eq!(run(&env, 91, 0), Some(0));
    assert_eq!(state(&env), "closed");
    let times = &env.state_json("b")["times"];
    assert_eq!(times["entered_nanos"], (T0 + 91) * 1_000_000_000);
}

#[test]
fn a_state_file_without_times_still_loads_and_gains_them() {
    let env = env_with("");
    std::fs::create_dir_all(env.state_dir()).expect("state dir");
    let old = r#"{"version":1,"epoch":0,"checkpoint":{"state":"closed","window":null},"log":[],"next_lease":1,"counters":{"succeeded":3}}"#;
    std::fs::write(env.state_dir().join("b.json"), old).expect("write");
    let out = env.run(
        T0,
        &args(&["--breaker", "b", "--config", "b.toml"], &sh("exit 0")),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("unreadable"), "{}", stderr(&out));
    let s = env.state_json("b");
    assert_eq!(s["counters"]["succeeded"], 4);
    assert_eq!(s["times"]["warm_up_start_nanos"], T0 * 1_000_000_000);
}
