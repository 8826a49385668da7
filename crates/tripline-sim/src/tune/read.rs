//! Reading a log into its compact form: per second, the calls by outcome
//! and latency bucket.
//!
//! Three line formats are recognised, line by line:
//! - the proxy's JSON access log: every try in `attempts` is one call to
//!   the dependency (`success` and `ignored` succeed; `upstream_failure`,
//!   `gateway_failure`, `connect_failure`, `local_origin_failure` fail;
//!   `cancelled`, `refused` and `client_body` reached no endpoint's
//!   breaker and are left out), at the request's `timestamp`;
//! - plain JSON lines `{"timestamp": …, "outcome": …, "duration_ms": …,
//!   "key": …}`;
//! - CSV `timestamp,outcome,duration[,key]` (a header line is skipped),
//!   the duration in milliseconds or with a unit (`12ms`, `1.5s`).
//!
//! A timestamp is RFC 3339 or Unix seconds. The proxy writes a request's
//! line when it is answered, stamped with when it began, so lines may be
//! out of order by up to a request's duration: up to [`REORDER_SLACK`]
//! seconds is accepted, more is an error at its line.

pub(crate) mod line;

use std::collections::BTreeSet;
use std::fmt;
use std::io::BufRead;

pub use line::{Call, parse_line};

/// How far back (seconds) a line's timestamp may be behind the latest seen.
pub const REORDER_SLACK: u64 = 60;

/// Latency buckets per second: bucket `i > 0` holds durations in
/// `(0.5 ms × √2^(i-1), 0.5 ms × √2^i]`, bucket 0 up to 0.5 ms, the last
/// everything longer (≈ 23 s and up).
pub const BUCKETS: usize = 32;

/// Longest span a log may cover, seconds (the simulator's limit, 7 days).
pub const MAX_SPAN: u64 = 7 * 86_400;

/// Quoted bad lines, at most.
const QUOTED: usize = 3;

/// One second of traffic: calls by outcome and latency bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Second {
    /// Successful calls per latency bucket.
    pub ok: [u32; BUCKETS],
    /// Failed calls per latency bucket.
    pub failed: [u32; BUCKETS],
}

impl Default for Second {
    fn default() -> Self {
        Second {
            ok: [0; BUCKETS],
            failed: [0; BUCKETS],
        }
    }
}

impl Second {
    /// Calls in the second.
    pub fn calls(&self) -> u64 {
        self.ok
            .iter()
            .chain(&self.failed)
            .map(|&n| u64::from(n))
            .sum()
    }

    /// Failed calls in the second.
    pub fn failures(&self) -> u64 {
        self.failed.iter().map(|&n| u64::from(n)).sum()
    }

    /// Calls at least as slow as bucket `from`'s lower bound.
    pub fn slow(&self, from: usize) -> u64 {
        (from..BUCKETS)
            .map(|i| u64::from(self.ok[i]) + u64::from(self.failed[i]))
            .sum()
    }
}

/// The bucket a duration (milliseconds) falls in.
pub fn bucket_of(ms: f64) -> usize {
    if ms.is_nan() || ms <= 0.5 {
        return 0;
    }
    let i = (2.0 * (ms / 0.5).log2()).ceil();
    (i as usize).min(BUCKETS - 1)
}

/// Upper bound of bucket `i`, milliseconds.
pub fn bucket_upper_ms(i: usize) -> f64 {
    0.5 * 2f64.powf(i as f64 / 2.0)
}

/// The duration a replayed call of bucket `i` takes, milliseconds: the
/// geometric middle of its bounds.
pub fn bucket_mid_ms(i: usize) -> f64 {
    if i == 0 {
        0.35
    } else {
        0.5 * 2f64.powf((i as f64 - 0.5) / 2.0)
    }
}

/// Recorded traffic in its compact form.
#[derive(Clone, Debug, Default)]
pub struct Traffic {
    /// Unix second of `seconds[0]`.
    pub start: u64,
    /// One entry per second from `start`, empty seconds included.
    pub seconds: Vec<Second>,
    /// Lines read (blank lines excluded).
    pub lines: u64,
    /// Malformed lines skipped (only with `skip_bad_lines`).
    pub bad_lines: u64,
    /// Routes (or keys) seen, for the error naming an unknown one.
    pub routes: BTreeSet<String>,
}

impl Traffic {
    /// Every call in the log.
    pub fn calls(&self) -> u64 {
        self.seconds.iter().map(Second::calls).sum()
    }

    /// Every failed call.
    pub fn failures(&self) -> u64 {
        self.seconds.iter().map(Second::failures).sum()
    }

    /// Mean calls per second over the log's span.
    pub fn rate(&self) -> f64 {
        self.calls() as f64 / self.seconds.len().max(1) as f64
    }
}

/// What to read and how strictly.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Only this route (proxy logs) or key (plain logs).
    pub route: Option<String>,
    /// Skip malformed lines (still counted and quoted) instead of failing.
    pub skip_bad_lines: bool,
}

