//! Durations as a person reads them.

use std::fmt;
use std::time::Duration;

/// A duration rounded to what matters to a reader: `5.0s`, `4.2s`,
/// `820ms`, `35µs`, `2m 05s`, `1h 02m` — never `4s 999ms 819us 918ns`.
///
/// Rejections, events and reports show durations to people deciding
/// whether to wait, retry or page someone; nanoseconds of a timer's jitter
/// only hide the number they need. Machine-readable outputs (JSON, config)
/// keep exact values.
///
/// ```
/// use std::time::Duration;
/// use tripline::clock::HumanDuration;
///
/// let shown = |d| HumanDuration(d).to_string();
/// assert_eq!(shown(Duration::new(4, 999_819_918)), "5.0s");
/// assert_eq!(shown(Duration::from_millis(4_240)), "4.2s");
/// assert_eq!(shown(Duration::from_micros(820_400)), "820ms");
/// assert_eq!(shown(Duration::from_secs(125)), "2m 05s");
/// assert_eq!(shown(Duration::ZERO), "0s");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HumanDuration(pub Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        if nanos < 1_000 {
            return write!(f, "{nanos}ns");
        }
        if nanos < 999_500 {
            return write!(f, "{}µs", (nanos + 500) / 1_000);
        }
        if nanos < 999_500_000 {
            return write!(f, "{}ms", (nanos + 500_000) / 1_000_000);
        }
        // Rounded to tenths of a second first, so 59.96 s reads `1m 00s`.
        let tenths = (nanos + 50_000_000) / 100_000_000;
        if tenths < 600 {
            return write!(f, "{}.{}s", tenths / 10, tenths % 10);
        }
        let secs = (nanos + 500_000_000) / 1_000_000_000;
        if secs < 3_600 {
            return write!(f, "{}m {:02}s", secs / 60, secs % 60);
        }
        let minutes = (secs + 30) / 60;
        if minutes < 24 * 60 {
            return write!(f, "{}h {:02}m", minutes / 60, minutes % 60);
        }
        let hours = (minutes + 30) / 60;
        write!(f, "{}d {:02}h", hours / 24, hours % 24)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_unit_rounds_to_what_a_reader_needs() {
        let cases = [
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(999), "999ns"),
            (Duration::from_nanos(1_499), "1µs"),
            (Duration::from_micros(35), "35µs"),
            (Duration::from_nanos(999_499), "999µs"),
            (Duration::from_nanos(999_500), "1ms"),
            (Duration::from_millis(820), "820ms"),
            (Duration::from_nanos(999_499_999), "999ms"),
            (Duration::from_nanos(999_500_000), "1.0s"),
            (Duration::from_millis(4_960), "5.0s"),
            (Duration::from_millis(59_940), "59.9s"),
            (Duration::from_millis(59_960), "1m 00s"),
            (Duration::from_secs(3_599), "59m 59s"),
            (Duration::from_secs(3_600), "1h 00m"),
            (Duration::from_secs(3 * 86_400 + 7_200), "3d 02h"),
        ];
        for (d, want) in cases {
            assert_eq!(HumanDuration(d).to_string(), want, "{d:?}");
        }
    }
}
