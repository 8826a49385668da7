//! Keyed breakers: `BreakerRegistry::get` (and `with`) of an existing key
//! on one and two threads, against the same lookup in papaya, dashmap,
//! scc's HashMap and scc's HashIndex holding the same breakers; and the
//! adaptive throttle's acquire-and-settle path.

use std::fmt;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, WindowConfig};
use tripline_benches::parallel;

/// An instance-level key (50 services × 20 methods × 20
/// instances).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Key {
    service: u16,
    method: u16,
    instance: u16,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "svc{}/m{}@{}", self.service, self.method, self.instance)
    }
}

fn keys() -> Vec<Key> {
    (0..50)
        .flat_map(|service| {
            (0..20).flat_map(move |method| {
                (0..20).map(move |instance| Key {
                    service,
                    method,
                    instance,
                })
            })
        })
        .collect()
}

fn registry(clock: &ManualClock, keys: &[Key]) -> BreakerRegistry<Key> {
    let r = BreakerRegistry::builder(RegistryConfig {
        max_breakers: keys.len(),
        breaker: CircuitBreakerConfig {
            name: "rpc".into(),
            window: WindowConfig::Time {
                length: Duration::from_secs(10),
                buckets: 10,
            },
            ..Default::default()
        },
        ..Default::default()
    })
    .clock(clock.clone())
    .build()
    .expect("valid config");
    for k in keys {
        r.get(k).expect("room for every key");
    }
    r
}

/// Each thread walks the keys from its own offset, so two threads look up
/// different breakers ("spread") — or all threads use key 0 ("hot").
struct Walk {
    keys: Vec<Key>,
    next: AtomicUsize,
}

thread_local! {
    static POS: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

impl Walk {
    #[inline]
    fn key(&self) -> &Key {
        let i = POS.with(|p| {
            let mut i = p.get();
            if i == usize::MAX {
                i = self.next.fetch_add(7_919, Ordering::Relaxed);
            }
            i = (i + 1) % self.keys.len();
            p.set(i);
            i
        });
        &self.keys[i]
    }
}

fn bench_lookup(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    f: impl Fn() + Sync,
) {
    g.bench_function(name, |b| b.iter_custom(|n| parallel(threads, n, &f)));
}

fn lookups(c: &mut Criterion) {
    let clock = ManualClock::new();
    let keys = keys();
    let reg = registry(&clock, &keys);
    let breakers: Vec<CircuitBreaker> = keys.iter().map(|k| reg.get(k).expect("present")).collect();
    // One hasher for all, so that only the maps differ.
    type Hasher = foldhash::fast::RandomState;
    let pap = papaya::HashMap::with_hasher(Hasher::default());
    let papb = papaya::HashMap::builder()
        .hasher(Hasher::default())
        .resize_mode(papaya::ResizeMode::Blocking)
        .build();
    let dash = dashmap::DashMap::with_hasher(Hasher::default());
    let sccm = scc::HashMap::with_hasher(Hasher::default());
    let scci = scc::HashIndex::with_hasher(Hasher::default());
    for (k, b) in keys.iter().zip(&breakers) {
        pap.pin().insert(*k, b.clone());
        papb.pin().insert(*k, b.clone());
        dash.insert(*k, b.clone());
        let _ = sccm.insert_sync(*k, b.clone());
        let _ = scci.insert_sync(*k, b.clone());
    }
    let walk = Walk {
        keys: keys.clone(),
        next: AtomicUsize::new(0),
    };
    let hot = keys[0];

    for threads in [1usize, 2] {
        let mut g = c.benchmark_group(format!("registry_get_threads{threads}"));
        // Thread-private work of a similar cost: what perfect scaling looks
        // like on this machine in this run (a busy machine scales nothing).
        bench_lookup(&mut g, "bare_work", threads, || {
            black_box(tripline_benches::work());
        });
        // tripline's registry: owned handle, and borrowed via `with`.
        bench_lookup(&mut g, "registry_get_hot", threads, || {
            black_box(reg.get(black_box(&hot)).map(|b| b.state()).ok());
        });
        bench_lookup(&mut g, "registry_get_spread", threads, || {
            black_box(reg.get(walk.key()).map(|b| b.state()).ok());
        });
        bench_lookup(&mut g, "registry_with_hot", threads, || {
            black_box(reg.with(black_box(&hot), |b| b.state()).ok());
        });
        bench_lookup(&mut g, "registry_with_spread", threads, || {
            black_box(reg.with(walk.key(), |b| b.state()).ok());
        });
        // The candidate maps, same keys and values, cloning the handle.
        bench_lookup(&mut g, "papaya_spread", threads, || {
            black_box(pap.pin().get(walk.key()).map(|b| b.clone().state()));
        });
        bench_lookup(&mut g, "papaya_blocking_spread", threads, || {
            black_box(papb.pin().get(walk.key()).map(|b| b.clone().state()));
        });
        bench_lookup(&mut g, "dashmap_spread", threads, || {
            black_box(dash.get(walk.key()).map(|b| b.clone().state()));
        });
        bench_lookup(&mut g, "scc_hashmap_spread", threads, || {
            black_box(sccm.read_sync(walk.key(), |_, b| b.clone().state()));
        });
        bench_lookup(&mut g, "scc_hashindex_spread", threads, || {
            black_box(scci.peek_with(walk.key(), |_, b| b.clone().state()));
        });
        bench_lookup(&mut g, "papaya_hot", threads, || {
            black_box(pap.pin().get(black_box(&hot)).map(|b| b.clone().state()));
        });
        bench_lookup(&mut g, "dashmap_hot", threads, || {
            black_box(dash.get(black_box(&hot)).map(|b| b.clone().state()));
        });
        bench_lookup(&mut g, "scc_hashindex_hot", threads, || {
            black_box(scci.peek_with(black_box(&hot), |_, b| b.clone().state()));
        });
        g.finish();
    }
}

fn throttle(c: &mut Criterion) {
    let clock = ManualClock::new();
    let t = AdaptiveThrottle::builder()
        .config(AdaptiveThrottleConfig::default())
        .clock(clock.clone())
        .seed(1)
        .build()
        .expect("valid config");
    let mut g = c.benchmark_group("throttle");
    g.bench_function("acquire_accepted", |b| {
        b.iter(|| {
            if let Ok(p) = t.try_acquire() {
                p.accepted()
            }
        })
    });
    // Overloaded: p > 0, so every acquire draws a random number.
    let over = AdaptiveThrottle::builder()
        .config(AdaptiveThrottleConfig {
            minimum_requests_per_second: 0.0,
            ..Default::default()
        })
        .clock(clock.clone())
        .seed(1)
        .build()
        .expect("valid config");
    for _ in 0..1_000 {
        if let Ok(p) = over.try_acquire() {
            p.rejected_by_backend()
        }
    }
    g.bench_function("acquire_overloaded", |b| {
        b.iter(|| black_box(over.try_acquire().is_ok()))
    });
    g.finish();
    for threads in [1usize, 2] {
        let mut g = c.benchmark_group(format!("throttle_threads{threads}"));
        bench_lookup(&mut g, "bare_work", threads, || {
            black_box(tripline_benches::work());
        });
        bench_lookup(&mut g, "acquire_accepted", threads, || {
            if let Ok(p) = t.try_acquire() {
                p.accepted()
            }
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = lookups, throttle
}
criterion_main!(benches);
