//! A failback queue file damaged in any way — bytes flipped, cut short,
//! garbage appended — reopens without panicking: the readable entries
//! before the damage are kept, the rest is reported as a corrupt tail, and
//! the reopened queue works. A damaged dead-letter file keeps every dead
//! letter before the damage, and those given up after it stay readable.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::ManualClock;
use tripline::cluster::{Cluster, EndpointConfig, Failback, FailbackConfig, FsyncPolicy};
use tripline::{CircuitBreakerConfig, WindowConfig};

/// A failback whose dependency is down, giving an entry up after
/// `max_retries` retries (the first one second after it was queued).
fn open(
    dir: &std::path::Path,
    clock: &ManualClock,
    max_retries: u32,
) -> Result<Failback<&'static str>, String> {
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
            max_retries,
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

/// Damages `bytes`; returns the offset of the first byte changed or cut
/// (bytes before it are as they were).
fn apply(bytes: &mut Vec<u8>, damages: &[Damage]) -> usize {
    let mut first = bytes.len();
    for d in damages {
        match d {
            Damage::Flip { at, mask } if !bytes.is_empty() => {
                let i = at % bytes.len();
                bytes[i] ^= mask;
                first = first.min(i);
            }
            Damage::Flip { .. } => {}
            Damage::Truncate { keep } => {
                bytes.truncate(keep % (bytes.len() + 1));
                first = first.min(bytes.len());
            }
            Damage::Append(extra) => {
                first = first.min(bytes.len());
                bytes.extend_from_slice(extra);
            }
        }
    }
    first
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
            let fb = open(dir.path(), &clock, 10).unwrap();
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
        apply(&mut bytes, &damages);
        std::fs::write(&path, &bytes).unwrap();
        match open(dir.path(), &clock, 10) {
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

    #[test]
    fn a_damaged_dead_letter_file_keeps_its_letters_and_takes_new_ones(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 1..8),
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        {
            let fb = open(dir.path(), &clock, 1).unwrap();
            for p in &payloads {
                fb.submit(p).unwrap();
            }
            clock.advance(Duration::from_secs(1));
            prop_assert_eq!(fb.run_due().gave_up, payloads.len());
        }
        let path = dir.path().join("failback.dead");
        let mut bytes = std::fs::read(&path).unwrap();
        let first = apply(&mut bytes, &damages);
        std::fs::write(&path, &bytes).unwrap();
        // The dead letters whose records (magic, then 33 bytes + payload
        // each, in the order given up) lie wholly before the damage.
        let mut end = 8;
        let intact: Vec<Vec<u8>> = payloads
            .iter()
            .take_while(|p| {
                end += 33 + p.len();
                end <= first
            })
            .cloned()
            .collect();
        match open(dir.path(), &clock, 1) {
            Ok(fb) => {
                let letters = fb.dead_letters().unwrap();
                prop_assert!(letters.starts_with(&intact), "{letters:?}");
                prop_assert!(letters.iter().all(|l| payloads.contains(l)));
                // A dead letter given up now is readable behind them.
                fb.submit(b"after").unwrap();
                clock.advance(Duration::from_secs(1));
                prop_assert_eq!(fb.run_due().gave_up, 1);
                let mut expected = letters;
                expected.push(b"after".to_vec());
                prop_assert_eq!(fb.dead_letters().unwrap(), expected.clone());
                drop(fb);
                // The file was repaired once and for all.
                let fb = open(dir.path(), &clock, 1).unwrap();
                prop_assert!(fb.open_report().corrupt_dead_letters.is_empty());
                prop_assert_eq!(fb.dead_letters().unwrap(), expected);
            }
            // Only damaged magic bytes make the file foreign: refused, named.
            Err(e) => prop_assert!(first < 8 && e.contains("failback.dead"), "{e}"),
        }
    }
}
