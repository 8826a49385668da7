//! Retry on a ManualClock: attempts, backoff shapes, the classifier,
//! pushback, idempotency, the deadline, and bad config.

use std::time::Duration;

use tripline::clock::{Clock, ManualClock};
use tripline::pipeline::{Pipeline, PolicyError};
use tripline::retry::{Retry, RetryBackoff, RetryConfig, RetryDecision, RetryRefusal};
use tripline::timeout::{Deadline, TimeoutConfig};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn retry(clock: &ManualClock, config: RetryConfig) -> Retry {
    Retry::builder()
        .config(config)
        .clock(clock.clone())
        .seed(7)
        .build()
        .expect("valid config")
}

/// Runs a call that always fails and returns the waits between attempts.
fn waits(backoff: RetryBackoff, attempts: u32) -> Vec<Duration> {
    let clock = ManualClock::new();
    let r = retry(
        &clock,
        RetryConfig {
            max_attempts: attempts,
            backoff,
            ..Default::default()
        },
    );
    let mut starts = Vec::new();
    let _ = r.call(|_| {
        starts.push(clock.now());
        Err::<(), _>("down")
    });
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn stops_after_max_attempts_and_counts_the_refusal() {
    let clock = ManualClock::new();
    let r = retry(
        &clock,
        RetryConfig {
            max_attempts: 4,
            backoff: RetryBackoff::None,
            ..Default::default()
        },
    );
    let mut n = 0;
    assert_eq!(
        r.call(|_| {
            n += 1;
            Err::<(), _>(n)
        }),
        Err(PolicyError::Inner(4))
    );
    let s = r.stats();
    assert_eq!((s.attempts, s.retries), (4, 3));
    assert_eq!(s.refused(RetryRefusal::MaxAttempts), 1);
}

#[test]
fn backoff_shapes_on_a_manual_clock() {
    assert_eq!(
        waits(RetryBackoff::Constant { delay: ms(100) }, 4),
        vec![ms(100); 3]
    );
    assert_eq!(
        waits(
            RetryBackoff::Exponential {
                initial: ms(100),
                multiplier: 2.0,
                max: ms(500)
            },
            5
        ),
        vec![ms(100), ms(200), ms(400), ms(500)]
    );
    let jitter = RetryBackoff::DecorrelatedJitter {
        base: ms(10),
        max: ms(1000),
    };
    let a = waits(jitter.clone(), 8);
    assert_eq!(a, waits(jitter, 8), "seeded: reproducible");
    assert!(a.iter().all(|w| *w >= ms(10) && *w <= ms(1000)));
    assert!(a.windows(2).any(|w| w[0] != w[1]), "jittered: {a:?}");
}

#[test]
fn retry_on_sees_the_whole_result() {
    let clock = ManualClock::new();
    let r = retry(
        &clock,
        RetryConfig {
            backoff: RetryBackoff::None,
            ..Default::default()
        },
    );
    // A 400 is final; a 200 whose body says "busy" is retried.
    let retry_on = |res: &Result<&str, u16>| match res {
        Ok("busy") | Err(503) => RetryDecision::Retry,
        _ => RetryDecision::Done,
    };
    let mut n = 0;
    assert_eq!(
        r.call_with(retry_on, |_| {
            n += 1;
            Err::<&str, _>(400)
        }),
        Err(PolicyError::Inner(400))
    );
    assert_eq!(n, 1);
    let mut bodies = vec!["done", "busy"];
    assert_eq!(
        r.call_with(retry_on, |_| Ok(bodies.pop().unwrap())),
        Ok("done")
    );
}

#[test]
fn server_pushback_delays_and_do_not_retry_stops() {
    let clock = ManualClock::new();
    let r = retry(
        &clock,
        RetryConfig {
            backoff: RetryBackoff::Constant { delay: ms(10) },
            ..Default::default()
        },
    );
    let retry_after = |res: &Result<(), &str>| match res {
        Err(header) => RetryDecision::from_retry_after(header),
        Ok(_) => RetryDecision::Done,
    };
    let mut n = 0;
    let _ = r.call_with(retry_after, |_| {
        n += 1;
        if n == 1 { Err("2") } else { Ok(()) }
    });
    assert_eq!(
        clock.now().as_duration(),
        Duration::from_secs(2),
        "Retry-After: 2 beats the 10 ms backoff"
    );

    let pushback = |res: &Result<(), &str>| match res {
        Err(v) => RetryDecision::from_grpc_pushback(v),
        Ok(_) => RetryDecision::Done,
    };
    let mut n = 0;
    let out = r.call_with(pushback, |_| {
        n += 1;
        Err("-1")
    });
    assert_eq!((out, n), (Err(PolicyError::Inner("-1")), 1));
    assert_eq!(r.stats().refused(RetryRefusal::Pushback), 1);
}

#[test]
fn non_idempotent_operations_retry_only_with_an_idempotency_key() {
    let clock = ManualClock::new();
    let r = retry(
        &clock,
        RetryConfig {
            idempotent: false,
            backoff: RetryBackoff::None,
            ..Default::default()
        },
    );
    let mut n = 0;
    let _ = r.call(|_| {
        n += 1;
        Err::<(), _>("timeout while charging")
    });
    assert_eq!(n, 1, "never retried without a key");
    assert_eq!(r.stats().refused(RetryRefusal::NonIdempotent), 1);

    let mut n = 0;
    let out = r
        .pipeline()
        .request()
        .idempotency_key("charge-7f3a")
        .call(|_| {
            n += 1;
            if n < 3 {
                Err("timeout")
            } else {
                Ok("charged once")
            }
        });
    assert_eq!((out, n), (Ok("charged once"), 3));
}

#[test]
fn stops_when_the_deadline_cannot_fit_another_attempt() {
    let clock = ManualClock::new();
    let p = Pipeline::builder()
        .retry(RetryConfig {
            max_attempts: 10,
            backoff: RetryBackoff::Constant { delay: ms(300) },
            ..Default::default()
        })
        .timeouts(TimeoutConfig {
            overall: Some(ms(1000)),
            min_remaining: ms(50),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut starts = Vec::new();
    let out = p.call(|_| {
        starts.push(clock.now().as_duration());
        clock.advance(ms(20));
        Err::<(), _>("down")
    });
    // t=0, 320, 640; at 660 only 340 ms are left: 300 ms backoff + 50 ms floor do not fit.
    assert_eq!(starts, vec![ms(0), ms(320), ms(640)]);
    assert_eq!(out, Err(PolicyError::Inner("down")));
    assert_eq!(p.retry_stats().unwrap().refused(RetryRefusal::Deadline), 1);

    // An explicit, tighter deadline parameter wins over the configured one.
    let mut n = 0;
    let d = Deadline::after(&clock, ms(100));
    let _ = p.request().deadline(d).call(|_| {
        n += 1;
        Err::<(), _>("down")
    });
    assert_eq!(n, 1);
}

#[test]
fn bad_config_is_refused_naming_the_field() {
    let err = Retry::try_new(RetryConfig {
        max_attempts: 0,
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!((err.policy, err.field), ("retry", "max_attempts"));
    let err = RetryConfig {
        backoff: RetryBackoff::Exponential {
            initial: ms(1),
            multiplier: f64::NAN,
            max: ms(10),
        },
        ..Default::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(err.field, "backoff");
    assert!(err.to_string().contains("multiplier"), "{err}");
}

#[cfg(feature = "serde")]
#[test]
fn config_reads_from_toml_and_refuses_unknown_keys() {
    let c: RetryConfig = toml::from_str(
        r#"
        max_attempts = 4
        idempotent = false
        backoff = { kind = "exponential", initial = "100ms", multiplier = 2.0, max = "2s" }
        "#,
    )
    .unwrap();
    assert_eq!(c.max_attempts, 4);
    assert!(toml::from_str::<RetryConfig>("max_atempts = 4").is_err());
}
