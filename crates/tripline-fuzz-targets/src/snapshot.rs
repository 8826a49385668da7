//! Restoring a breaker from a snapshot kept across a restart: the JSON
//! may come from an older version, a torn write or a hand edit, and
//! restoring it must never take the process down.

use std::time::Duration;

use tripline::breaker::Snapshot;
use tripline::{CircuitBreaker, CircuitBreakerConfig, ManualClock, Outcome};

/// Parses a [`Snapshot`] from JSON and restores a default-configured
/// breaker from it; the restored breaker must then work: admit or refuse,
/// record, move on in time and snapshot again.
pub fn snapshot_restore(data: &[u8]) {
    let Ok(snapshot) = serde_json::from_slice::<Snapshot>(data) else {
        return;
    };
    let clock = ManualClock::new();
    let config = CircuitBreakerConfig {
        name: snapshot.name.clone(),
        ..Default::default()
    };
    let Ok(breaker) = CircuitBreaker::builder()
        .config(config)
        .clock(clock.clone())
        .restore(snapshot)
        .build()
    else {
        return;
    };
    for step in 0..8u32 {
        if let Ok(permit) = breaker.try_acquire() {
            let outcome = if step % 2 == 0 {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            permit.record(outcome, Duration::from_millis(u64::from(step)));
        }
        let _ = breaker.state();
        clock.advance(Duration::from_secs(20));
    }
    let again = breaker.snapshot();
    let json = serde_json::to_string(&again).unwrap_or_else(|e| panic!("snapshot not JSON: {e}"));
    let read: Snapshot = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("a snapshot's own JSON is unreadable: {e}\n{json}"));
    assert_eq!(read.name, again.name);
}
