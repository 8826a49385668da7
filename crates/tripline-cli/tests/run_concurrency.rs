//! Many pipeline jobs sharing one breaker: 20 concurrent runs of a failing
//! command trip it once, then fail fast without running the command;
//! after the open duration exactly the policy's 3 probes run, across
//! processes; their success closes the breaker for everyone.

mod run_common;

use run_common::{Env, T0, args, sh, wait_until};
use std::process::Child;

fn wait_all(children: Vec<Child>) -> Vec<i32> {
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("wait");
            out.status.code().expect("exit code")
        })
        .collect()
}

#[test]
fn twenty_jobs_trip_once_fail_fast_then_three_probes_close_it() {
    let env = Env::new();
    let failing = sh("echo ran >> ran.txt; exit 1");
    let a = args(&["--breaker", "deploy-api"], &failing);

    // Wave 1: 20 at once. Each either ran (and failed) or was refused.
    let wave: Vec<Child> = (0..20).map(|_| env.spawn(T0, &a)).collect();
    let codes = wait_all(wave);
    let ran = env.lines("ran.txt");
    assert!(codes.iter().all(|c| *c == 1 || *c == 75), "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 1).count(), ran);
    assert!(
        ran >= 5,
        "at least minimum_calls ran before the trip: {ran}"
    );
    let state = env.state_json("deploy-api");
    assert_eq!(state["checkpoint"]["state"], "open");
    assert_eq!(
        state["counters"]["transitions"], 1,
        "tripped exactly once: {state}"
    );

    // Wave 2, still within the 30 s open duration: nobody runs it.
    let wave: Vec<Child> = (0..20).map(|_| env.spawn(T0 + 10, &a)).collect();
    let codes = wait_all(wave);
    assert!(codes.iter().all(|c| *c == 75), "{codes:?}");
    assert_eq!(
        env.lines("ran.txt"),
        ran,
        "the command never ran while open"
    );
    let out = env.run(T0 + 10, &a);
    let msg = run_common::stderr(&out);
    assert!(
        msg.contains(
            "breaker \"deploy-api\" is open (failure rate 100% over 5 runs); next probe in 20s"
        ),
        "{msg}"
    );

    // After the open duration: 20 jobs again; the probes wait for a go
    // file, so all 20 ask while the round is under way.
    let probe = sh("echo p >> probes.txt; while [ ! -f go ]; do sleep 0.01; done; exit 0");
    let b = args(&["--breaker", "deploy-api"], &probe);
    let mut wave: Vec<Child> = (0..20).map(|_| env.spawn(T0 + 31, &b)).collect();
    // The refused ones exit on their own with 75; three stay running.
    let mut refused = 0;
    wait_until("17 refused runs", || {
        wave.retain_mut(|c| match c.try_wait().expect("try_wait") {
            Some(s) => {
                assert_eq!(s.code(), Some(75));
                refused += 1;
                false
            }
            None => true,
        });
        refused == 17
    });
    wait_until("3 probes started", || env.lines("probes.txt") == 3);
    assert_eq!(wave.len(), 3);
    assert!(
        env.status(T0 + 31, "deploy-api")
            .contains("half-open (3 probes in flight)")
    );
    std::fs::write(env.path("go"), "").expect("go");
    assert_eq!(wait_all(wave), vec![0, 0, 0]);
    assert_eq!(
        env.lines("probes.txt"),
        3,
        "exactly the policy's 3 probes ran"
    );

    // Closed for everyone: the next job runs its command.
    assert!(
        env.status(T0 + 32, "deploy-api")
            .starts_with("breaker \"deploy-api\": closed")
    );
    let ok = env.run(
        T0 + 32,
        &args(&["--breaker", "deploy-api"], &sh("echo ok >> after.txt")),
    );
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(env.lines("after.txt"), 1);
}

#[test]
fn a_failed_probe_reopens_the_breaker() {
    let env = Env::new();
    let fail = sh("exit 1");
    let a = args(&["--breaker", "cron"], &fail);
    for _ in 0..5 {
        assert_eq!(env.run(T0, &a).status.code(), Some(1));
    }
    assert_eq!(env.state_json("cron")["checkpoint"]["state"], "open");
    // First probe fails: reopened for another 30 s from the failure.
    assert_eq!(env.run(T0 + 30, &a).status.code(), Some(1));
    let s = env.state_json("cron");
    assert_eq!(s["checkpoint"]["state"], "open");
    assert_eq!(s["checkpoint"]["reason"], "a probe failed");
    assert_eq!(env.run(T0 + 59, &a).status.code(), Some(75));
    assert_eq!(
        s["counters"]["transitions"], 2,
        "tripped, then reopened: {s}"
    );
}

#[test]
fn a_run_admitted_before_the_trip_is_counted_but_does_not_move_the_new_state() {
    let env = Env::new();
    // Admitted while closed; finishes (successfully) after the trip.
    let slow = sh("echo up > up.txt; while [ ! -f go ]; do sleep 0.01; done; exit 0");
    let early = env.spawn(T0, &args(&["--breaker", "gen"], &slow));
    wait_until("the early run to start", || env.path("up.txt").exists());
    for _ in 0..5 {
        assert_eq!(
            env.run(T0, &args(&["--breaker", "gen"], &sh("exit 1")))
                .status
                .code(),
            Some(1)
        );
    }
    assert_eq!(env.state_json("gen")["checkpoint"]["state"], "open");
    std::fs::write(env.path("go"), "").expect("go");
    let out = early.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    let s = env.state_json("gen");
    assert_eq!(s["checkpoint"]["state"], "open", "{s}");
    assert_eq!(s["counters"]["stale"], 1, "{s}");
    assert_eq!(s["counters"]["transitions"], 1, "{s}");
}
