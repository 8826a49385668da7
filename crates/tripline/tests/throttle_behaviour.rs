//! The adaptive throttle on a `ManualClock`: the SRE formula, its cap and
//! activation threshold, what is (and is never) counted, window expiry,
//! reproducible randomness, and exact counts under two threads.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig, ThrottleWindow, Throttled};

fn throttle(clock: &ManualClock, config: AdaptiveThrottleConfig) -> AdaptiveThrottle {
    AdaptiveThrottle::builder()
        .config(config)
        .clock(clock.clone())
        .seed(42)
        .instance_id(1)
        .build()
        .unwrap()
}

fn always_active() -> AdaptiveThrottleConfig {
    AdaptiveThrottleConfig {
        minimum_requests_per_second: 0.0,
        ..Default::default()
    }
}

/// What the backend answers to the `i`-th request that reaches it.
#[derive(Clone, Copy)]
enum Backend {
    Healthy,
    /// Accepts one request in `n`, refuses the rest as overloaded.
    AcceptsOneIn(u32),
}

/// Sends `n` requests; returns how many the throttle shed.
fn drive(t: &AdaptiveThrottle, backend: Backend, n: u32) -> u32 {
    let mut shed = 0;
    let mut reached = 0u32;
    for _ in 0..n {
        match t.try_acquire() {
            Err(Throttled { .. }) => shed += 1,
            Ok(permit) => {
                reached += 1;
                match backend {
                    Backend::Healthy => permit.accepted(),
                    Backend::AcceptsOneIn(k) if reached.is_multiple_of(k) => permit.accepted(),
                    Backend::AcceptsOneIn(_) => permit.rejected_by_backend(),
                }
            }
        }
    }
    shed
}

fn formula(requests: u64, accepts: u64, k: f64, cap: f64) -> f64 {
    let r = requests as f64;
    ((r - k * accepts as f64) / (r + 1.0)).clamp(0.0, cap)
}

#[test]
fn healthy_backend_is_never_throttled() {
    let clock = ManualClock::new();
    let t = throttle(&clock, always_active());
    for _ in 0..100 {
        assert_eq!(drive(&t, Backend::Healthy, 100), 0);
        clock.advance(Duration::from_millis(250));
    }
    assert_eq!(t.rejection_probability(), 0.0);
    assert_eq!(t.metrics().totals.throttled, 0);
}

#[test]
fn overloaded_backend_sees_about_k_times_what_it_accepts() {
    for k in [1.5, 2.0, 3.0] {
        let clock = ManualClock::new();
        let t = throttle(
            &clock,
            AdaptiveThrottleConfig {
                k,
                ..always_active()
            },
        );
        // Demand is 1 000 requests/s; the backend processes 100/s and
        // refuses the rest as overloaded.
        let (mut sent, mut accepted, mut shed) = (0u64, 0u64, 0u64);
        for second in 0..60 {
            let mut capacity = 100;
            for _ in 0..1_000 {
                match t.try_acquire() {
                    Err(_) => shed += u64::from(second >= 30),
                    Ok(p) => {
                        sent += u64::from(second >= 30);
                        if capacity > 0 {
                            capacity -= 1;
                            accepted += u64::from(second >= 30);
                            p.accepted();
                        } else {
                            p.rejected_by_backend();
                        }
                    }
                }
                clock.advance(Duration::from_millis(1));
            }
        }
        // Steady state (the last 30 s): sent ≈ k × accepted, the rest shed.
        let ratio = sent as f64 / accepted as f64;
        assert!(
            (ratio - k).abs() < 0.1 * k,
            "k = {k}: sent/accepted = {ratio:.2}"
        );
        assert_eq!(sent + shed, 30_000);
        let m = t.metrics();
        assert_eq!(
            m.window.requests,
            m.window.accepts + m.window.rejected_by_backend() + m.window.throttled,
        );
        assert_eq!(m.totals.requests, 60_000, "shed requests count as requests");
        assert_eq!(m.totals.accepts, 60 * 100, "and never as accepts");
        let p = t.rejection_probability();
        assert!(
            (p - formula(m.window.requests, m.window.accepts, k, 0.9)).abs() < 1e-12,
            "p = {p}, metrics {m:?}"
        );
    }
}

#[test]
fn shed_fraction_matches_the_probability() {
    let clock = ManualClock::new();
    let t = throttle(
        &clock,
        AdaptiveThrottleConfig {
            // One long bucket so the probability stays put while we sample.
            window: ThrottleWindow {
                length: Duration::from_secs(60),
                buckets: 1,
            },
            ..always_active()
        },
    );
    for i in 0..1_000 {
        let p = t.try_acquire().unwrap_or_else(|e| panic!("{e} at {i}"));
        if i % 4 == 0 {
            p.accepted()
        } else {
            p.rejected_by_backend()
        }
        if t.rejection_probability() > 0.0 {
            break;
        }
    }
    // Freeze the window by dropping permits (neutral) and measure the
    // shed fraction against the fixed probability.
    let mut shed = 0u32;
    let mut probs = Vec::new();
    for _ in 0..20_000 {
        match t.try_acquire() {
            Ok(permit) => drop(permit),
            Err(e) => {
                shed += 1;
                probs.push(e.rejection_probability);
            }
        }
    }
    // Shed requests are counted, so p creeps up; compare with the mean p
    // reported by the rejections themselves.
    let mean_p = probs.iter().sum::<f64>() / probs.len() as f64;
    let frac = f64::from(shed) / 20_000.0;
    assert!(mean_p > 0.0);
    assert!(
        (frac - mean_p).abs() < 0.05,
        "shed {frac:.3} of requests at mean p {mean_p:.3}"
    );
}