/// Why a log could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// The 1-based line, when one line is at fault.
    pub line: Option<u64>,
    /// What is wrong and what would fix it.
    pub message: String,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(n) => write!(f, "line {n}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ReadError {}

/// Streams `input` into its compact form, one reused line buffer.
pub fn read(input: impl BufRead, options: &ReadOptions) -> Result<Traffic, ReadError> {
    let mut input = input;
    let mut traffic = Traffic::default();
    let mut buf = Vec::with_capacity(1024);
    let mut n = 0u64;
    let mut bad: Vec<(u64, String)> = Vec::new();
    let mut latest: Option<(f64, u64)> = None;
    let mut other_routes = 0u64;
    loop {
        buf.clear();
        let got = input.read_until(b'\n', &mut buf).map_err(|e| ReadError {
            line: Some(n + 1),
            message: format!("cannot read the log: {e}"),
        })?;
        if got == 0 {
            break;
        }
        n += 1;
        let text = trim(&buf);
        if text.is_empty() {
            continue;
        }
        traffic.lines += 1;
        let parsed = match parse_line(text) {
            Ok(p) => p,
            Err(m) => {
                traffic.bad_lines += 1;
                if bad.len() < QUOTED {
                    let quote: String = String::from_utf8_lossy(text).chars().take(120).collect();
                    bad.push((n, format!("{m}: {quote}")));
                }
                continue;
            }
        };
        let Some(parsed) = parsed else { continue };
        if let Some(route) = parsed.route.as_deref()
            && traffic.routes.len() < 1000
            && !traffic.routes.contains(route)
        {
            traffic.routes.insert(route.to_owned());
        }
        if let Some(want) = &options.route
            && parsed.route.as_deref() != Some(want.as_str())
        {
            other_routes += 1;
            continue;
        }
        if let Some((t, at)) = latest
            && parsed.timestamp + (REORDER_SLACK as f64) < t
        {
            return Err(ReadError {
                line: Some(n),
                message: format!(
                    "timestamp out of order: {:.3} s before line {at}'s; the log must be in time order (up to {REORDER_SLACK} s apart)",
                    t - parsed.timestamp
                ),
            });
        }
        if latest.is_none_or(|(t, _)| parsed.timestamp > t) {
            latest = Some((parsed.timestamp, n));
        }
        add(&mut traffic, n, &parsed.calls, parsed.timestamp)?;
    }
    if traffic.bad_lines > 0 && !options.skip_bad_lines {
        let quoted: Vec<String> = bad
            .iter()
            .map(|(l, m)| format!("  line {l}: {m}"))
            .collect();
        return Err(ReadError {
            line: bad.first().map(|b| b.0),
            message: format!(
                "{} malformed line(s) of {}; the first:\n{}\n(--skip-bad-lines skips them)",
                traffic.bad_lines,
                traffic.lines,
                quoted.join("\n")
            ),
        });
    }
    if let Some(want) = &options.route
        && !traffic.routes.contains(want)
    {
        let seen: Vec<&str> = traffic.routes.iter().map(String::as_str).collect();
        return Err(ReadError {
            line: None,
            message: format!(
                "unknown route `{want}`: the log's {} line(s) name {}",
                traffic.lines,
                if seen.is_empty() {
                    "no route".to_owned()
                } else {
                    seen.join(", ")
                }
            ),
        });
    }
    if options.route.is_none() && traffic.routes.len() > 1 {
        let seen: Vec<&str> = traffic.routes.iter().map(String::as_str).collect();
        return Err(ReadError {
            line: None,
            message: format!(
                "the log holds {} routes ({}): each has its own breaker; pick one with --route",
                seen.len(),
                seen.join(", ")
            ),
        });
    }
    let _ = other_routes;
    Ok(traffic)
}

/// Adds one line's calls at `timestamp` (Unix seconds).
fn add(traffic: &mut Traffic, line: u64, calls: &[Call], timestamp: f64) -> Result<(), ReadError> {
    if calls.is_empty() {
        return Ok(());
    }
    let sec = timestamp.floor().max(0.0) as u64;
    if traffic.seconds.is_empty() {
        traffic.start = sec;
    }
    if sec < traffic.start {
        let grow = (traffic.start - sec) as usize;
        traffic
            .seconds
            .splice(0..0, std::iter::repeat_n(Second::default(), grow));
        traffic.start = sec;
    }
    let i = sec - traffic.start;
    if i >= MAX_SPAN {
        return Err(ReadError {
            line: Some(line),
            message: format!(
                "timestamp {i} s after the log's first: a log may span at most {} days",
                MAX_SPAN / 86_400
            ),
        });
    }
    let i = i as usize;
    if i >= traffic.seconds.len() {
        traffic.seconds.resize(i + 1, Second::default());
    }
    let s = &mut traffic.seconds[i];
    for c in calls {
        let b = bucket_of(c.duration_ms);
        if c.failed {
            s.failed[b] = s.failed[b].saturating_add(1);
        } else {
            s.ok[b] = s.ok[b].saturating_add(1);
        }
    }
    Ok(())
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}
