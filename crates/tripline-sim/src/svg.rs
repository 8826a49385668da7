//! A minimal SVG writer: text in, text out, every number printed with a
//! fixed precision so charts are byte-identical run after run.

use std::fmt::Write;

/// An SVG document being written.
pub(crate) struct Svg {
    out: String,
}

/// A coordinate or length, one decimal place, never `-0.0`.
pub(crate) fn n(x: f64) -> String {
    let x = if x.is_finite() { x } else { 0.0 };
    let s = format!("{x:.1}");
    if s == "-0.0" { "0.0".to_owned() } else { s }
}

/// Escapes text for element content and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

/// Text anchoring.
#[derive(Clone, Copy)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

impl Svg {
    pub(crate) fn new(width: f64, height: f64, title: &str) -> Svg {
        let mut out = String::new();
        writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica, Arial, sans-serif" font-size="11">"#,
            w = n(width),
            h = n(height)
        )
        .ok();
        writeln!(out, "<title>{}</title>", escape(title)).ok();
        writeln!(
            out,
            r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
            n(width),
            n(height)
        )
        .ok();
        Svg { out }
    }

    pub(crate) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: Option<&str>) {
        write!(
            self.out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}""#,
            n(x),
            n(y),
            n(w.max(0.0)),
            n(h.max(0.0))
        )
        .ok();
        match tip {
            Some(t) => writeln!(self.out, "><title>{}</title></rect>", escape(t)).ok(),
            None => writeln!(self.out, "/>").ok(),
        };
    }

    pub(crate) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        writeln!(
            self.out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}" stroke-width="1"/>"#,
            n(x1),
            n(y1),
            n(x2),
            n(y2)
        )
        .ok();
    }

    pub(crate) fn polyline(&mut self, points: &[(f64, f64)], stroke: &str) {
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
            .collect();
        writeln!(
            self.out,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="1.5"/>"#,
            pts.join(" ")
        )
        .ok();
    }

    pub(crate) fn circle(&mut self, cx: f64, cy: f64, r: f64, fill: &str, tip: &str) {
        writeln!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="{fill}" fill-opacity="0.75"><title>{}</title></circle>"#,
            n(cx),
            n(cy),
            n(r),
            escape(tip)
        )
        .ok();
    }

    /// An unfilled ring: marks a point without hiding the ones under it.
    pub(crate) fn ring(&mut self, cx: f64, cy: f64, r: f64, stroke: &str) {
        writeln!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="none" stroke="{stroke}" stroke-width="2"/>"#,
            n(cx),
            n(cy),
            n(r)
        )
        .ok();
    }

    /// Opens a group whose `class` names what its elements show, so a
    /// reader (or a test) can find e.g. every half-open mark at once.
    pub(crate) fn group(&mut self, class: &str) {
        writeln!(self.out, r#"<g class="{}">"#, escape(class)).ok();
    }

    /// Closes the group opened last.
    pub(crate) fn end_group(&mut self) {
        self.out.push_str("</g>\n");
    }

    pub(crate) fn text(&mut self, x: f64, y: f64, anchor: Anchor, size: u32, s: &str) {
        self.text_fill(x, y, anchor, size, "#222222", s);
    }

    /// Text in a colour of its own (warnings, highlighted labels).
    pub(crate) fn text_fill(
        &mut self,
        x: f64,
        y: f64,
        anchor: Anchor,
        size: u32,
        fill: &str,
        s: &str,
    ) {
        let a = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        writeln!(
            self.out,
            r#"<text x="{}" y="{}" text-anchor="{a}" font-size="{size}" fill="{fill}">{}</text>"#,
            n(x),
            n(y),
            escape(s)
        )
        .ok();
    }

    pub(crate) fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// The width the charts' sans-serif font takes for `s` at `size` px, a
/// slight overestimate (0.6 em a character; Helvetica averages about 0.55)
/// so that text laid out by it never runs past the edge it was fitted to.
pub(crate) fn text_width(s: &str, size: u32) -> f64 {
    s.chars().count() as f64 * f64::from(size) * 0.6
}

/// `s` broken at spaces into lines no wider than `max` px at `size`; a
/// word longer than a whole line is cut into pieces that fit, so no text is
/// ever lost or truncated.
pub(crate) fn wrap(s: &str, size: u32, max: f64) -> Vec<String> {
    let per_line = ((max / (f64::from(size) * 0.6)).floor() as usize).max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in s.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > per_line {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..per_line).collect());
        }
        let word: String = word.into_iter().collect();
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > per_line {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// A tick step of 1, 2 or 5 × 10ⁿ giving at most about `count` ticks up to `max`.
pub(crate) fn tick_step(max: f64, count: f64) -> f64 {
    if !(max > 0.0 && max.is_finite()) {
        return 1.0;
    }
    let raw = max / count;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// A tick label: integers without decimals, others with up to two.
pub(crate) fn tick_label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_ticks_and_escaping() {
        assert_eq!(n(-0.01), "0.0");
        assert_eq!(n(12.345), "12.3");
        assert_eq!(tick_step(120.0, 8.0), 20.0);
        assert_eq!(tick_step(7.0, 5.0), 2.0);
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn wrapping_keeps_every_character_and_fits_the_width() {
        let s = "a very long fault name that would never fit, plus averyveryverylongword";
        let lines = wrap(s, 10, 60.0); // 10 characters a line
        assert!(lines.iter().all(|l| text_width(l, 10) <= 60.0), "{lines:?}");
        let joined: String = lines.concat().chars().filter(|c| *c != ' ').collect();
        let orig: String = s.chars().filter(|c| *c != ' ').collect();
        assert_eq!(joined, orig);
        assert_eq!(wrap("short", 10, 600.0), vec!["short"]);
    }
}
