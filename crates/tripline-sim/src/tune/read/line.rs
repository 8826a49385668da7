//! One line: which format it is in, and the calls it records.

use std::borrow::Cow;

use serde::Deserialize;

/// One call to the dependency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Call {
    /// Whether it failed.
    pub failed: bool,
    /// How long it took, milliseconds.
    pub duration_ms: f64,
}

/// What a line recorded.
#[derive(Debug)]
pub struct Parsed<'a> {
    /// When, Unix seconds.
    pub timestamp: f64,
    /// The route (proxy logs) or key (plain logs).
    pub route: Option<Cow<'a, str>>,
    /// The calls to the dependency (a proxy line's tries; one otherwise).
    pub calls: Vec<Call>,
}

#[derive(Deserialize)]
struct JsonLine<'a> {
    #[serde(borrow)]
    timestamp: Option<Stamp<'a>>,
    #[serde(borrow)]
    route: Option<Cow<'a, str>>,
    #[serde(borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    outcome: Option<Cow<'a, str>>,
    duration_ms: Option<f64>,
    #[serde(borrow)]
    attempts: Option<Vec<Try<'a>>>,
}

#[derive(Deserialize)]
struct Try<'a> {
    #[serde(borrow)]
    outcome: Cow<'a, str>,
    duration_ms: f64,
}

/// A timestamp as text (RFC 3339 or Unix seconds) or as a number.
enum Stamp<'a> {
    Text(Cow<'a, str>),
    Number(f64),
}

impl<'de: 'a, 'a> Deserialize<'de> for Stamp<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Stamp<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an RFC 3339 timestamp or Unix seconds")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Stamp::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Stamp::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Stamp::Number(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Stamp::Number(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Stamp::Number(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses one trimmed, non-empty line: `Ok(None)` for a CSV header.
pub fn parse_line(text: &[u8]) -> Result<Option<Parsed<'_>>, String> {
    if text.first() == Some(&b'{') {
        return json(text).map(Some);
    }
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8".to_owned())?;
    csv(text)
}

fn json(text: &[u8]) -> Result<Parsed<'_>, String> {
    let line: JsonLine<'_> = serde_json::from_slice(text).map_err(|e| format!("bad JSON ({e})"))?;
    let timestamp = match line.timestamp {
        Some(Stamp::Text(t)) => timestamp(&t)?,
        Some(Stamp::Number(n)) => number_stamp(n)?,
        None => return Err("no `timestamp`".to_owned()),
    };
    if let Some(tries) = line.attempts {
        let mut calls = Vec::with_capacity(tries.len());
        for t in tries {
            if let Some(failed) = proxy_outcome(&t.outcome)? {
                calls.push(Call {
                    failed,
                    duration_ms: duration_ms(t.duration_ms)?,
                });
            }
        }
        return Ok(Parsed {
            timestamp,
            route: line.route,
            calls,
        });
    }
    let outcome = line.outcome.ok_or("no `outcome` (nor proxy `attempts`)")?;
    let d = line.duration_ms.ok_or("no `duration_ms`")?;
    Ok(Parsed {
        timestamp,
        route: line.key.or(line.route),
        calls: vec![Call {
            failed: plain_outcome(&outcome)?,
            duration_ms: duration_ms(d)?,
        }],
    })
}

fn csv(text: &str) -> Result<Option<Parsed<'_>>, String> {
    let mut fields = text.split(',').map(str::trim);
    let ts = fields.next().unwrap_or_default();
    if ts.eq_ignore_ascii_case("timestamp") {
        return Ok(None);
    }
    let (Some(outcome), Some(duration)) = (fields.next(), fields.next()) else {
        return Err("expected `timestamp,outcome,duration[,key]`".to_owned());
    };
    let key = fields.next().filter(|k| !k.is_empty());
    if fields.next().is_some() {
        return Err("more than 4 fields; expected `timestamp,outcome,duration[,key]`".to_owned());
    }
    let d = match duration.parse::<f64>() {
        Ok(ms) => ms,
        Err(_) => {
            humantime::parse_duration(duration)
                .map_err(|_| {
                    format!("duration `{duration}` is neither milliseconds nor like `12ms`")
                })?
                .as_secs_f64()
                * 1000.0
        }
    };
    Ok(Some(Parsed {
        timestamp: timestamp(ts)?,
        route: key.map(Cow::Borrowed),
        calls: vec![Call {
            failed: plain_outcome(outcome)?,
            duration_ms: duration_ms(d)?,
        }],
    }))
}

fn duration_ms(ms: f64) -> Result<f64, String> {
    if ms.is_finite() && ms >= 0.0 {
        Ok(ms)
    } else {
        Err(format!("duration {ms} ms: must be a finite number ≥ 0"))
    }
}

/// A try's outcome in the proxy's words: `Some(failed)`, or `None` for a
/// try that reached no endpoint's breaker.
fn proxy_outcome(o: &str) -> Result<Option<bool>, String> {
    Ok(match o {
        "success" | "ignored" => Some(false),
        "upstream_failure" | "gateway_failure" | "connect_failure" | "local_origin_failure" => {
            Some(true)
        }
        "cancelled" | "refused" | "client_body" => None,
        other => return Err(format!("unknown attempt outcome `{other}`")),
    })
}

/// A plain log's outcome: whether it failed.
fn plain_outcome(o: &str) -> Result<bool, String> {
    match o.to_ascii_lowercase().as_str() {
        "success" | "ok" | "true" | "1" | "ignored" => Ok(false),
        "failure" | "error" | "fail" | "failed" | "false" | "0" | "timeout" => Ok(true),
        _ => proxy_outcome(o)?
            .ok_or_else(|| format!("outcome `{o}` names no call to the dependency")),
    }
}

fn number_stamp(n: f64) -> Result<f64, String> {
    if n.is_finite() && n >= 0.0 {
        Ok(n)
    } else {
        Err(format!("timestamp {n}: Unix seconds must be ≥ 0"))
    }
}

/// RFC 3339 (`2026-12-01T06:30:00.123Z`, fast path for the proxy's `Z`
/// form) or Unix seconds, as Unix seconds.
pub(crate) fn timestamp(t: &str) -> Result<f64, String> {
    if let Ok(n) = t.parse::<f64>() {
        return number_stamp(n);
    }
    if let Some(s) = rfc3339_utc(t.as_bytes()) {
        return Ok(s);
    }
    let st = humantime::parse_rfc3339_weak(t)
        .map_err(|_| format!("timestamp `{t}` is neither RFC 3339 nor Unix seconds"))?;
    st.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .map_err(|_| format!("timestamp `{t}` is before 1970"))
}

fn rfc3339_utc(b: &[u8]) -> Option<f64> {
    if b.len() < 20 || *b.last()? != b'Z' || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        b[r].iter().try_fold(0i64, |a, &c| {
            c.is_ascii_digit().then(|| a * 10 + i64::from(c - b'0'))
        })
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let frac = match &b[19..b.len() - 1] {
        [] => 0.0,
        [b'.', digits @ ..] if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(&b[19..b.len() - 1])
                .ok()?
                .parse::<f64>()
                .ok()?
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s;
    (secs >= 0).then_some(secs as f64 + frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_humantime() {
        for t in [
            "2026-12-01T06:30:00.123Z",
            "2024-02-29T23:59:59Z",
            "1970-01-01T00:00:00Z",
        ] {
            let h = humantime::parse_rfc3339_weak(t)
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            assert!((rfc3339_utc(t.as_bytes()).unwrap() - h).abs() < 1e-6, "{t}");
        }
    }
}
