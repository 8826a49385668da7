//! The window crosses processes exactly: failures recorded by earlier runs
//! age out of the 60 s window on time (they are not all lumped into the
//! current bucket), and still count while they are inside it.

mod run_common;

use run_common::{Env, T0, args, sh};

#[test]
fn failures_from_earlier_runs_age_out_of_the_time_window() {
    let env = Env::new();
    let fail = sh("exit 1");
    let a = args(&["--breaker", "w"], &fail);
    // Nine failures: one short of minimum_calls.
    for _ in 0..9 {
        assert_eq!(env.run(T0, &a).status.code(), Some(1));
    }
    // 70 s later they have left the 60 s window: nine more do not trip.
    for _ in 0..9 {
        assert_eq!(env.run(T0 + 70, &a).status.code(), Some(1));
    }
    assert!(
        env.status(T0 + 70, "w")
            .contains("closed (failure rate 100% over 9 runs")
    );
    // 30 s after that the second nine are still inside: the tenth trips.
    assert_eq!(env.run(T0 + 100, &a).status.code(), Some(1));
    assert_eq!(env.state_json("w")["checkpoint"]["state"], "open");
    assert_eq!(env.run(T0 + 101, &a).status.code(), Some(75));
}
