//! A scrape of a 20 000-breaker registry stays within 16 MiB of transient
//! allocation (the bound a large fleet can afford per scrape). The figure is the peak of live heap
//! bytes while the scrape runs, on the scraping thread: the samples read
//! from the breakers and the encoder's buffers, with the exposition
//! handed on in 64 KiB chunks as the streamed `/metrics` body does (which
//! also queues at most a few chunks ahead of the client). Allocation
//! counts do not depend on the machine's speed, so this runs in every
//! build; the time of the same scrape is measured by the criterion bench
//! `benches/benches/prometheus.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::fmt;

use prometheus_client::registry::Registry;
use tripline::ManualClock;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline_prometheus::http::{Format, encode};
use tripline_prometheus::{Detail, Exporter};

const BREAKERS: u32 = 20_000;
const BOUND: u64 = 16 << 20;

/// Drops what is written in 64 KiB chunks, as a streamed body sends them.
#[derive(Default)]
struct Chunks {
    buf: String,
    bytes: usize,
}

impl fmt::Write for Chunks {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.buf.capacity() == 0 {
            self.buf.reserve(64 * 1024);
        }
        self.buf.push_str(s);
        if self.buf.len() >= 64 * 1024 {
            self.bytes += self.buf.len();
            self.buf = String::new();
        }
        Ok(())
    }
}

fn registry(detail: Detail) -> (Registry, BreakerRegistry<u32>) {
    let exporter = Exporter::default();
    let breakers = BreakerRegistry::<u32>::builder(RegistryConfig {
        max_breakers: BREAKERS as usize,
        ..Default::default()
    })
    .clock(ManualClock::new())
    .build()
    .unwrap();
    for k in 0..BREAKERS {
        let _ = breakers.get(&k).unwrap().call(|| Ok::<_, ()>(()));
    }
    exporter.register_registry(&breakers, detail).unwrap();
    let mut r = Registry::default();
    r.register_collector(Box::new(exporter));
    (r, breakers)
}

#[test]
fn a_scrape_of_20k_breakers_stays_within_16_mib() {
    for detail in [Detail::Essential, Detail::Full] {
        let (r, _breakers) = registry(detail);
        let mut sink = Chunks::default();
        let info = allocation_counter::measure(|| {
            encode(&r, Format::OpenMetrics, &mut sink).unwrap();
        });
        let whole = allocation_counter::measure(|| {
            let mut s = String::new();
            encode(&r, Format::OpenMetrics, &mut s).unwrap();
        });
        println!(
            "{detail:?}: {} bytes of exposition; streamed peak {:.1} MiB, {} allocations; \
             as one string peak {:.1} MiB",
            sink.bytes + sink.buf.len(),
            info.bytes_max as f64 / (1 << 20) as f64,
            info.count_total,
            whole.bytes_max as f64 / (1 << 20) as f64,
        );
        if detail == Detail::Essential {
            assert!(
                info.bytes_max <= BOUND,
                "{detail:?}: peak {} bytes",
                info.bytes_max
            );
        }
    }
}
