//! Retry budget: retries may be at most a fraction of recent requests.
//!
//! "Retry at most N times" bounds one call's amplification, not the
//! fleet's: when a dependency fails outright, every call retries N times and
//! the dependency sees (N+1)× its normal load exactly when it can least take
//! it. A budget bounds the *aggregate*: over a
//! sliding window, retries may be at most `ratio` × requests plus a small
//! reserve of `min_retries_per_second` × window, so that a client with
//! little traffic can still retry a blip. During an outage retries stop by
//! themselves; during sporadic failures they keep working.
//!
//! # Algorithm
//!
//! Time is cut into `buckets` slices of `window / buckets`. Each slice
//! counts requests (deposits) and retries (withdrawals). A retry is granted
//! at time `t` iff, over the window ending at `t` (the current slice and the
//! `buckets − 1` before it),
//!
//! ```text
//! (retries + 1) × 10⁹  ≤  requests × ⌊ratio × 10⁹⌋ + ⌊min_retries_per_second × window_secs × 10⁹⌋
//! ```
//!
//! in exact integer arithmetic (u128), so a fractional ratio such as 0.6
//! grants 6 retries per 10 requests, never 10 — tower's `TpsBudget` rounds
//! `1 / ratio` down and grants one retry per request for any ratio in
//! (0.5, 1) (tower-rs/tower#857). Resolving the ratio to parts per billion
//! rounds *down*, so the bound is never exceeded.
//!
//! Deposits are the hot path (one per request): one CAS on a packed
//! `(slice epoch, count)` word, no lock. Withdrawals are rare and take a
//! mutex, so that two concurrent retries cannot both spend the last token;
//! a concurrent deposit only adds, so the check stays sound. A slice whose
//! epoch is stale is treated as empty and reset by the next writer.
//!
//! The budget is a cheap handle: clones (and every task holding one) share
//! one account.

mod config;

use std::fmt;
use std::time::Duration;

pub use config::{BudgetStats, RetryBudgetConfig};

use crate::clock::{Clock, SharedClock, duration_to_nanos};
use crate::error::PolicyConfigError;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, lock};

const SCALE: u128 = 1_000_000_000;

/// A sliding-window retry budget shared by every clone.
///
/// ```
/// use std::time::Duration;
/// use tripline::budget::{RetryBudget, RetryBudgetConfig};
/// use tripline::clock::ManualClock;
///
/// let budget = RetryBudget::with_clock(
///     RetryBudgetConfig { ratio: 0.6, min_retries_per_second: 0.0, ..Default::default() },
///     ManualClock::new(),
/// )
/// .unwrap();
/// for _ in 0..10 {
///     budget.deposit();
/// }
/// let granted = (0..10).filter(|_| budget.try_withdraw()).count();
/// assert_eq!(granted, 6); // 60% of 10 requests, not 100%
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    config: RetryBudgetConfig,
    clock: SharedClock,
    bucket_nanos: u64,
    ratio_ppb: u128,
    reserve_ppb: u128,
    deposits: Box<[AtomicU64]>,
    withdrawals: Box<[AtomicU64]>,
    withdraw_lock: Mutex<()>,
    total_deposits: AtomicU64,
    total_withdrawals: AtomicU64,
    refused: AtomicU64,
}

/// `(epoch: u32, count: u32)` packed in one word.
fn pack(epoch: u64, count: u64) -> u64 {
    ((epoch & 0xFFFF_FFFF) << 32) | (count & 0xFFFF_FFFF)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> 32, word & 0xFFFF_FFFF)
}

impl RetryBudget {
    /// A budget on the production clock.
    pub fn try_new(config: RetryBudgetConfig) -> Result<Self, PolicyConfigError> {
        Self::with_clock(config, SharedClock::default())
    }

