//! The window crosses processes exactly: failures recorded by earlier runs
//! age out of the default 10-minute window on time (they are not all
//! lumped into the current bucket), and still count while they are inside
//! it; `--status` says why a breaker full of failures is still closed.

mod run_common;

use run_common::{Env, T0, args, sh};

#[test]
fn failures_from_earlier_runs_age_out_of_the_time_window() {
    let env = Env::new();
    let fail = sh("exit 1");
    let a = args(&["--breaker", "w"], &fail);
    // Four failures: one short of the default minimum of 5 runs.
    for _ in 0..4 {
        assert_eq!(env.run(T0, &a).status.code(), Some(1));
    }
    // 11 minutes later they have left the 10-minute window: four more do
    // not trip, and the status says why.
    for _ in 0..4 {
        assert_eq!(env.run(T0 + 660, &a).status.code(), Some(1));
    }
    let status = env.status(T0 + 660, "w");
    assert!(
        status.contains(
            "closed (failure rate 100% over 4 runs): needs 5 runs in the window before it can trip; 4 so far"
        ),
        "{status}"
    );
    // 5 minutes after that the second four are still inside: the fifth trips.
    assert_eq!(env.run(T0 + 960, &a).status.code(), Some(1));
    assert_eq!(env.state_json("w")["checkpoint"]["state"], "open");
    assert_eq!(env.run(T0 + 961, &a).status.code(), Some(75));
}

#[test]
fn status_says_a_judged_window_is_below_the_threshold() {
    let env = Env::new();
    let (fail, succeed) = (sh("exit 1"), sh("exit 0"));
    let a = args(&["--breaker", "b"], &fail);
    let ok = args(&["--breaker", "b"], &succeed);
    assert_eq!(env.run(T0, &a).status.code(), Some(1));
    for _ in 0..4 {
        assert_eq!(env.run(T0, &ok).status.code(), Some(0));
    }
    let status = env.status(T0, "b");
    assert!(
        status.contains("closed (failure rate 20% over 5 runs, below the 50% threshold)"),
        "{status}"
    );
}
