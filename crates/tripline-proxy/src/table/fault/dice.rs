//! The chance a percent-scoped fault hits: a seedable generator, so tests
//! and drills can replay the same sequence.

use std::sync::atomic::AtomicU64;

/// SplitMix64 over one atomic word: lock-free, one add per roll, and good
/// enough to spread percent decisions (nothing here is security-relevant).
#[derive(Debug)]
pub(crate) struct Dice {
    state: AtomicU64,
}

impl Dice {
    /// Rolls from `seed`: the same seed gives the same decisions in order.
    pub(crate) fn seeded(seed: u64) -> Dice {
        Dice {
            state: AtomicU64::new(seed),
        }
    }

    /// Rolls from a seed the process picked (std's per-process hashing keys).
    pub(crate) fn unseeded() -> Dice {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x7472_6970_6c69_6e65);
        Dice::seeded(h.finish())
    }

    /// Whether a `percent` (0–100) chance hits. 0 and 100 never roll, so
    /// deterministic drills and tests do not depend on the seed.
    pub(crate) fn hits(&self, percent: f64) -> bool {
        if percent >= 100.0 {
            return true;
        }
        if percent <= 0.0 || percent.is_nan() {
            return false;
        }
        let unit = tripline::rng::unit(tripline::rng::splitmix64_shared(&self.state));
        unit * 100.0 < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_that_hits_follows_the_percent_and_the_seed_replays() {
        let dice = Dice::seeded(7);
        let hits = (0..10_000).filter(|_| dice.hits(30.0)).count();
        assert!((2_700..3_300).contains(&hits), "{hits}");
        let a: Vec<bool> = (0..64).map(|_| Dice::seeded(1).hits(50.0)).collect();
        let b: Vec<bool> = (0..64).map(|_| Dice::seeded(1).hits(50.0)).collect();
        assert_eq!(a, b);
        assert!((0..100).all(|_| dice.hits(100.0)));
        assert!((0..100).all(|_| !dice.hits(0.0)));
    }
}