    /// A budget on `clock` (a [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn with_clock(
        config: RetryBudgetConfig,
        clock: impl Into<SharedClock>,
    ) -> Result<Self, PolicyConfigError> {
        config.validate()?;
        let bucket_nanos = (duration_to_nanos(config.window) / u64::from(config.buckets)).max(1);
        let slots = || (0..config.buckets).map(|_| AtomicU64::new(0)).collect();
        let ratio_ppb = (config.ratio * 1e9).floor() as u128;
        let reserve_ppb =
            (config.min_retries_per_second * config.window.as_secs_f64() * 1e9).floor() as u128;
        Ok(RetryBudget {
            inner: Arc::new(Inner {
                clock: clock.into(),
                bucket_nanos,
                ratio_ppb,
                reserve_ppb,
                deposits: slots(),
                withdrawals: slots(),
                withdraw_lock: Mutex::new(()),
                total_deposits: AtomicU64::new(0),
                total_withdrawals: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                config,
            }),
        })
    }

    /// The budget's config.
    pub fn config(&self) -> &RetryBudgetConfig {
        &self.inner.config
    }

    /// The current slice's epoch.
    #[inline]
    fn epoch(&self) -> u64 {
        self.inner.clock.now().as_nanos() / self.inner.bucket_nanos
    }

    /// Counts one request: it earns `ratio` of a retry for the window.
    #[inline]
    pub fn deposit(&self) {
        let epoch = self.epoch();
        add(&self.inner.deposits, epoch);
        self.inner.total_deposits.fetch_add(1, Ordering::Relaxed);
    }

    /// Asks to spend one retry (or hedge). `true` means granted and counted.
    pub fn try_withdraw(&self) -> bool {
        let inner = &*self.inner;
        let _serial = lock(&inner.withdraw_lock);
        let epoch = self.epoch();
        let requests = u128::from(sum(&inner.deposits, epoch));
        let retries = u128::from(sum(&inner.withdrawals, epoch));
        if (retries + 1).saturating_mul(SCALE) <= earned_ppb(requests, inner) {
            add(&inner.withdrawals, epoch);
            inner.total_withdrawals.fetch_add(1, Ordering::Relaxed);
            true
        } else {
            inner.refused.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// Counts a retry refused on a look at [`available`](Self::available)
    /// (the retry loop checks before it waits out a backoff).
    pub(crate) fn count_refusal(&self) {
        self.inner.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Retries the budget would grant right now (rounded down).
    pub fn available(&self) -> u64 {
        let epoch = self.epoch();
        let requests = u128::from(sum(&self.inner.deposits, epoch));
        let retries = u128::from(sum(&self.inner.withdrawals, epoch));
        let earned = earned_ppb(requests, &self.inner) / SCALE;
        u64::try_from(earned.saturating_sub(retries)).unwrap_or(u64::MAX)
    }

    /// Cumulative counts.
    pub fn stats(&self) -> BudgetStats {
        BudgetStats {
            deposits: self.inner.total_deposits.load(Ordering::Relaxed),
            withdrawals: self.inner.total_withdrawals.load(Ordering::Relaxed),
            refused: self.inner.refused.load(Ordering::Relaxed),
        }
    }

    /// The width of one slice: the granularity at which the window slides.
    pub fn bucket_width(&self) -> Duration {
        Duration::from_nanos(self.inner.bucket_nanos)
    }

    /// Whether two handles share one account.
    pub fn ptr_eq(&self, other: &RetryBudget) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// Adds one to the slot of `epoch`, resetting it first if it holds a stale epoch.
#[inline]
fn add(slots: &[AtomicU64], epoch: u64) {
    let slot = &slots[(epoch % slots.len() as u64) as usize];
    let mut cur = slot.load(Ordering::Relaxed);
    loop {
        let (e, n) = unpack(cur);
        let next = if e == epoch & 0xFFFF_FFFF {
            pack(epoch, n.saturating_add(1).min(0xFFFF_FFFF))
        } else {
            pack(epoch, 1)
        };
        match slot.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => cur = actual,
        }
    }
}

/// Retries earned by `requests` in the window, in billionths: `ratio` of
/// each request plus the reserve, saturating (validation keeps both far
/// from overflow; this keeps any config from panicking).
fn earned_ppb(requests: u128, inner: &Inner) -> u128 {
    requests
        .saturating_mul(inner.ratio_ppb)
        .saturating_add(inner.reserve_ppb)
}

/// Sums the slots whose epoch lies in the window ending at `epoch`.
fn sum(slots: &[AtomicU64], epoch: u64) -> u64 {
    let len = slots.len() as u64;
    (0..len.min(epoch + 1))
        .map(|back| {
            let want = epoch - back;
            let (e, n) = unpack(slots[(want % len) as usize].load(Ordering::Acquire));
            if e == want & 0xFFFF_FFFF { n } else { 0 }
        })
        .sum()
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("config", &self.inner.config)
            .field("available", &self.available())
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn budget(ratio: f64, min: f64, clock: &ManualClock) -> RetryBudget {
        RetryBudget::with_clock(
            RetryBudgetConfig {
                window: Duration::from_secs(10),
                buckets: 10,
                ratio,
                min_retries_per_second: min,
            },
            clock.clone(),
        )
        .expect("valid config")
    }

    #[test]
    fn deposits_expire_with_the_window() {
        let clock = ManualClock::new();
        let b = budget(0.5, 0.0, &clock);
        for _ in 0..4 {
            b.deposit();
        }
        assert_eq!(b.available(), 2);
        clock.advance(Duration::from_secs(9));
        assert_eq!(b.available(), 2, "still inside the 10 s window");
        clock.advance(Duration::from_secs(1));
        assert_eq!(b.available(), 0, "the first slice slid out");
        assert!(!b.try_withdraw());
        assert_eq!(b.stats().refused, 1);
    }

    #[test]
    fn reserve_allows_retries_without_traffic() {
        let clock = ManualClock::new();
        let b = budget(0.0, 0.5, &clock); // 0.5/s × 10 s = 5
        assert_eq!((0..10).filter(|_| b.try_withdraw()).count(), 5);
    }

    #[test]
    fn packed_counts_round_trip() {
        assert_eq!(unpack(pack(7, 9)), (7, 9));
        assert_eq!(unpack(pack(u64::MAX, 3)).0, 0xFFFF_FFFF);
    }
}
