//! Keyed breakers: 20 000 breakers, one per key (50 services × 20 methods ×
//! 20 instances), looked up by an existing key.
//!
//! tripline: `BreakerRegistry<Key>` (tripline's default breaker config,
//! room for all 20 000), through `get` (an owned handle) and `with` (the
//! breaker lent to a closure).
//!
//! None of the peers has a registry. The honest equivalent for recloser,
//! failsafe and circuitbreaker-rs is what their users write: a concurrent
//! map of breakers — here a `DashMap<Key, _>` (the most used one) with
//! foldhash, the hasher of tripline's registry. tripline's
//! own breaker sits in the same map for comparison. seatbelt partitions one
//! `Breaker` by a `breaker_id` derived from the input (a `BTreeMap` behind
//! a read lock), so only its lookup-and-call is measured.
//!
//! Keys are `(service, method, instance)` triples of `u16` and every
//! workload walks all 20 000 in turn, as the `spread` cases of
//! `benches/registry.rs` do, so that the figures compare with that
//! section's.

use std::future::{Ready, ready};
use std::sync::Arc;

use dashmap::DashMap;
use layered::Service as _;
use tripline::registry::{BreakerRegistry, RegistryConfig};

use super::closed::{
    circuitbreaker_rs_default, failsafe_default_policy, recloser_default, tripline_default,
};
use super::{Case, Factory, case, shared, shared_rt};
use crate::{Reply, now, op, runtime, value};

/// Number of keyed breakers.
pub const KEYS: usize = 20_000;

/// An instance-level key.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) struct Key {
    service: u16,
    method: u16,
    instance: u16,
}

/// The breaker's name in the registry.
impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "svc{}/m{}@{}", self.service, self.method, self.instance)
    }
}

pub(super) fn cases() -> Vec<Case> {
    vec![
        case("registry", "bare", bare),
        case(
            "registry",
            "tripline_registry_get_lookup",
            registry_get_lookup,
        ),
        case("registry", "tripline_registry_get_call", registry_get_call),
        case(
            "registry",
            "tripline_registry_with_lookup",
            registry_with_lookup,
        ),
        case(
            "registry",
            "tripline_registry_with_call",
            registry_with_call,
        ),
        case("registry", "tripline_dashmap_lookup", tripline_lookup),
        case("registry", "tripline_dashmap_call", tripline_call),
        case("registry", "recloser_dashmap_lookup", recloser_lookup),
        case("registry", "recloser_dashmap_call", recloser_call),
        case("registry", "failsafe_dashmap_lookup", failsafe_lookup),
        case("registry", "failsafe_dashmap_call", failsafe_call),
        case("registry", "circuitbreaker_rs_dashmap_lookup", cbrs_lookup),
        case("registry", "circuitbreaker_rs_dashmap_call", cbrs_call),
        case("registry", "seatbelt_breaker_id_call", seatbelt_call),
    ]
}

/// The keys: 50 services × 20 methods × 20 instances.
pub(crate) fn keys() -> Arc<Vec<Key>> {
    let mut v = Vec::with_capacity(KEYS);
    for service in 0..50 {
        for method in 0..20 {
            for instance in 0..20 {
                v.push(Key {
                    service,
                    method,
                    instance,
                });
            }
        }
    }
    Arc::new(v)
}

/// The peers' map: a `DashMap` with foldhash, the hasher tripline's
/// registry uses, so that the comparison is of the structures, not of
/// SipHash against foldhash.
pub(crate) type Map<T> = DashMap<Key, T, foldhash::fast::RandomState>;

/// A map of one breaker per key.
pub(crate) fn map_of<T>(keys: &[Key], make: impl Fn() -> T) -> Map<T> {
    let map = DashMap::with_capacity_and_hasher(keys.len(), Default::default());
    for k in keys {
        map.insert(*k, make());
    }
    map
}

/// Per-thread state: the shared map and keys, and a cursor.
struct Walk<M> {
    map: Arc<M>,
    keys: Arc<Vec<Key>>,
    at: usize,
}

impl<M> Clone for Walk<M> {
    fn clone(&self) -> Self {
        Walk {
            map: Arc::clone(&self.map),
            keys: Arc::clone(&self.keys),
            at: self.at,
        }
    }
}

impl<M> Walk<M> {
    fn new(map: M, keys: Arc<Vec<Key>>) -> Self {
        Walk {
            map: Arc::new(map),
            keys,
            at: 0,
        }
    }

    #[inline(always)]
    fn next_key(&mut self) -> &Key {
        self.at += 1;
        if self.at == KEYS {
            self.at = 0;
        }
        &self.keys[self.at]
    }
}

/// tripline's registry holding one breaker per key (each looked up once).
pub(crate) fn registry_of(keys: &[Key]) -> BreakerRegistry<Key> {
    let r = BreakerRegistry::try_new(RegistryConfig {
        max_breakers: keys.len(),
        ..Default::default()
    })
    .expect("valid config");
    for k in keys {
        r.get(k).expect("room for every key");
    }
    r
}

