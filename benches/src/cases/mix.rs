//! The failure-heavy mix, after recloser's own benchmark: call `n` fails
//! when `n % 5 == 0` (20 %) and the clock advances 1.5 s per call against a
//! 1 s open duration, so every breaker keeps tripping, probing and
//! recovering. Every breaker is set to trip at 20 % over a 10-call sample
//! and to judge 5 half-open probes (closing at < 50 % failures where the
//! library has such a setting).
//!
//! Clocks: tripline (`ManualClock`), failsafe (its `clock::freeze` mock
//! clock, one per timed batch) and seatbelt (tick's `ClockControl`) advance
//! 1.5 s per call. recloser, circuitbreaker-rs and tower-resilience read
//! `Instant::now()` with no way to inject a clock: they get a 1 ns open
//! duration, which the real clock has always passed by the next call —
//! the same state sequence as a 1 s wait with the clock 1.5 s further on.

use std::future::{Ready, ready};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use failsafe::{backoff, failure_policy};
use layered::Service as _;
use tower::Layer as _;
use tripline::breaker::OpenDuration;
use tripline::{CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, WindowConfig};

use super::closed::classify;
use super::{Case, Factory, case, shared, shared_rt};
use crate::{Bench, BenchError, Reply, flaky_op, now, runtime, value};

/// Clock advance per call.
const STEP: Duration = Duration::from_millis(1500);
/// Open duration where the clock can be advanced.
const OPEN: Duration = Duration::from_secs(1);
/// Open duration on the real clock: always over by the next call.
const TINY: Duration = Duration::from_nanos(1);

pub(super) fn cases() -> Vec<Case> {
    vec![
        case("mix", "bare", bare),
        case("mix", "tripline", |w| tripline(w, None)),
        case("mix", "recloser", recloser),
        case("mix", "failsafe_default", |w| failsafe_default(w, None)),
        case("mix", "failsafe_consecutive", |w| {
            failsafe_consecutive(w, None)
        }),
        case("mix", "circuitbreaker_rs", |w| circuitbreaker_rs(w, None)),
        case("mix", "seatbelt", |w| seatbelt(w, None)),
        case("mix", "tower_resilience", |w| tower_resilience(w, None)),
    ]
}

/// Counts state transitions (to any state) seen by a library's own hooks.
type Transitions = Option<Arc<AtomicU64>>;

