//! The recorded traffic as an ordinary scenario file, so `tripline
//! simulate` and `sweep` can run it and people can edit it.
//!
//! A scenario has a constant call rate, so this is the recording's shape,
//! not its every call: the rate is the healthy mean, a healthy call takes
//! the median latency, the background errors are one probabilistic fault
//! over the whole run (`expect_trip = false`, so trips on it are false
//! trips), and each outage is a fault at its failed (or slow) share, with
//! its recorded times. (The simulator attributes a call to the latest
//! fault started, so the stretch after an outage counts as the outage's
//! until the next one starts.) The replay `tune` ranks with is the
//! exact-rate, second-by-second one in [`replay`](super::replay).

use std::fmt::Write as _;

use tripline::CircuitBreakerConfig;

use super::outage::Kind;
use super::recommend::{Tuning, config_toml};

/// The scenario text, with `config` as its one `[[breaker]]`.
pub fn scenario_toml(t: &Tuning, config: &CircuitBreakerConfig) -> String {
    let mut s = String::new();
    let rate = t.candidates.facts.healthy_rate.max(0.001);
    let _ = writeln!(
        s,
        "# Made by `tripline tune` from recorded traffic: the healthy mean rate,"
    );
    let _ = writeln!(
        s,
        "# the median latency, background errors and the outages found."
    );
    let _ = writeln!(s, "name = \"recorded traffic\"");
    let _ = writeln!(s, "duration = \"{}s\"", t.traffic.seconds.max(1));
    let _ = writeln!(s, "\n[traffic]\nrate = {rate:.3}");
    let _ = writeln!(s, "latency = \"{:.3}ms\"", t.baseline.p50_ms);
    if t.baseline.failure_rate > 0.0 {
        let _ = writeln!(
            s,
            "\n[[fault]]\nname = \"background errors\"\nstart = \"0s\"\nrate = {:.6}\nexpect_trip = false",
            t.baseline.failure_rate.min(1.0)
        );
    }
    for (i, o) in t.outages.iter().enumerate() {
        let _ = writeln!(s, "\n[[fault]]\nname = \"outage {}\"", i + 1);
        let _ = writeln!(
            s,
            "start = \"{}s\"\nend = \"{}s\"",
            o.from,
            o.to.min(t.traffic.seconds).max(o.from + 1)
        );
        match o.kind {
            Kind::Errors => {
                let _ = writeln!(s, "rate = {:.6}", o.failure_rate.clamp(0.000_001, 1.0));
            }
            Kind::Slow => {
                let slow_ms = t.baseline.p50_ms * super::outage::SLOW_FACTOR * 2.0;
                let _ = writeln!(
                    s,
                    "kind = \"latency\"\nlatency = \"{slow_ms:.0}ms\"\nrate = {:.6}",
                    o.slow_rate.clamp(0.000_001, 1.0)
                );
            }
        }
    }
    let _ = writeln!(s, "\n[[breaker]]");
    s.push_str(&config_toml(config));
    s
}
