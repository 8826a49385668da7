//! Timeouts and deadlines: the header, the context, the floor, per-attempt
//! timeouts (sync after the fact, async on paused tokio time).

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::pipeline::{Pipeline, PolicyError};
use tripline::retry::{RetryBackoff, RetryConfig};
use tripline::timeout::{
    Deadline, DeadlineExceeded, TimeoutConfig, format_timeout_ms, parse_grpc_timeout,
    parse_timeout_ms,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn header_values_round_trip_and_malformed_ones_are_refused() {
    for d in [ms(0), ms(1), ms(750), Duration::from_secs(86_400)] {
        assert_eq!(parse_timeout_ms(&format_timeout_ms(d)), Ok(d));
    }
    for bad in ["", " ", "-5", "1.5", "1e3", "12ms", "9999999999999", "٣"] {
        assert!(parse_timeout_ms(bad).is_err(), "{bad:?}");
    }
    assert_eq!(parse_grpc_timeout("1H"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_grpc_timeout("3M"), Ok(Duration::from_secs(180)));
    assert_eq!(parse_grpc_timeout("100u"), Ok(Duration::from_micros(100)));
    assert_eq!(parse_grpc_timeout("7n"), Ok(Duration::from_nanos(7)));
    for bad in ["", "S", "10", "10x", "-1S", "123456789m", "1.5S", "5秒"] {
        assert!(parse_grpc_timeout(bad).is_err(), "{bad:?}");
    }
}

#[cfg(feature = "tower")]
#[test]
fn deadline_travels_in_headers_and_malformed_ones_count_as_absent() {
    use tripline::timeout::{DEADLINE_HEADER, malformed_header_count};
    let clock = ManualClock::new();
    let mut h = http::HeaderMap::new();
    h.insert("grpc-timeout", "250m".parse().unwrap());
    let d = Deadline::from_headers(&h, &clock).unwrap();
    assert_eq!(d.remaining(&clock), ms(250));
    clock.advance(ms(100));
    d.write_headers(&mut h, &clock);
    assert_eq!(h[DEADLINE_HEADER], "150");
    assert!(h.get("grpc-timeout").is_none());

    let before = malformed_header_count();
    h.insert(DEADLINE_HEADER, "soon".parse().unwrap());
    assert_eq!(Deadline::from_headers(&h, &clock), None);
    assert!(malformed_header_count() > before);
}

#[cfg(feature = "tower")]
#[test]
fn the_own_deadline_header_wins_over_grpc_timeout_wherever_it_stands() {
    use tripline::timeout::DEADLINE_HEADER;
    let clock = ManualClock::new();
    for own_first in [true, false] {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::HOST, "x".parse().unwrap());
        if own_first {
            h.insert(DEADLINE_HEADER, "300".parse().unwrap());
        }
        h.insert("grpc-timeout", "5S".parse().unwrap());
        h.insert("x-other", "1".parse().unwrap());
        if !own_first {
            h.insert(DEADLINE_HEADER, "300".parse().unwrap());
        }
        let d = Deadline::from_headers(&h, &clock).unwrap();
        assert_eq!(d.remaining(&clock), ms(300), "own first: {own_first}");
    }
    // Two values of the header: the first counts, as `HeaderMap::get` has it.
    let mut h = http::HeaderMap::new();
    h.append(DEADLINE_HEADER, "100".parse().unwrap());
    h.append(DEADLINE_HEADER, "900".parse().unwrap());
    assert_eq!(
        Deadline::from_headers(&h, &clock)
            .unwrap()
            .remaining(&clock),
        ms(100)
    );
}

#[test]
fn context_deadline_nests_and_only_tightens() {
    let clock = ManualClock::new();
    let outer = Deadline::after(&clock, ms(500));
    let looser = Deadline::after(&clock, ms(900));
    let tighter = Deadline::after(&clock, ms(100));
    outer.scope(|| {
        assert_eq!(Deadline::current(), Some(outer));
        looser.scope(|| assert_eq!(Deadline::current(), Some(outer), "never extended"));
        tighter.scope(|| assert_eq!(Deadline::current(), Some(tighter)));
        assert_eq!(Deadline::current(), Some(outer));
    });
    assert_eq!(Deadline::current(), None);
}

#[test]
fn the_pipeline_reads_the_context_deadline_and_fails_fast_below_the_floor() {
    let clock = ManualClock::new();
    let p = Pipeline::builder()
        .timeouts(TimeoutConfig {
            min_remaining: ms(20),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let upstream = Deadline::after(&clock, ms(30));
    clock.advance(ms(15));
    let mut called = false;
    let out = upstream.scope(|| {
        p.call(|_| {
            called = true;
            Ok::<_, ()>(())
        })
    });
    assert!(!called, "15 ms left, 20 ms floor: no point calling");
    assert_eq!(
        out,
        Err(PolicyError::DeadlineExceeded(DeadlineExceeded {
            remaining: ms(15),
            floor: ms(20)
        }))
    );
    // Attempts see (and nested pipelines inherit) the deadline.
    let seen = Deadline::after(&clock, ms(500))
        .scope(|| p.call(|a| Ok::<_, ()>((a.deadline(), Deadline::current()))))
        .unwrap();
    assert_eq!(seen.0, seen.1);
    assert_eq!(seen.0.unwrap().remaining(&clock), ms(500));
}

#[test]
fn a_sync_attempt_that_overran_is_a_timeout_and_is_retried() {
    let clock = ManualClock::new();
    let p = Pipeline::builder()
        .retry(RetryConfig {
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .timeouts(TimeoutConfig {
            per_attempt: Some(ms(100)),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let out = p.call(|a| {
        assert_eq!(a.timeout(), Some(ms(100)));
        clock.advance(ms(if a.number() == 1 { 150 } else { 10 }));
        Ok::<_, ()>(a.number())
    });
    assert_eq!(out, Ok(2), "the late first answer was discarded");
}

#[test]
fn a_per_attempt_timeout_longer_than_the_deadline_is_refused() {
    let err = Pipeline::builder()
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_secs(5)),
            overall: Some(Duration::from_secs(1)),
            ..Default::default()
        })
        .build()
        .unwrap_err();
    assert_eq!((err.policy, err.field), ("timeout", "per_attempt"));
}

#[cfg(feature = "tokio")]
mod on_tokio {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tripline::timeout::{Timeout, TokioTimer};

    fn pipeline(timeouts: TimeoutConfig, attempts: u32) -> Pipeline {
        Pipeline::builder()
            .retry(RetryConfig {
                max_attempts: attempts,
                backoff: RetryBackoff::Constant { delay: ms(10) },
                ..Default::default()
            })
            .timeouts(timeouts)
            .timer(Arc::new(TokioTimer))
            .clock(TokioTimer.clock())
            .build()
            .expect("valid config")
    }

    #[tokio::test(start_paused = true)]
    async fn an_async_attempt_is_abandoned_at_its_timeout() {
        let p = pipeline(
            TimeoutConfig {
                per_attempt: Some(ms(100)),
                ..Default::default()
            },
            1,
        );
        let finished = Arc::new(AtomicBool::new(false));
        let f = finished.clone();
        let start = tokio::time::Instant::now();
        let out = p
            .call_async(move |_| {
                let f = f.clone();
                async move {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    f.store(true, Ordering::SeqCst);
                    Ok::<_, ()>(())
                }
            })
            .await;
        assert_eq!(out, Err(PolicyError::Timeout(Timeout { after: ms(100) })));
        assert_eq!(start.elapsed(), ms(100));
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!finished.load(Ordering::SeqCst), "the attempt was dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn the_overall_deadline_bounds_retries_and_backoff() {
        let p = pipeline(
            TimeoutConfig {
                per_attempt: Some(ms(300)),
                overall: Some(ms(500)),
                ..Default::default()
            },
            10,
        );
        let start = tokio::time::Instant::now();
        let out = p
            .call_async(|a| async move {
                assert_eq!(tripline::timeout::Deadline::current(), a.deadline());
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok::<_, ()>(())
            })
            .await;
        // attempt 1 times out at 300, backoff 10, attempt 2 cut at 500 by the deadline
        assert!(
            matches!(out, Err(PolicyError::DeadlineExceeded(_))),
            "{out:?}"
        );
        assert_eq!(start.elapsed(), ms(500));
    }
}
