//! From a read of the providers' folder to the set the proxy applies.
//!
//! Two rules sit between ZooKeeper's answer and the published set:
//! - **Grace.** A provider that vanished stays in the set for `grace`
//!   (from when it was first missing), so a provider restarting within it
//!   keeps its endpoint, and with it its breaker and outlier state; one
//!   that comes back in time is simply present again.
//! - **Never emptied by a bad read.** A read with children but not one
//!   usable provider (all garbage, all of another protocol, all disabled)
//!   and a read of a folder that is missing or empty keep the last set,
//!   as Dubbo 3's empty protection does: an operator mistake or a registry
//!   mid-migration must not take a serving cluster to zero endpoints. The
//!   status says so (`kept_last_set`).
//!
//! Time is passed in (tokio's `Instant`), so tests drive it with paused time.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::provider::ProviderUrl;
use crate::{Protocol, Provider, ProviderSet};

/// What one read of the folder held, sorted into what counts.
///
/// ```
/// use tripline_discovery::{Protocol, Read, encode};
///
/// let children = [
///     encode("tri://10.0.0.5:50051/com.example.OrderService?weight=200"),
///     encode("tri://10.0.0.6:50051/com.example.OrderService?enabled=false"),
///     encode("dubbo://10.0.0.5:20880/com.example.OrderService"),
///     "not%2a%zzurl".to_owned(),
/// ];
/// let read = Read::of(&children, Protocol::Tri);
/// assert_eq!(read.providers.get("10.0.0.5:50051"), Some(&200));
/// assert_eq!((read.disabled, read.skipped.len()), (1, 1));
/// assert_eq!(read.other_protocols.get("dubbo"), Some(&1));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Read {
    /// Enabled providers of the chosen protocol, by address (one each).
    pub providers: BTreeMap<String, u32>,
    /// Providers of the chosen protocol the operator disabled.
    pub disabled: usize,
    /// Providers of other protocols, counted by scheme (`dubbo` → 2).
    pub other_protocols: BTreeMap<String, usize>,
    /// Children that are not provider URLs: the child and why.
    pub skipped: Vec<(String, String)>,
}

impl Read {
    /// Sorts `children` (names as ZooKeeper lists them) for `protocol`.
    pub fn of(children: &[String], protocol: Protocol) -> Read {
        let mut read = Read::default();
        for child in children {
            let url = match ProviderUrl::parse(child) {
                Ok(url) => url,
                Err(e) => {
                    read.skipped.push((child.clone(), e.0));
                    continue;
                }
            };
            if url.protocol != protocol.scheme() {
                *read.other_protocols.entry(url.protocol).or_default() += 1;
                continue;
            }
            let weight = match url.weight() {
                Ok(w) => w,
                Err(e) => {
                    read.skipped.push((child.clone(), e.0));
                    continue;
                }
            };
            if !url.is_enabled() {
                read.disabled += 1;
                continue;
            }
            read.providers.insert(url.address(), weight);
        }
        read
    }
}

/// The members now: present ones and vanished ones within their grace.
#[derive(Debug)]
pub(crate) struct Membership {
    grace: Duration,
    members: BTreeMap<String, Member>,
}

#[derive(Debug)]
struct Member {
    weight: u32,
    /// When a read first missed it; `None` while present.
    missing_since: Option<Instant>,
}

impl Membership {
    pub(crate) fn new(grace: Option<Duration>) -> Self {
        Membership {
            grace: grace.unwrap_or(Duration::ZERO),
            members: BTreeMap::new(),
        }
    }

    /// Applies a read at `now`; `false` when the read was empty of usable
    /// providers and the last set was kept instead.
    pub(crate) fn apply(&mut self, read: &Read, now: Instant) -> bool {
        if read.providers.is_empty() && !self.members.is_empty() {
            return false;
        }
        for (address, member) in &mut self.members {
            if !read.providers.contains_key(address) && member.missing_since.is_none() {
                member.missing_since = Some(now);
            }
        }
        for (address, &weight) in &read.providers {
            self.members.insert(
                address.clone(),
                Member {
                    weight,
                    missing_since: None,
                },
            );
        }
        self.expire(now);
        true
    }

    /// Drops the members whose grace ended by `now`.
    pub(crate) fn expire(&mut self, now: Instant) {
        let grace = self.grace;
        self.members.retain(|_, m| {
            m.missing_since
                .is_none_or(|since| now.saturating_duration_since(since) < grace)
        });
    }

    /// When the next vanished member's grace ends, if any is waiting.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        let grace = self.grace;
        self.members
            .values()
            .filter_map(|m| m.missing_since.map(|s| s + grace))
            .min()
    }

    /// The set to publish.
    pub(crate) fn set(&self) -> ProviderSet {
        ProviderSet::new(
            self.members
                .iter()
                .map(|(address, m)| Provider {
                    address: address.clone(),
                    weight: m.weight,
                    leaving: m.missing_since.is_some(),
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn read(providers: &[(&str, u32)]) -> Read {
        Read {
            providers: providers
                .iter()
                .map(|(a, w)| ((*a).to_owned(), *w))
                .collect(),
            ..Read::default()
        }
    }

    fn addresses(m: &Membership) -> Vec<(String, bool)> {
        m.set()
            .providers()
            .iter()
            .map(|p| (p.address.clone(), p.leaving))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_vanished_provider_leaves_after_its_grace_unless_it_returns() {
        let mut m = Membership::new(Some(Duration::from_secs(10)));
        assert!(m.apply(&read(&[("a:1", 100), ("b:1", 100)]), Instant::now()));
        m.apply(&read(&[("a:1", 100)]), Instant::now());
        assert_eq!(addresses(&m), [("a:1".into(), false), ("b:1".into(), true)]);
        let deadline = m.next_expiry().unwrap();
        tokio::time::advance(Duration::from_secs(9)).await;
        m.expire(Instant::now());
        assert_eq!(m.set().providers().len(), 2, "within its grace");
        tokio::time::sleep_until(deadline).await;
        m.expire(Instant::now());
        assert_eq!(addresses(&m), [("a:1".into(), false)]);
        assert_eq!(m.next_expiry(), None);
        // One that comes back within its grace is simply present again.
        m.apply(&read(&[("c:1", 5)]), Instant::now());
        tokio::time::advance(Duration::from_secs(5)).await;
        m.apply(&read(&[("a:1", 100), ("c:1", 5)]), Instant::now());
        tokio::time::advance(Duration::from_secs(60)).await;
        m.expire(Instant::now());
        assert_eq!(
            addresses(&m),
            [("a:1".into(), false), ("c:1".into(), false)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_without_a_usable_provider_keeps_the_last_set() {
        let mut m = Membership::new(None);
        m.apply(&read(&[("a:1", 100)]), Instant::now());
        let garbage = Read {
            skipped: vec![("%zz".into(), "bad".into())],
            ..Read::default()
        };
        assert!(!m.apply(&garbage, Instant::now()));
        assert!(!m.apply(&Read::default(), Instant::now()));
        assert_eq!(addresses(&m), [("a:1".into(), false)]);
        // Without grace, a provider missing from a usable read leaves at once.
        assert!(m.apply(&read(&[("b:1", 100)]), Instant::now()));
        assert_eq!(addresses(&m), [("b:1".into(), false)]);
    }
}