fn registry_walk() -> Walk<BreakerRegistry<Key>> {
    let keys = keys();
    Walk::new(registry_of(&keys), keys)
}

/// `get`: an owned handle (one reference-count increment and decrement).
fn registry_get_lookup(work: bool) -> Factory {
    shared(registry_walk(), work, |w| {
        let r = Arc::clone(&w.map);
        r.get(w.next_key()).map_or(0, |b| {
            std::hint::black_box(&b);
            1
        })
    })
}

fn registry_get_call(work: bool) -> Factory {
    shared(registry_walk(), work, |w| {
        let r = Arc::clone(&w.map);
        r.get(w.next_key()).map_or(0, |b| value(b.call(op())))
    })
}

/// `with`: the breaker lent to a closure, no reference-count traffic.
fn registry_with_lookup(work: bool) -> Factory {
    shared(registry_walk(), work, |w| {
        let r = Arc::clone(&w.map);
        r.with(w.next_key(), |b| {
            std::hint::black_box(b);
            1
        })
        .unwrap_or(0)
    })
}

fn registry_with_call(work: bool) -> Factory {
    shared(registry_walk(), work, |w| {
        let r = Arc::clone(&w.map);
        r.with(w.next_key(), |b| value(b.call(op()))).unwrap_or(0)
    })
}

/// The baseline: pick the next key, call the operation.
fn bare(work: bool) -> Factory {
    shared(Walk::new((), keys()), work, |w| {
        let k = std::hint::black_box(w.next_key());
        value(op()()).wrapping_add(u64::from(k.instance))
    })
}

#[inline(always)]
fn lookup<T>(w: &mut Walk<Map<T>>) -> u64 {
    let map = Arc::clone(&w.map);
    let key = w.next_key();
    map.get(key).map_or(0, |r| {
        std::hint::black_box(r.value());
        1
    })
}

fn walk<T: Send + Sync + 'static>(make: impl Fn() -> T) -> Walk<Map<T>> {
    let keys = keys();
    let map = map_of(&keys, make);
    Walk::new(map, keys)
}

fn tripline_lookup(work: bool) -> Factory {
    shared(walk(tripline_default), work, lookup)
}

fn tripline_call(work: bool) -> Factory {
    shared(walk(tripline_default), work, |w| {
        let map = Arc::clone(&w.map);
        map.get(w.next_key()).map_or(0, |b| value(b.call(op())))
    })
}

fn recloser_lookup(work: bool) -> Factory {
    shared(walk(recloser_default), work, lookup)
}

fn recloser_call(work: bool) -> Factory {
    shared(walk(recloser_default), work, |w| {
        let map = Arc::clone(&w.map);
        map.get(w.next_key()).map_or(0, |r| value(r.call(op())))
    })
}

fn failsafe_breaker() -> impl failsafe::CircuitBreaker + Send + Sync + 'static {
    failsafe::Config::new()
        .failure_policy(failsafe_default_policy())
        .build()
}

fn failsafe_lookup(work: bool) -> Factory {
    shared(walk(failsafe_breaker), work, lookup)
}

fn failsafe_call(work: bool) -> Factory {
    use failsafe::CircuitBreaker as _;
    shared(walk(failsafe_breaker), work, |w| {
        let map = Arc::clone(&w.map);
        map.get(w.next_key()).map_or(0, |cb| value(cb.call(op())))
    })
}

fn cbrs_lookup(work: bool) -> Factory {
    shared(walk(circuitbreaker_rs_default), work, lookup)
}

fn cbrs_call(work: bool) -> Factory {
    shared(walk(circuitbreaker_rs_default), work, |w| {
        let map = Arc::clone(&w.map);
        map.get(w.next_key()).map_or(0, |cb| value(cb.call(op())))
    })
}

/// One seatbelt `Breaker` partitioned by `breaker_id` (the key's index),
/// every key used once so that its engine exists.
pub(crate) fn seatbelt_keyed() -> impl layered::Service<usize, Out = Reply> + Clone {
    use layered::Stack as _;
    let _rt = runtime().enter();
    let clock = tick::Clock::new_tokio();
    let ctx = seatbelt::ResilienceContext::<usize, Reply>::new(&clock);
    fn call(_: usize) -> Ready<Reply> {
        ready(op()())
    }
    let svc = (
        seatbelt_breaker!(&ctx, std::time::Duration::from_secs(5))
            .breaker_id(|k: &usize| seatbelt::breaker::BreakerId::from(*k as u64)),
        layered::Execute::new(call as fn(usize) -> Ready<Reply>),
    )
        .into_service();
    for k in 0..KEYS {
        let _ = now(svc.execute(k));
    }
    svc
}

fn seatbelt_call(work: bool) -> Factory {
    shared_rt((seatbelt_keyed(), 0usize), work, |(s, at)| {
        *at += 1;
        if *at == KEYS {
            *at = 0;
        }
        value(now(s.execute(*at)))
    })
}
