#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::*;

#[test]
fn thresholds_take_an_endpoint_out_and_bring_it_back() {
    let book = HealthBook::default();
    let fail = || Err("connection refused".to_owned());
    assert_eq!(book.record("a", fail(), 3, 2), Verdict::Same);
    assert_eq!(book.record("a", fail(), 3, 2), Verdict::Same);
    let out = book.record("a", fail(), 3, 2);
    assert!(matches!(out, Verdict::Unhealthy { failures: 3, .. }));
    assert!(book.is_unhealthy("a"));
    assert_eq!(book.record("a", Ok("ok".into()), 3, 2), Verdict::Same);
    assert_eq!(
        book.record("a", Ok("ok".into()), 3, 2),
        Verdict::Healthy { passes: 2 }
    );
    assert!(!book.is_unhealthy("a"));
}

#[test]
fn a_pass_breaks_a_streak_of_failures() {
    let book = HealthBook::default();
    book.record("a", Err("x".into()), 2, 1);
    book.record("a", Ok("ok".into()), 2, 1);
    assert_eq!(book.record("a", Err("x".into()), 2, 1), Verdict::Same);
}

/// The phases of many endpoints spread over the interval, and every wait
/// stays within the jitter: checked on tokio's paused clock by sleeping
/// the waits and reading the virtual time.
#[tokio::test(start_paused = true)]
async fn endpoints_get_their_own_phases_and_waits_stay_within_the_jitter() {
    let interval = Duration::from_millis(1000);
    let mut phases = Vec::new();
    for seed in 0..20u64 {
        let mut spread = Spread::seeded(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let start = tokio::time::Instant::now();
        tokio::time::sleep(spread.phase(interval)).await;
        phases.push(start.elapsed());
        for _ in 0..50 {
            let before = tokio::time::Instant::now();
            tokio::time::sleep(spread.wait(interval, 0.1)).await;
            let waited = before.elapsed();
            assert!(waited >= Duration::from_millis(899), "{waited:?}");
            assert!(waited <= Duration::from_millis(1101), "{waited:?}");
        }
    }
    assert!(phases.iter().all(|p| *p < interval));
    // Not in step: the phases fall in at least 5 of the 10 tenths.
    let mut tenths: Vec<u128> = phases.iter().map(|p| p.as_millis() / 100).collect();
    tenths.sort_unstable();
    tenths.dedup();
    assert!(tenths.len() >= 5, "phases bunched: {phases:?}");
}
