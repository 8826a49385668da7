//! Bad input: a clear message, exit 2, and the command never runs.

mod run_common;

use run_common::{Env, T0, stderr};

fn assert_refused(env: &Env, args: &[&str], needle: &str) {
    let out = env.run(T0, args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    assert!(!env.path("ran").exists(), "{args:?}: the command ran");
}

#[test]
fn bad_input_exits_2_without_running_the_command() {
    let env = Env::new();
    let touch = ["--", "touch", "ran"];
    std::fs::write(env.path("bad.toml"), "minimum_calls = 5\nthreshold = 0.5\n").expect("write");
    let mut a = vec!["--breaker", "x", "--config", "bad.toml"];
    a.extend(touch);
    assert_refused(&env, &a, "threshold");

    // What `tripline run` cannot honour across processes is refused by
    // name (warm_up, cooldown and min_state_duration are honoured).
    std::fs::write(
        env.path("slow.toml"),
        "slow_call = { baseline_quantile = 0.99, factor = 3.0, floor = \"50ms\", ceiling = \"2s\" }\n",
    )
    .expect("write");
    let mut a = vec!["--breaker", "x", "--config", "slow.toml"];
    a.extend(touch);
    assert_refused(&env, &a, "slow_call");
    std::fs::write(
        env.path("ramp.toml"),
        "half_open = { policy = \"ramp\", steps = [0.1, 1.0], step_duration = \"1s\", failure_rate_threshold = 0.2 }\n",
    )
    .expect("write");
    let mut a = vec!["--breaker", "x", "--config", "ramp.toml"];
    a.extend(touch);
    assert_refused(&env, &a, "half_open.policy = \"ramp\"");

    // `--` forgotten: clap refuses the stray command words.
    assert_refused(
        &env,
        &["--breaker", "x", "touch", "ran"],
        "unexpected argument",
    );
    // No command at all.
    assert_refused(&env, &["--breaker", "x", "--"], "missing command");
    assert_refused(&env, &["--breaker", "x"], "missing command");
    // A name that cannot be a file name.
    let mut a = vec!["--breaker", "../evil"];
    a.extend(touch);
    assert_refused(&env, &a, "breaker name");
    // Zero timeout, bad exit code list.
    let mut a = vec!["--breaker", "x", "--timeout", "0s"];
    a.extend(touch);
    assert_refused(&env, &a, "--timeout");
    let mut a = vec!["--breaker", "x", "--fail-on-exit", "1,x"];
    a.extend(touch);
    assert_refused(&env, &a, "--fail-on-exit");
    // A command with --status.
    let mut a = vec!["--status", "x"];
    a.extend(touch);
    assert_refused(&env, &a, "take none");
}

#[test]
fn an_unwritable_state_dir_exits_2_without_running_the_command() {
    let env = Env::new();
    // A regular file where the directory should be: no permission games
    // that root would ignore.
    std::fs::write(env.path("state"), "not a dir").expect("write");
    assert_refused(
        &env,
        &["--breaker", "x", "--", "touch", "ran"],
        "--state-dir",
    );
}

#[test]
fn a_forgotten_double_dash_is_explained() {
    let env = Env::new();
    let out = env.run(T0, &["--breaker", "x", "touch", "ran"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("put `--` before the command: tripline run [OPTIONS] -- CMD ARGS"),
        "{}",
        stderr(&out)
    );
    assert!(!env.path("ran").exists(), "the command ran");
}

#[test]
fn a_config_value_out_of_range_names_file_line_and_field() {
    let env = Env::new();
    std::fs::write(
        env.path("b.toml"),
        "# deploys\nminimum_calls = 5\nfailure_rate_threshold = 1.5\n",
    )
    .expect("write");
    let out = env.run(
        T0,
        &["--breaker", "x", "--config", "b.toml", "--", "touch", "ran"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "b.toml:3: breaker \"x\": `failure_rate_threshold` must be a fraction in (0, 1], got 1.5"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!env.path("ran").exists(), "the command ran");
}