#[test]
fn dropped_permits_are_neutral() {
    let clock = ManualClock::new();
    let t = throttle(&clock, always_active());
    for _ in 0..10 {
        if let Ok(p) = t.try_acquire() {
            p.rejected_by_backend();
        }
    }
    let before = t.metrics();
    for _ in 0..1_000 {
        if let Ok(permit) = t.try_acquire() {
            drop(permit);
        }
    }
    let after = t.metrics();
    assert_eq!(after.window.accepts, before.window.accepts);
    assert!(after.window.throttled > before.window.throttled);
    assert_eq!(
        after.window.requests - after.window.throttled,
        before.window.requests - before.window.throttled,
        "dropped permits add neither requests nor accepts"
    );
}

#[test]
fn inactive_below_the_minimum_request_rate() {
    let clock = ManualClock::new();
    let t = throttle(
        &clock,
        AdaptiveThrottleConfig {
            minimum_requests_per_second: 5.0, // 50 requests in the 10 s window
            ..Default::default()
        },
    );
    for _ in 0..49 {
        t.try_acquire().expect("inactive").rejected_by_backend();
        assert_eq!(t.rejection_probability(), 0.0);
    }
    assert!(!t.metrics().active);
    t.try_acquire()
        .expect("still inactive")
        .rejected_by_backend();
    let m = t.metrics();
    assert!(m.active);
    assert!(
        (t.rejection_probability() - 0.9).abs() < 1e-12,
        "capped at 0.9"
    );
}

#[test]
fn the_cap_keeps_a_trickle_reaching_a_refusing_backend() {
    for cap in [0.0, 0.5, 0.9, 1.0] {
        let clock = ManualClock::new();
        let t = throttle(
            &clock,
            AdaptiveThrottleConfig {
                max_rejection_probability: cap,
                ..always_active()
            },
        );
        // The backend refuses everything.
        let shed = drive(&t, Backend::AcceptsOneIn(u32::MAX), 10_000);
        let p = t.rejection_probability();
        let uncapped = formula(t.metrics().window.requests, 0, 2.0, 1.0);
        assert!((p - cap.min(uncapped)).abs() < 1e-12, "cap {cap}: p = {p}");
        let frac = f64::from(shed) / 10_000.0;
        assert!(frac <= cap + 0.02, "cap {cap}: shed {frac}");
        if cap == 0.0 {
            assert_eq!(shed, 0, "a zero cap never rejects");
        } else {
            assert!(frac >= cap - 0.05, "cap {cap}: shed {frac}");
        }
    }
}

#[test]
fn expiry_and_recovery_bring_the_probability_back_to_zero() {
    let clock = ManualClock::new();
    let t = throttle(&clock, always_active());
    // 10 s window in 1 s buckets; 5 s of heavy overload.
    for _ in 0..5 {
        drive(&t, Backend::AcceptsOneIn(10), 1_000);
        clock.advance(Duration::from_secs(1));
    }
    let overloaded = t.rejection_probability();
    assert!(overloaded > 0.5, "p = {overloaded}");
    // The backend recovers: accepts everything that reaches it. Shed
    // requests still count as requests, so p decays window by window
    // (about p → 2p − 1 per window with k = 2), never rising.
    let mut last = overloaded;
    let mut seconds = 0;
    while last > 0.0 {
        drive(&t, Backend::Healthy, 1_000);
        clock.advance(Duration::from_secs(1));
        seconds += 1;
        let p = t.rejection_probability();
        assert!(
            p <= last + 1e-9,
            "second {seconds}: p rose from {last} to {p}"
        );
        last = p;
        assert!(seconds <= 50, "still shedding after 5 windows: p = {p}");
    }
    assert!(
        seconds > 10,
        "decay takes more than one window ({seconds} s)"
    );
    assert_eq!(drive(&t, Backend::Healthy, 1_000), 0);
    // An idle throttle forgets everything after one window.
    drive(&t, Backend::AcceptsOneIn(1_000), 10_000);
    assert!(t.rejection_probability() > 0.0);
    clock.advance(Duration::from_secs(10));
    assert_eq!(t.rejection_probability(), 0.0);
    assert_eq!(t.metrics().window.requests, 0);
}

#[test]
fn seeded_throttles_are_reproducible_and_replicas_differ() {
    let decisions = |instance: u64| {
        let clock = ManualClock::new();
        let t = AdaptiveThrottle::builder()
            .config(always_active())
            .clock(clock)
            .seed(7)
            .instance_id(instance)
            .build()
            .unwrap();
        (0..2_000)
            .map(|i| match t.try_acquire() {
                Ok(p) if i % 5 == 0 => {
                    p.accepted();
                    true
                }
                Ok(p) => {
                    p.rejected_by_backend();
                    true
                }
                Err(_) => false,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(decisions(1), decisions(1), "same seed and instance");
    assert_ne!(decisions(1), decisions(2), "replicas draw differently");
}

#[test]
fn two_threads_count_exactly() {
    let clock = ManualClock::new();
    let t = throttle(&clock, always_active());
    let per_thread = 20_000u32;
    let shed: u32 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| s.spawn(|| drive(&t, Backend::AcceptsOneIn(4), per_thread)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let m = t.metrics();
    assert_eq!(m.totals.requests, u64::from(2 * per_thread));
    assert_eq!(m.totals.throttled, u64::from(shed));
    assert_eq!(m.window, m.totals, "nothing expired on a frozen clock");
    let sent = m.totals.requests - m.totals.throttled;
    assert_eq!(m.totals.accepts + m.totals.rejected_by_backend(), sent);
}
