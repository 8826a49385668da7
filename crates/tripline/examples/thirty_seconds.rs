//! The README's library snippet ("A Rust library"): a breaker trips on
//! failures, fails fast while open, probes after its open duration and
//! closes again.
//! `cargo run -p tripline --example thirty_seconds` prints:
//!
//! ```text
//! payments: closed → open (failure rate 100% ≥ 50% over 5 calls; open for 5.0s)
//! rejected while open: call rejected: circuit breaker is open (retry after 5.0s)
//! payments: open → half_open (open duration elapsed)
//! payments: half_open → closed (3 probes succeeded)
//! ```
//!
//! Everything below this comment is the README's snippet, verbatim (a test
//! keeps the two equal, and the README's copy is compiled and run as a
//! doc-test), so a newcomer's first paste works.

use std::time::Duration;

use tripline::{
    CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, ManualClock, State, WindowConfig,
};

fn main() -> Result<(), tripline::ConfigError> {
    // A virtual clock: the open duration passes when the program says so.
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            name: "payments".into(),
            window: WindowConfig::Count { size: 20 }, // the last 20 calls
            minimum_calls: 5,                         // no verdict on fewer
            failure_rate_threshold: 0.5,              // trip at 50% failures
            open_duration: Duration::from_secs(5).into(),
            half_open: HalfOpenPolicy::Consecutive { successes: 3 },
            ..Default::default()
        })
        .clock(clock.clone())
        .build()?;
    // Every decision explains itself.
    let _sub = breaker.subscribe(|event| println!("{event}"));

    // The dependency is down: five failures in a row trip the breaker.
    for _ in 0..5 {
        let _ = breaker.call(|| Err::<(), _>("connection refused"));
    }
    assert_eq!(breaker.state(), State::Open);

    // While open, calls fail fast without reaching the dependency.
    if let Err(rejected) = breaker.call(|| Ok::<_, &str>("never sent")) {
        println!("rejected while open: {rejected}");
    }

    // Five seconds later the next calls are probes; three successes close it.
    clock.advance(Duration::from_secs(5));
    for _ in 0..3 {
        let _ = breaker.call(|| Ok::<_, &str>("pong"));
    }
    assert_eq!(breaker.state(), State::Closed);
    Ok(())
}
