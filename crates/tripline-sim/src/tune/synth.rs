//! Synthetic access logs in the proxy's exact JSON line format, with known
//! outages: for the bundled example, the tests and the speed bench, where
//! the truth must be known to check what `tune` finds.
//!
//! Requests arrive evenly at `rate` per second; a healthy try fails with
//! probability `failure_rate` (a `gateway_failure`) and takes 8–40 ms; a
//! try inside an outage fails (`connect_failure`, 1–3 ms) with
//! probability `outage_failure_rate`, or, for a slow outage, succeeds in
//! 1.5–2.5 s. Draws come from a counter-based generator keyed by the
//! request's index, so the same spec gives the same bytes.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::{Duration, UNIX_EPOCH};

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// Unix second of the first request.
    pub start: u64,
    /// Seconds of traffic.
    pub seconds: u64,
    /// Requests per second.
    pub rate: u32,
    /// A healthy try's failure probability.
    pub failure_rate: f64,
    /// `(from, to, slow)`: seconds from the start; `slow` makes tries slow
    /// instead of failed.
    pub outages: Vec<(u64, u64, bool)>,
    /// Failure probability inside an (error) outage.
    pub outage_failure_rate: f64,
    /// The route every line names.
    pub route: String,
    /// `(from, to, rate)`: a stretch (seconds from the start) at another
    /// request rate, such as a busy part of the day.
    pub busy: Option<(u64, u64, u32)>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            start: 1_796_112_000, // 2026-12-01T08:00:00Z
            seconds: 1200,
            rate: 20,
            failure_rate: 0.01,
            outages: Vec::new(),
            outage_failure_rate: 1.0,
            route: "api".to_owned(),
            busy: None,
        }
    }
}

fn draw(k: u64, salt: u64) -> f64 {
    let key = k.wrapping_mul(tripline::rng::GAMMA) ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03);
    tripline::rng::mix(key) as f64 / u64::MAX as f64
}

/// Writes the log, one JSON line per request.
pub fn write(spec: &Spec, out: &mut impl Write) -> io::Result<()> {
    let mut line = String::with_capacity(400);
    let mut k = 0u64;
    for s in 0..spec.seconds {
        let outage = spec.outages.iter().find(|o| (o.0..o.1).contains(&s));
        let rate = match spec.busy {
            Some((from, to, r)) if (from..to).contains(&s) => r,
            _ => spec.rate,
        };
        for i in 0..rate {
            k += 1;
            let nanos = u64::from(i) * 1_000_000_000 / u64::from(rate);
            let at = UNIX_EPOCH + Duration::from_secs(spec.start + s) + Duration::from_nanos(nanos);
            let (outcome, ms, status) = match outage {
                Some((_, _, true)) => ("success", 1500.0 + 1000.0 * draw(k, 1), 200),
                Some(_) if draw(k, 2) < spec.outage_failure_rate => {
                    ("connect_failure", 1.0 + 2.0 * draw(k, 1), 503)
                }
                _ if draw(k, 3) < spec.failure_rate => {
                    ("gateway_failure", 5.0 + 10.0 * draw(k, 1), 502)
                }
                _ => ("success", 8.0 + 32.0 * draw(k, 1) * draw(k, 4), 200),
            };
            line.clear();
            let _ = write!(
                line,
                r#"{{"timestamp":"{}","route":"{}","cluster":"backend","method":"GET","path":"/items/{}","status":{status},"flag":{},"retries":0,"duration_ms":{:.3},"peer":"10.0.0.9:{}","attempts":[{{"endpoint":"10.0.0.2:8080","outcome":"{outcome}","duration_ms":{:.3},"hedge":false}}]}}"#,
                humantime::format_rfc3339_millis(at),
                spec.route,
                k % 1000,
                if status == 200 { "null" } else { "\"UF\"" },
                ms + 0.2,
                40000 + k % 20000,
                ms,
            );
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
    }
    Ok(())
}
