//! Reconfigurations that change the window's shape: replaced windows are
//! freed (memory stays that of one breaker however often it is reshaped,
//! and `memory_footprint` says so), and the cumulative counts of
//! [`Metrics`](tripline::Metrics) never go down across a reshape.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use proptest::prelude::*;
use tripline::breaker::CallCounts;
use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

const SLOW_MS: u64 = 100;

/// The shapes the tests move between: count windows small and large,
/// time windows coarse and fine.
const SHAPES: [WindowConfig; 5] = [
    WindowConfig::Count { size: 100 },
    WindowConfig::Count { size: 10 },
    WindowConfig::Count { size: 1 },
    WindowConfig::Time {
        length: Duration::from_secs(10),
        buckets: 10,
    },
    WindowConfig::Time {
        length: Duration::from_secs(1),
        buckets: 1,
    },
];

fn config(window: WindowConfig, minimum_calls: u32) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "reshaped".into(),
        window,
        minimum_calls,
        slow_call_duration: Some(Duration::from_millis(SLOW_MS)),
        ..Default::default()
    }
}

fn build(config: CircuitBreakerConfig, clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(config)
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn record(b: &CircuitBreaker, outcome: Outcome, millis: u64, n: usize) {
    for _ in 0..n {
        if let Ok(p) = b.try_acquire() {
            p.record(outcome, Duration::from_millis(millis));
        }
    }
}

/// Net bytes `f` leaves allocated (on this thread's counting allocator).
fn retained_by(f: impl FnOnce()) -> i64 {
    allocation_counter::measure(f).bytes_current
}

/// The worked example: 900 successes and 100 failures in a 100-slot
/// window, resized to 10 slots with no call in between.
#[test]
fn a_resize_keeps_the_cumulative_counts() {
    let clock = ManualClock::new();
    // A million calls minimum: the window never trips, it only slides.
    let b = build(config(SHAPES[0], 1_000_000), &clock);
    for _ in 0..100 {
        record(&b, Outcome::Success, 0, 8);
        record(&b, Outcome::Success, SLOW_MS, 1);
        record(&b, Outcome::Failure, SLOW_MS, 1);
    }
    let before = b.metrics().calls;
    assert_eq!(
        (
            before.successful,
            before.failed,
            before.slow,
            before.slow_failed
        ),
        (900, 100, 200, 100)
    );
    b.reconfigure(config(SHAPES[1], 1_000_000)).unwrap();
    assert_eq!(b.metrics().calls, before, "a resize is not a call");
    assert_eq!(b.window().calls, 10, "only the live window is re-sampled");
    b.reconfigure(config(SHAPES[3], 1_000_000)).unwrap();
    assert_eq!(b.metrics().calls, before, "nor is a change of kind");
    record(&b, Outcome::Failure, 0, 1);
    assert_eq!(b.metrics().calls.failed, 101, "and counting goes on");
}

/// Moves `b` through `SHAPES` `times` times, with a call between reshapes.
fn reshape_repeatedly(b: &CircuitBreaker, times: usize) {
    for i in 0..times {
        b.reconfigure(config(SHAPES[i % SHAPES.len()], 20)).unwrap();
        record(b, Outcome::Success, 0, 1);
    }
}

#[test]
fn thousands_of_reshapes_keep_the_memory_of_one_breaker() {
    let clock = ManualClock::new();
    let fresh = SHAPES
        .iter()
        .map(|&w| build(config(w, 20), &clock).memory_footprint())
        .max()
        .unwrap();
    let b = build(config(SHAPES[0], 20), &clock);
    // Per-thread state (stripe tags, the settings cell's reader slots) is
    // allocated on first use, once per thread: not the breaker's.
    reshape_repeatedly(&b, SHAPES.len());
    let first = retained_by(|| reshape_repeatedly(&b, SHAPES.len()));
    let more = retained_by(|| reshape_repeatedly(&b, 3_000));
    println!(
        "fresh breaker ≤ {fresh} B; after 3 000 reshapes: footprint {} B, \
         {more} B retained by them",
        b.memory_footprint()
    );
    assert!(
        more <= first.max(0) + 256,
        "3 000 reshapes retained {more} B, one round {first} B"
    );
    // The original window stays inline beside the current one: at most
    // one window more than a fresh breaker of the largest shape.
    assert!(
        b.memory_footprint() <= 2 * fresh,
        "footprint {} B, fresh {fresh} B",
        b.memory_footprint()
    );
}

#[test]
fn the_footprint_of_a_reshaped_breaker_is_what_it_holds() {
    let clock = ManualClock::new();
    let warm = build(config(SHAPES[3], 20), &clock);
    reshape_repeatedly(&warm, SHAPES.len());
    for reshapes in [0, 1, 2, 3_000] {
        let mut b = None;
        let held = retained_by(|| {
            let built = build(config(SHAPES[0], 20), &clock);
            reshape_repeatedly(&built, reshapes);
            b = Some(built);
        });
        let b = b.unwrap();
        let footprint = b.memory_footprint() as i64;
        println!("{reshapes} reshapes: footprint {footprint} B, {held} B allocated");
        // The footprint approximates the config's heap (strings, vectors)
        // by the struct sizes: within a few hundred bytes either way.
        assert!(
            (held - footprint).abs() <= 512,
            "{reshapes} reshapes: footprint {footprint} B but {held} B allocated"
        );
    }
}

#[test]
fn a_family_reshaped_thousands_of_times_keeps_its_memory() {
    let clock = ManualClock::new();
    let registry = BreakerRegistry::<u32>::builder(RegistryConfig {
        breaker: config(SHAPES[0], 20),
        ..Default::default()
    })
    .clock(clock.clone())
    .build()
    .unwrap();
    let breakers: Vec<_> = (0..50).map(|k| registry.get(&k).unwrap()).collect();
    let reshape = |times: usize| {
        for i in 0..times {
            let window = SHAPES[i % SHAPES.len()];
            registry
                .reconfigure_family(CircuitBreakerConfig {
                    window,
                    ..registry.family_config()
                })
                .unwrap();
            for b in &breakers {
                record(b, Outcome::Success, 0, 1);
            }
        }
    };
    reshape(SHAPES.len());
    let first = retained_by(|| reshape(SHAPES.len()));
    let more = retained_by(|| reshape(1_000));
    println!("a 50-breaker family: one round retained {first} B, 1 000 reshapes {more} B");
    assert!(
        more <= first.max(0) + 4_096,
        "1 000 family reshapes retained {more} B, one round {first} B"
    );
}

/// One step of a breaker's life.
#[derive(Clone, Debug)]
enum Step {
    Call(Outcome, u64),
    Reshape(usize),
    Advance(u64),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (
            prop_oneof![
                4 => Just(Outcome::Success),
                3 => Just(Outcome::Failure),
                1 => Just(Outcome::Ignored)
            ],
            prop_oneof![Just(0u64), Just(SLOW_MS), Just(5 * SLOW_MS)],
        )
            .prop_map(|(o, ms)| Step::Call(o, ms)),
        2 => (0..SHAPES.len()).prop_map(Step::Reshape),
        2 => (0u64..4_000).prop_map(Step::Advance),
    ]
}

