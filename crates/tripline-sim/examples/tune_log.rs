//! Writes a synthetic proxy access log with known outages to stdout (the
//! bundled example of `tripline tune`; see scripts/make-tune-example).
//!
//! Usage: `tune_log [SECONDS [RATE [FROM..TO ...]]]`, outages in seconds
//! from the start; `FROM..TOs` marks a slow outage instead of failures.

use std::io::{BufWriter, Write};

use tripline_sim::tune::synth::{Spec, write};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut spec = Spec::default();
    if let Some(s) = args.first().and_then(|a| a.parse().ok()) {
        spec.seconds = s;
    }
    if let Some(r) = args.get(1).and_then(|a| a.parse().ok()) {
        spec.rate = r;
    }
    for a in args.iter().skip(2) {
        let slow = a.ends_with('s');
        let a = a.trim_end_matches('s');
        if let Some((f, t)) = a.split_once("..")
            && let (Ok(f), Ok(t)) = (f.parse(), t.parse())
        {
            spec.outages.push((f, t, slow));
        }
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    write(&spec, &mut out)?;
    out.flush()
}
