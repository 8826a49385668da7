//! `tripline demo`: a breaker in front of a scripted dependency, on a
//! virtual clock, printing each decision as it happens.
//!
//! The script: healthy for 20 s, then down (every call fails) until 45 s,
//! then slow (800 ms answers) until 60 s, then healthy again. Traffic is 10
//! calls per second. The default breaker is a 10 s / 10-bucket time window,
//! 20 calls minimum, 50% failures or 80% slow calls (≥ 500 ms), backoff
//! 2 s → ×2 → 16 s, and 3 probes judged at 30%.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use tripline::breaker::{Backoff, Jitter, OpenDuration};
use tripline::clock::ManualClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, Event, EventKind, HalfOpenPolicy, Outcome, WindowConfig,
};

use crate::CliError;
use crate::words::count;

/// Options of `tripline demo`.
#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// A breaker config (TOML, YAML or JSON by extension, the library's
    /// vocabulary) instead of the built-in one.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// How long to run: a duration (`80s`, `2m`) or whole seconds (`80`);
    /// simulated time (default 80 s), or with `--live` wall-clock time
    /// (default 60 s). `--seconds` is an older name for it.
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds, alias = "seconds")]
    duration: Option<u64>,
    /// Run the real proxy in this process instead: two in-process
    /// upstreams under load, one failing then the other slow, with the
    /// live dashboard's URL printed to watch the breakers trip and recover.
    #[arg(long, conflicts_with = "config")]
    live: bool,
}

fn default_config() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "demo".into(),
        window: WindowConfig::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        },
        minimum_calls: 20,
        failure_rate_threshold: 0.5,
        slow_call_duration: Some(Duration::from_millis(500)),
        slow_call_rate_threshold: 0.8,
        open_duration: OpenDuration::Backoff(Backoff {
            initial: Duration::from_secs(2),
            multiplier: 2.0,
            max: Duration::from_secs(16),
            jitter: Jitter::None,
        }),
        half_open: HalfOpenPolicy::Permits {
            calls: 3,
            failure_rate_threshold: 0.3,
        },
        max_half_open_duration: Some(Duration::from_secs(30)),
        expected_calls_per_second: Some(10.0),
        ..Default::default()
    }
}

/// What the scripted dependency does at `t` seconds.
fn dependency(t: f64) -> (Outcome, Duration) {
    if (20.0..45.0).contains(&t) {
        (Outcome::Failure, Duration::from_millis(30))
    } else if (45.0..60.0).contains(&t) {
        (Outcome::Success, Duration::from_millis(800))
    } else {
        (Outcome::Success, Duration::from_millis(20))
    }
}

fn load_config(args: &DemoArgs) -> Result<CircuitBreakerConfig, CliError> {
    let Some(path) = &args.config else {
        return Ok(default_config());
    };
    CircuitBreakerConfig::from_path(path).map_err(|e| CliError::input(e.to_string()))
}

/// Simulated time to run: `80` (seconds), or a duration like every other
/// flag takes (`80s`, `2m`, `1m30s`).
fn parse_seconds(text: &str) -> Result<u64, String> {
    if let Ok(n) = text.parse::<u64>() {
        return Ok(n);
    }
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is neither seconds (80) nor a duration (80s, 2m): {e}"))?;
    if d.subsec_nanos() != 0 {
        return Err(format!("{text:?}: the demo runs whole seconds"));
    }
    Ok(d.as_secs())
}

pub(crate) fn run(args: &DemoArgs) -> Result<(), CliError> {
    if args.live {
        return crate::demo_live::run(Duration::from_secs(args.duration.unwrap_or(60)));
    }
    let seconds = args.duration.unwrap_or(80);
    let config = load_config(args)?;
    let clock = ManualClock::new();
    let (breaker, warnings) = CircuitBreaker::builder()
        .config(config)
        .clock(clock.clone())
        .seed(1)
        .build_with_warnings()
        .map_err(|e| CliError::input(e.to_string()))?;
    for w in warnings {
        println!("warning: {w}");
    }
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = events.clone();
    let _subscription = breaker.subscribe(move |e| {
        if let Ok(mut v) = sink.lock() {
            v.push(e.clone());
        }
    });
    println!(
        "dependency: healthy → down at 20s → slow (800ms) at 45s → healthy at 60s; 10 calls/s"
    );
    let step = Duration::from_millis(100);
    let calls = seconds * 10;
    let (mut sent, mut rejected) = (0u64, 0u64);
    for k in 0..calls {
        let t = k as f64 / 10.0;
        match breaker.try_acquire() {
            Ok(permit) => {
                sent += 1;
                let (outcome, latency) = dependency(t);
                permit.record(outcome, latency);
            }
            Err(_) => rejected += 1,
        }
        for e in events
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
        {
            print_event(&e);
        }
        clock.advance(step);
    }
    let m = breaker.metrics();
    println!(
        "\n{}: {sent} sent ({} succeeded, {} failed), {rejected} rejected locally; final state {}",
        count(calls, "call"),
        m.calls.successful,
        m.calls.failed,
        m.state
    );
    Ok(())
}

fn print_event(e: &Event) {
    if let EventKind::Transition(t) = &e.kind {
        let w = &t.window;
        let mut line = format!(
            "{:>7.1}s  {:<9} → {:<9} reason={:<21} window: {}, {} failed ({:.0}%), {} slow ({:.0}%)",
            e.at.as_secs_f64(),
            t.from.as_str(),
            t.to.as_str(),
            t.reason.as_str(),
            count(w.calls, "call"),
            w.failures,
            w.failure_rate() * 100.0,
            w.slow,
            w.slow_call_rate() * 100.0,
        );
        if let Some(d) = t.open_duration {
            line.push_str(&format!("; open for {}", tripline::clock::HumanDuration(d)));
        }
        println!("{line}");
    }
}
