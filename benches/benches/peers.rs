//! The peer suite: every workload of `tripline_benches::cases`, tripline
//! and each peer that offers the feature, in one run.
//!
//! `cargo bench -p tripline-benches --bench peers` (or
//! `scripts/bench-report`, which runs it with short settings and rewrites
//! the tables in `benches/README.md`). Filter as usual: `-- closed/`.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tripline_benches::{cases, parallel_bench, parallel_bench_cpu};

fn single_thread(c: &mut Criterion) {
    let all = cases::all();
    let mut groups: Vec<&str> = all.iter().map(|c| c.group).collect();
    groups.dedup();
    for group in groups {
        let mut g = c.benchmark_group(group);
        for case in all.iter().filter(|c| c.group == group) {
            let make = case.build();
            let mut bench = make();
            g.bench_function(case.name, |b| b.iter_custom(|n| bench.run(n)));
        }
        g.finish();
    }
}

/// One and two threads sharing one breaker; time per iteration is wall
/// time ÷ threads (`threadsN`), or each thread's CPU time ÷ threads
/// (`threadsN_cpu`), so perfect scaling halves it.
fn two_threads(c: &mut Criterion) {
    let threaded = cases::threaded();
    for threads in [1usize, 2] {
        for cpu in [false, true] {
            let name = format!("threads{threads}{}", if cpu { "_cpu" } else { "" });
            let mut g = c.benchmark_group(name);
            for case in &threaded {
                let make = case.build();
                g.bench_function(case.name, |b| {
                    b.iter_custom(|n| {
                        if cpu {
                            parallel_bench_cpu(threads, n, &make)
                        } else {
                            parallel_bench(threads, n, &make)
                        }
                    })
                });
            }
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = single_thread, two_threads
}
criterion_main!(benches);