fn count(t: &Transitions) -> impl Fn() + Send + Sync + 'static {
    let t = t.clone();
    move || {
        if let Some(t) = &t {
            t.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// State transitions per `calls` calls of the mix, through each library's
/// transition hooks on a twin of the measured breaker (the measured one has
/// no hook installed), to show that every breaker keeps tripping and
/// recovering. `None`: the library has no hook (recloser reports
/// transitions only through `tracing`; its allocations per call show them).
pub fn mix_transitions(calls: u64) -> Vec<(&'static str, Option<u64>)> {
    type Make = fn(bool, Transitions) -> Factory;
    let makers: [(&'static str, Option<Make>); 7] = [
        ("tripline", Some(tripline)),
        ("recloser", None),
        ("failsafe_default", Some(failsafe_default)),
        ("failsafe_consecutive", Some(failsafe_consecutive)),
        ("circuitbreaker_rs", Some(circuitbreaker_rs)),
        ("seatbelt", Some(seatbelt)),
        ("tower_resilience", Some(tower_resilience)),
    ];
    makers
        .into_iter()
        .map(|(name, make)| {
            (
                name,
                make.map(|make| {
                    let t = Arc::new(AtomicU64::new(0));
                    make(false, Some(t.clone()))().run(calls);
                    t.load(Ordering::Relaxed)
                }),
            )
        })
        .collect()
}

fn bare(work: bool) -> Factory {
    shared(0u64, work, |n| {
        *n += 1;
        value(flaky_op()(*n))
    })
}

/// The mix's time for tripline: the loop sets it before each call with a
/// plain store. `ManualClock::advance` is a locked read-modify-write (it
/// must be right when several threads advance one clock), which on the
/// machines of `benches/README.md` costs ~6 ns a call — a cost of the test
/// clock, not of the breaker, that recloser (on the real clock) does not
/// pay. Only this loop's thread moves it.
#[derive(Clone, Default)]
struct StepClock(Arc<AtomicU64>);

impl tripline::clock::Clock for StepClock {
    fn now(&self) -> tripline::clock::Timestamp {
        tripline::clock::Timestamp::from_nanos(self.0.load(Ordering::Acquire))
    }

    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
}

/// Count window of 10, trip at 20 % after 10 calls, 1 s open, 5 probes
/// closing below 50 % failures.
fn tripline(work: bool, transitions: Transitions) -> Factory {
    let clock = StepClock::default();
    let b = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 10,
            failure_rate_threshold: 0.2,
            open_duration: OpenDuration::Fixed(OPEN),
            half_open: HalfOpenPolicy::Permits {
                calls: 5,
                failure_rate_threshold: 0.5,
            },
            ..Default::default()
        })
        .clock(tripline::clock::SharedClock::custom(clock.clone()))
        .build()
        .expect("valid config");
    if transitions.is_some() {
        let hook = count(&transitions);
        b.subscribe(move |e| {
            if matches!(e.kind, tripline::EventKind::Transition(_)) {
                hook();
            }
        })
        .detach();
    }
    let step = u64::try_from(STEP.as_nanos()).unwrap_or(u64::MAX);
    shared((b, clock, 0u64), work, move |(b, clock, n)| {
        *n += 1;
        let n = *n;
        clock.0.store(n.saturating_mul(step), Ordering::Release);
        value(b.call(|| flaky_op()(n)))
    })
}

/// 10-call closed ring tripping at ≥ 20 %, 5-call half-open ring reopening
/// at ≥ 50 %.
fn recloser(work: bool) -> Factory {
    let r = recloser::Recloser::custom()
        .closed_len(10)
        .half_open_len(5)
        .error_rate_closed(0.2)
        .error_rate_half_open(0.5)
        .open_wait(TINY)
        .build();
    shared((Arc::new(r), 0u64), work, |(r, n)| {
        *n += 1;
        let n = *n;
        value(r.call(|| flaky_op()(n)))
    })
}

/// failsafe under its thread-local mock clock: `freeze` wraps each timed
/// batch, and the clock advances 1.5 s per call inside it. Each `freeze`
/// starts a new mock clock at the real time, so every batch first moves it
/// on by all the time simulated so far (failsafe's moving average panics if
/// time goes backwards).
struct FailsafeMix<P, I> {
    cb: failsafe::StateMachine<P, I>,
    n: u64,
    simulated: Duration,
    work: bool,
}

impl<P, I> Bench for FailsafeMix<P, I>
where
    P: failsafe::FailurePolicy + Send,
    I: failsafe::Instrument + Send + Sync,
{
    #[allow(clippy::disallowed_methods)] // benchmarks measure real time
    fn run(&mut self, iters: u64) -> Duration {
        failsafe::clock::freeze(|clock| {
            clock.advance(self.simulated);
            self.simulated += STEP * u32::try_from(iters).unwrap_or(u32::MAX);
            let start = Instant::now();
            for _ in 0..iters {
                clock.advance(STEP);
                self.n += 1;
                let n = self.n;
                let v = value(failsafe::CircuitBreaker::call(&self.cb, || flaky_op()(n)));
                black_box(if self.work {
                    v.wrapping_add(crate::work())
                } else {
                    v
                });
            }
            start.elapsed()
        })
    }
}

/// failsafe's transition hooks.
struct Instrumented(Transitions);

impl failsafe::Instrument for Instrumented {
    fn on_call_rejected(&self) {}
    fn on_open(&self) {
        count(&self.0)();
    }
    fn on_half_open(&self) {
        count(&self.0)();
    }
    fn on_closed(&self) {
        count(&self.0)();
    }
}

fn failsafe_factory<P>(policy: P, transitions: Transitions, work: bool) -> Factory
where
    P: failsafe::FailurePolicy + Send + 'static,
{
    if transitions.is_some() {
        let cb = failsafe::Config::new()
            .failure_policy(policy)
            .instrument(Instrumented(transitions))
            .build();
        return failsafe_shared(cb, work);
    }
    failsafe_shared(failsafe::Config::new().failure_policy(policy).build(), work)
}

fn failsafe_shared<P, I>(cb: failsafe::StateMachine<P, I>, work: bool) -> Factory
where
    P: failsafe::FailurePolicy + Send + 'static,
    I: failsafe::Instrument + Send + Sync + 'static,
{
    let proto = std::sync::Mutex::new(cb);
    Arc::new(move || {
        let cb = proto.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Box::new(FailsafeMix {
            cb,
            n: 0,
            simulated: Duration::ZERO,
            work,
        })
    })
}

/// The default policy's shape: success rate ≥ 85 % over 15 s (about 10
/// calls at 1.5 s each; its EMA puts 20 % failures under it), at least 10
/// calls, or 5 consecutive failures; 1 s constant backoff. A success in
/// half-open closes it (one probe).
fn failsafe_default(work: bool, transitions: Transitions) -> Factory {
    use failsafe::FailurePolicy as _;
    let policy = failure_policy::success_rate_over_time_window(
        0.85,
        10,
        Duration::from_secs(15),
        backoff::constant(OPEN),
    )
    .or_else(failure_policy::consecutive_failures(
        5,
        backoff::constant(OPEN),
    ));
    failsafe_factory(policy, transitions, work)
}

/// Trip on every failure, as recloser's benchmark configures failsafe.
fn failsafe_consecutive(work: bool, transitions: Transitions) -> Factory {
    let policy = failure_policy::consecutive_failures(1, backoff::constant(OPEN));
    failsafe_factory(policy, transitions, work)
}

/// 20 % over at least 10 calls (its counters are cumulative, reset on
/// close), no cooldown, 5 probes, 3 consecutive successes close it.
fn circuitbreaker_rs(work: bool, transitions: Transitions) -> Factory {
    type Cb = circuitbreaker_rs::CircuitBreaker<circuitbreaker_rs::DefaultPolicy, BenchError>;
    let hooks = circuitbreaker_rs::HookRegistry::new();
    if transitions.is_some() {
        hooks.set_on_open(count(&transitions));
        hooks.set_on_half_open(count(&transitions));
        hooks.set_on_close(count(&transitions));
    }
    let cb = Cb::builder()
        .failure_threshold(0.2)
        .min_throughput(10)
        .cooldown(Duration::ZERO)
        .probe_interval(5)
        .hooks(hooks)
        .build();
    shared((Arc::new(cb), 0u64), work, |(cb, n)| {
        *n += 1;
        let n = *n;
        value(cb.call(|| flaky_op()(n)))
    })
}

/// seatbelt on tick's `ClockControl`: > 15 % over a 15 s sampling window
/// (about 10 calls), at least 10 calls, 1 s break, quick half-open mode
/// (one probe): its default progressive mode judges each probing stage by
/// the same 15 %, which a steady 20 % never passes, so it would stay open.
fn seatbelt(work: bool, transitions: Transitions) -> Factory {
    use layered::Stack as _;
    let control = tick::ClockControl::new();
    let clock = control.to_clock();
    let ctx = seatbelt::ResilienceContext::<u64, Reply>::new(&clock);
    fn call(n: u64) -> Ready<Reply> {
        ready(flaky_op()(n))
    }
    let svc = (
        seatbelt::breaker::Breaker::layer("bench", &ctx)
            .recovery_with(classify)
            .rejected_input_error(|_, _| BenchError)
            .failure_threshold(0.15)
            .min_throughput(10)
            .sampling_duration(Duration::from_secs(15))
            .break_duration(OPEN)
            .half_open_mode(seatbelt::breaker::HalfOpenMode::quick())
            .on_opened({
                let hook = count(&transitions);
                move |_, _| hook()
            })
            .on_closed({
                let hook = count(&transitions);
                move |_, _| hook()
            }),
        layered::Execute::new(call as fn(u64) -> Ready<Reply>),
    )
        .into_service();
    shared_rt((svc, control, 0u64), work, |(s, control, n)| {
        control.advance(STEP);
        *n += 1;
        value(now(s.execute(*n)))
    })
}

/// tower-resilience: 10-call window, 20 %, at least 10 calls, 5 probes.
fn tower_resilience(work: bool, transitions: Transitions) -> Factory {
    let _rt = runtime().enter();
    fn call(n: u64) -> Ready<Reply> {
        ready(flaky_op()(n))
    }
    let svc = tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.2)
        .sliding_window_size(10)
        .minimum_number_of_calls(10)
        .permitted_calls_in_half_open(5)
        .wait_duration_in_open(TINY)
        .on_state_transition({
            let hook = count(&transitions);
            move |_, _| hook()
        })
        .build()
        .expect("valid config")
        .layer(tower::service_fn(call as fn(u64) -> Ready<Reply>));
    shared_rt((svc, 0u64), work, |(s, n)| {
        *n += 1;
        value(crate::tower_call_with(s, *n))
    })
}
