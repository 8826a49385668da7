//! The verdict as a person reads it (a table), as a program reads it
//! (JSON), and as a CI system reads it (JUnit XML: one testcase per
//! expectation, so a failed expectation shows as a failed test).

use std::fmt::Write;

use crate::events::TransitionSeen;
use crate::file::Drill;
use crate::verdict::Outcome;

/// The verdict table, the load's counts and the transitions seen.
pub fn text(drill: &Drill, o: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "drill: {}", o.drill);
    let m = &o.summary;
    let _ = writeln!(
        s,
        "load: {} sent, {} ok, {} errors ({} refused by the proxy, {} without an answer), {} ticks skipped at the concurrency bound",
        m.sent, m.ok, m.errors, m.refused, m.no_answer, m.skipped
    );
    for p in &drill.phases {
        let _ = writeln!(
            s,
            "phase {:?}: {:.1}s-{:.1}s on route {:?}",
            p.name,
            p.from.as_secs_f64(),
            p.to.as_secs_f64(),
            p.route
        );
    }
    if o.transitions.is_empty() {
        let _ = writeln!(s, "transitions: none");
    } else {
        let _ = writeln!(s, "transitions:");
        for t in &o.transitions {
            let _ = writeln!(s, "{}", transition_line(t));
        }
    }
    let widths = [
        o.rows
            .iter()
            .map(|r| r.key.len())
            .max()
            .unwrap_or(0)
            .max(11),
        o.rows
            .iter()
            .map(|r| r.expected.len())
            .max()
            .unwrap_or(0)
            .max(8),
        o.rows
            .iter()
            .map(|r| r.measured.len())
            .max()
            .unwrap_or(0)
            .max(8),
    ];
    let _ = writeln!(
        s,
        "\n{:<w0$}  {:<w1$}  {:<w2$}  verdict",
        "expectation",
        "expected",
        "measured",
        w0 = widths[0],
        w1 = widths[1],
        w2 = widths[2]
    );
    for r in &o.rows {
        let _ = writeln!(
            s,
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            r.key,
            r.expected,
            r.measured,
            if r.pass { "pass" } else { "FAIL" },
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
    }
    let failed = o.rows.iter().filter(|r| !r.pass).count();
    let _ = match &o.aborted {
        Some(why) => writeln!(s, "\nABORTED by the abort rule: {why}"),
        None if failed == 0 => writeln!(
            s,
            "\nPASS: {} of {} expectations held",
            o.rows.len(),
            o.rows.len()
        ),
        None => writeln!(
            s,
            "\nFAIL: {failed} of {} expectations failed",
            o.rows.len()
        ),
    };
    s
}

/// The whole outcome as pretty JSON (verdict rows, every measurement,
/// the load's counts and the transitions).
pub fn json(o: &Outcome) -> String {
    let mut s = serde_json::to_string_pretty(o).unwrap_or_default();
    s.push('\n');
    s
}

/// A JUnit report: one testsuite per drill, one testcase per
/// expectation; an aborted drill adds a failed `abort_rule` testcase.
pub fn junit(o: &Outcome) -> String {
    let failures = o.rows.iter().filter(|r| !r.pass).count() + usize::from(o.aborted.is_some());
    let tests = o.rows.len() + usize::from(o.aborted.is_some());
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites tests=\"{tests}\" failures=\"{failures}\">\n  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\">",
        xml(&o.drill)
    );
    for r in &o.rows {
        let _ = write!(
            s,
            "    <testcase classname=\"{}\" name=\"{}\">",
            xml(&o.drill),
            xml(&r.key)
        );
        if !r.pass {
            let _ = write!(
                s,
                "<failure message=\"expected {}, measured {}\"/>",
                xml(&r.expected),
                xml(&r.measured)
            );
        }
        let _ = writeln!(s, "</testcase>");
    }
    if let Some(why) = &o.aborted {
        let _ = writeln!(
            s,
            "    <testcase classname=\"{}\" name=\"abort_rule\"><failure message=\"{}\"/></testcase>",
            xml(&o.drill),
            xml(why)
        );
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

/// Escapes text for an XML attribute.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// One transition as `tripline simulate` and the breaker's own events
/// write it: `from → to`, the same arrow everywhere.
fn transition_line(t: &TransitionSeen) -> String {
    format!(
        "  {:>7.2}s  {}: {} → {} ({})",
        t.at.as_secs_f64(),
        t.breaker,
        t.from,
        t.to,
        t.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transition_reads_with_the_arrow_simulate_uses() {
        let t = TransitionSeen {
            breaker: "checkout".into(),
            from: "closed".into(),
            to: "open".into(),
            reason: "failure_rate".into(),
            at: std::time::Duration::from_millis(1500),
        };
        assert_eq!(
            transition_line(&t),
            "     1.50s  checkout: closed → open (failure_rate)"
        );
    }
}