/// Every field of `now` is at least its value in `before`.
fn none_decreased(before: &CallCounts, now: &CallCounts) -> bool {
    let fields = |c: &CallCounts| {
        [
            c.successful,
            c.failed,
            c.slow,
            c.slow_failed,
            c.ignored,
            c.rejected,
            c.cancelled,
            c.late,
            c.probes_succeeded,
            c.probes_failed,
        ]
    };
    fields(before).iter().zip(fields(now)).all(|(b, n)| *b <= n)
}

proptest! {
    /// Through any sequence of calls, reshapes and time, no cumulative
    /// count ever decreases, and every recorded success or failure is
    /// counted exactly once.
    #[test]
    fn cumulative_counts_never_decrease_across_reshapes(
        first in 0..SHAPES.len(),
        steps in prop::collection::vec(arb_step(), 1..120),
    ) {
        let clock = ManualClock::new();
        let b = build(config(SHAPES[first], 3), &clock);
        let mut before = b.metrics().calls;
        let mut recorded = 0u64;
        for step in &steps {
            match *step {
                Step::Call(outcome, ms) => {
                    if let Ok(p) = b.try_acquire() {
                        p.record(outcome, Duration::from_millis(ms));
                        recorded += u64::from(outcome != Outcome::Ignored);
                    }
                }
                Step::Reshape(i) => {
                    b.reconfigure(config(SHAPES[i], 3)).unwrap();
                }
                Step::Advance(ms) => {
                    clock.advance(Duration::from_millis(ms));
                }
            }
            let now = b.metrics().calls;
            prop_assert!(none_decreased(&before, &now), "{step:?}: {before:?} → {now:?}");
            prop_assert_eq!(now.successful + now.failed, recorded, "after {:?}", step);
            before = now;
        }
    }
}
