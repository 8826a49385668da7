//! SplitMix64, the one generator behind every random choice tripline
//! makes: the jitter of open durations and retry waits, the balancer's
//! picks, the outlier detector's sampling and the adaptive throttle's drops.
//!
//! Written here rather than taken from a crate: it is five lines, and its
//! whole state is one `u64`, so it fits in an atomic (one `fetch_add` a
//! draw, lock-free, as the balancer and the throttle need) or inside a
//! breaker transition, where a heavier generator behind a lock would not.
//! A seeded stream makes a simulator run repeat exactly. Not for secrets.
//!
//! Public so that the crates built on this one (the proxy's retry back-off
//! and fault dice, the simulator's keyed draws) draw the same way rather
//! than each carrying a copy.
//!
//! ```
//! use tripline::rng;
//!
//! let mut state = 7;
//! let u = rng::unit_f64(&mut state);
//! assert!((0.0..1.0).contains(&u));
//! // A keyed draw: the same key, the same number, in any order.
//! assert_eq!(rng::mix(42), rng::mix(42));
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

/// The stream's increment: the golden ratio in 64 bits (odd, so a
/// stream visits every state).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: 64 well-mixed bits from a state (or
/// from any key, for a draw that depends on nothing but its key).
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Advances `state` one step and returns its output.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GAMMA);
    mix(*state)
}

/// Advances a shared `state` one step and returns its output: each caller
/// takes its own step with `fetch_add`, so concurrent draws never repeat.
#[inline]
pub fn splitmix64_shared(state: &AtomicU64) -> u64 {
    mix(state
        .fetch_add(GAMMA, Ordering::Relaxed)
        .wrapping_add(GAMMA))
}

/// The top 53 bits of `bits` as a uniform float in [0, 1).
#[inline]
pub fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A uniform float in [0, 1) from the stream in `state`.
#[inline]
pub fn unit_f64(state: &mut u64) -> f64 {
    unit(splitmix64(state))
}

/// Mixes a seed with an instance id, so replicas built from one seed still
/// draw different numbers.
pub(crate) fn mix_seed(seed: u64, instance: u64) -> u64 {
    let mut s = instance ^ 0xD1B5_4A32_D192_ED03;
    seed ^ splitmix64(&mut s)
}

/// A process-wide counter: a distinct id for every instance built.
pub(crate) fn next_instance_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A random seed from std's randomly keyed hasher, so that replicas
/// started together never share a sequence.
pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(next_instance_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_of_one_seed_draw_apart_and_draws_stay_in_the_unit_interval() {
        let mut a = mix_seed(7, 0);
        let mut b = mix_seed(7, 1);
        assert_ne!(splitmix64(&mut a), splitmix64(&mut b));
        let mut s = 1;
        for _ in 0..10_000 {
            let u = unit_f64(&mut s);
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn a_shared_state_draws_the_same_stream_as_a_plain_one() {
        let shared = AtomicU64::new(42);
        let mut plain = 42;
        for _ in 0..100 {
            assert_eq!(splitmix64_shared(&shared), splitmix64(&mut plain));
        }
    }
}
