//! Runs one workload of the peer suite in a tight loop, for the
//! informational instruction counts of `scripts/bench-report` (callgrind
//! over `caseloop case GROUP/NAME N`, the loop with no calls subtracted),
//! and calibrates `work()`.
//!
//! The budgeted instruction counts that CI checks come from the library's
//! own `crates/tripline/examples/hotloop.rs`, which builds without the peer
//! crates; this one needs the `peers` feature.
//!
//! `caseloop case GROUP/NAME N` runs N calls of a workload of
//! `tripline_benches::cases`. `caseloop work N` times N calls of
//! `tripline_benches::work()` (best of five), to calibrate `WORK_ROUNDS`.

use std::hint::black_box;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    match mode.as_str() {
        "case" => {
            let id = args.next().unwrap_or_default();
            let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            let Some(case) = tripline_benches::cases::find(&id) else {
                eprintln!("caseloop: no case {id}");
                return ExitCode::FAILURE;
            };
            let make = case.build();
            make().run(n);
            ExitCode::SUCCESS
        }
        "work" => {
            let n: u64 = args
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(1_000_000);
            // Calibration measures real time on purpose.
            #[allow(clippy::disallowed_methods)]
            let best = (0..5)
                .map(|_| {
                    let start = std::time::Instant::now();
                    (0..n).for_each(|_| {
                        black_box(tripline_benches::work());
                    });
                    start.elapsed().as_secs_f64() * 1e9 / n as f64
                })
                .fold(f64::INFINITY, f64::min);
            println!(
                "work(): {best:.1} ns ({} rounds)",
                tripline_benches::WORK_ROUNDS
            );
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: caseloop case GROUP/NAME N | caseloop work N");
            ExitCode::FAILURE
        }
    }
}
