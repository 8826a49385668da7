//! The Prometheus exporter's scrape workload, shared by the
//! criterion bench `benches/prometheus.rs` and the CPU-time runner
//! `examples/scrape_cpu.rs`: a registry of 20 000 tenant breakers, each
//! called once, exported at a given detail, scraped into a sink that
//! counts the exposition's bytes and drops them (the network's part of a
//! scrape is not the exporter's).

use std::fmt;

use prometheus_client::registry::Registry;
use tripline::CircuitBreakerConfig;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline_prometheus::http::{Format, encode};
use tripline_prometheus::{Detail, Exporter};

/// Breakers in the scraped registry (seed-sized: 50 services × 20 methods
/// × 20 instances).
pub const BREAKERS: u32 = 20_000;

/// Counts what is written, keeps nothing.
#[derive(Debug, Default)]
pub struct Discard(pub usize);

impl fmt::Write for Discard {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// The prometheus-client registry to scrape, and the breaker registry it
/// reads (keep it alive while scraping).
pub fn target(detail: Detail) -> (Registry, BreakerRegistry<u32>) {
    let breakers = BreakerRegistry::<u32>::try_new(RegistryConfig {
        max_breakers: BREAKERS as usize,
        breaker: CircuitBreakerConfig {
            name: "tenant".into(),
            ..Default::default()
        },
        ..Default::default()
    })
    .expect("valid config");
    for k in 0..BREAKERS {
        if let Ok(b) = breakers.get(&k) {
            let _ = b.call(|| Ok::<_, ()>(()));
        }
    }
    let exporter = Exporter::default();
    exporter
        .register_registry(&breakers, detail)
        .expect("registered once");
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exporter));
    (registry, breakers)
}

/// One scrape of `registry` in `format`; the exposition's size in bytes.
pub fn scrape(registry: &Registry, format: Format) -> usize {
    let mut out = Discard(0);
    encode(registry, format, &mut out).expect("encodes");
    out.0
}
