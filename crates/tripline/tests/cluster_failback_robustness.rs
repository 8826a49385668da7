//! A failback queue file damaged in any way — bytes flipped, cut short,
//! garbage appended — reopens without panicking: the readable entries
//! before the damage are kept, the rest is reported as a corrupt tail, and
//! the reopened queue works.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::ManualClock;
use tripline::cluster::{Cluster, EndpointConfig, Failback, FailbackConfig, FsyncPolicy};
use tripline::{CircuitBreakerConfig, WindowConfig};

fn open(dir: &std::path::Path, clock: &ManualClock) -> Result<Failback<&'static str>, String> {
    let cluster = Cluster::builder()
        .name("points")
        .endpoint(EndpointConfig::new("p1", "p1:80"))
        .breaker(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 100 },
            minimum_calls: 100,
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    Failback::builder(
        cluster,
        FailbackConfig {
            dir: dir.to_owned(),
            fsync: FsyncPolicy::Never,
            ..Default::default()
        },
    )
    .clock(clock.clone())
    .deliver(|_, _: &[u8]| Err("down"))
    .open()
    .map_err(|e| e.to_string())
}

/// Damage done to the file.
#[derive(Clone, Debug)]
enum Damage {
    Flip { at: usize, mask: u8 },
    Truncate { keep: usize },
    Append(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Damage::Flip { at, mask }),
        any::<usize>().prop_map(|keep| Damage::Truncate { keep }),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Damage::Append),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_queue_reopens_with_what_is_readable(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 1..8),
        runs in 0..3usize,
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        {
            let fb = open(dir.path(), &clock).unwrap();
            for p in &payloads {
                fb.submit(p).unwrap();
            }
            // Failed delivery attempts append their own records.
            for _ in 0..runs {
                clock.advance(Duration::from_secs(3600));
                fb.run_due();
            }
        }
        let path = dir.path().join("failback.log");
        let mut bytes = std::fs::read(&path).unwrap();
        for d in &damages {
            match d {
                Damage::Flip { at, mask } if !bytes.is_empty() => {
                    let i = at % bytes.len();
                    bytes[i] ^= mask;
                }
                Damage::Flip { .. } => {}
                Damage::Truncate { keep } => bytes.truncate(keep % (bytes.len() + 1)),
                Damage::Append(extra) => bytes.extend_from_slice(extra),
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        match open(dir.path(), &clock) {
            Ok(fb) => {
                prop_assert!(fb.open_report().recovered <= payloads.len());
                prop_assert_eq!(fb.pending(), fb.open_report().recovered);
                // The reopened queue takes new entries.
                fb.submit(b"after").unwrap();
                prop_assert_eq!(fb.pending(), fb.open_report().recovered + 1);
            }
            // A damaged header can make the file foreign: refused, named.
            Err(e) => prop_assert!(e.contains("failback"), "{e}"),
        }
    }
}
