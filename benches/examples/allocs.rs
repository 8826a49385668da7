//! Allocations per call of every workload of the peer suite, and bytes per
//! breaker of every library, counted with `allocation-counter` (which
//! replaces the global allocator of this binary and counts this thread's
//! allocations); and the state transitions of the failure-heavy mix, through
//! each library's hooks. Prints one JSON object per line for `scripts/bench-report`:
//!
//! ```text
//! {"kind":"call","id":"closed/tripline","calls":10000,"allocs_per_call":0,"bytes_per_call":0}
//! {"kind":"mix","name":"tripline","calls":1000,"transitions":200}
//! {"kind":"breaker","name":"tripline","breakers":1,"bytes":1234,"allocations":7,"reported":1200}
//! ```
//!
//! `cargo run --release -p tripline-benches --example allocs [FILTER]`

use tripline_benches::cases;

const CALLS: u64 = 10_000;
/// Calls of the failure-heavy mix whose state transitions are counted.
const MIX_CALLS: u64 = 1_000;

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    for case in cases::all() {
        let id = case.id();
        if !id.contains(&filter) {
            continue;
        }
        let make = case.build();
        let mut bench = make();
        // Warm up: lazy initialisation (thread-locals, first-use caches)
        // is not a per-call cost.
        bench.run(1_000);
        let info = allocation_counter::measure(|| {
            bench.run(CALLS);
        });
        println!(
            "{{\"kind\":\"call\",\"id\":\"{id}\",\"calls\":{CALLS},\"allocs_per_call\":{},\"bytes_per_call\":{}}}",
            info.count_total as f64 / CALLS as f64,
            info.bytes_total as f64 / CALLS as f64,
        );
    }
    if "mix".contains(&filter) || filter.is_empty() {
        for (name, transitions) in cases::mix_transitions(MIX_CALLS) {
            let t = transitions.map_or_else(|| "null".to_owned(), |t| t.to_string());
            println!(
                "{{\"kind\":\"mix\",\"name\":\"{name}\",\"calls\":{MIX_CALLS},\"transitions\":{t}}}"
            );
        }
    }
    for fp in cases::footprints()
        .into_iter()
        .chain(cases::keyed_footprints())
    {
        if !fp.name.contains(&filter) && !filter.is_empty() {
            continue;
        }
        drop((fp.build)()); // first use: global and thread-local setup
        let mut keep = None;
        let info = allocation_counter::measure(|| keep = Some((fp.build)()));
        let reported = fp
            .reported
            .map_or_else(|| "null".to_owned(), |f| f().to_string());
        println!(
            "{{\"kind\":\"breaker\",\"name\":\"{}\",\"breakers\":{},\"bytes\":{},\"allocations\":{},\"reported\":{reported}}}",
            fp.name, fp.breakers, info.bytes_current, info.count_current,
        );
        drop(keep);
    }
}
