//! Config parsers: the breaker's file formats, retry and budget tables,
//! the proxy's config, simulator scenarios and tripline-config documents.
//!
//! Text that is not UTF-8 is passed on lossily: every parser here reads
//! `&str`, and the file readers in front of them already report bytes
//! that are not UTF-8 by position, so the parsers themselves are what is
//! worth exploring.

use std::time::Duration;

use serde::Deserialize;
use tripline::breaker::{ConfigFormat, OpenDuration};
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::retry::RetryConfig;
use tripline::{CircuitBreaker, CircuitBreakerConfig, ManualClock};
use tripline_config::Document;
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;
use tripline_sim::Scenario;

fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// A breaker config in TOML.
pub fn breaker_config_toml(data: &[u8]) {
    breaker_config(data, ConfigFormat::Toml);
}

/// A breaker config in YAML.
pub fn breaker_config_yaml(data: &[u8]) {
    breaker_config(data, ConfigFormat::Yaml);
}

/// A breaker config in JSON.
pub fn breaker_config_json(data: &[u8]) {
    breaker_config(data, ConfigFormat::Json);
}

/// Parses, and for a config the parser accepts, builds the breaker (which
/// validates) and computes open durations for extreme probe rounds: the
/// backoff arithmetic is where an accepted but extreme value would bite.
fn breaker_config(data: &[u8], format: ConfigFormat) {
    let Ok(config) = CircuitBreakerConfig::from_str_with_format(&text(data), format) else {
        return;
    };
    if CircuitBreaker::builder()
        .config(config.clone())
        .clock(ManualClock::new())
        .build()
        .is_err()
    {
        return;
    }
    open_durations(&config.open_duration);
}

fn open_durations(open: &OpenDuration) {
    for round in [0, 1, 2, 63, 64, 1_000, u32::MAX] {
        for u in [0.0, 0.5, 0.999_999] {
            let _ = open.for_round(round, u);
        }
    }
}

/// A `[retry]` and a `[budget]` table, as the proxy's routes carry them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryTables {
    retry: Option<RetryConfig>,
    budget: Option<RetryBudgetConfig>,
}

/// Retry and retry-budget config (TOML). A valid retry config's backoff
/// is computed for every attempt it allows and a few beyond; a valid
/// budget is built and spent on a manual clock across its window.
pub fn retry_config(data: &[u8]) {
    let Ok(tables) = toml::from_str::<RetryTables>(&text(data)) else {
        return;
    };
    if let Some(retry) = tables.retry.filter(|r| r.validate().is_ok()) {
        let mut rng = 0x9e37_79b9_7f4a_7c15;
        let mut previous = Duration::ZERO;
        for attempt in (1..retry.max_attempts).chain([1_000, u32::MAX]) {
            previous = retry.backoff.delay(attempt, previous, &mut rng);
        }
    }
    if let Some(budget) = tables.budget.filter(|b| b.validate().is_ok()) {
        let clock = ManualClock::new();
        let window = budget.window;
        let Ok(budget) = RetryBudget::with_clock(budget, clock.clone()) else {
            return;
        };
        for _ in 0..4 {
            budget.deposit();
            let _ = budget.try_withdraw();
            let _ = budget.available();
            clock.advance(window / 3);
        }
        let _ = budget.stats();
    }
}

/// The proxy's TOML config; an accepted one is built into a proxy (every
/// route, cluster, breaker and budget) without serving.
pub fn proxy_config(data: &[u8]) {
    let Ok(config) = ProxyConfig::from_toml(&text(data)) else {
        return;
    };
    let _ = Proxy::builder(config).clock(ManualClock::new()).build();
}

/// A simulator scenario (TOML); parsing includes its validation.
pub fn scenario(data: &[u8]) {
    let Ok(scenario) = Scenario::from_toml("fuzz.toml", &text(data)) else {
        return;
    };
    let _ = scenario.calls_per_replica();
    let _ = scenario.total_rate();
}

/// A tripline-config document (raw bytes: the parser checks size and
/// UTF-8 itself). A valid document must survive its own round trip:
/// what `to_toml` writes, `parse` reads back as the same document.
pub fn config_document(data: &[u8]) {
    let Ok((doc, _warnings)) = Document::parse_and_validate(data) else {
        return;
    };
    let written = doc
        .to_toml()
        .unwrap_or_else(|e| panic!("a valid document cannot be written: {e}"));
    let read = Document::parse(written.as_bytes())
        .unwrap_or_else(|e| panic!("a written document cannot be read back: {e}\n{written}"));
    assert_eq!(read, doc, "round trip changed the document:\n{written}");
}
