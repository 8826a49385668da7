//! Route breakers per key: one breaker per value of a request header
//! (a tenant, a shard), so one tenant's failures open only its breaker.
//!
//! The breakers come from a [`BreakerRegistry`] family whose template is
//! the route's `breaker`: the library bounds their number
//! (`max_breakers`, then its overflow policy), names each
//! `<breaker>:<key>` so a refusal says which key's breaker refused, and
//! drops breakers that sit closed and idle for `idle_ttl`. The proxy runs
//! that eviction pass from the request path, at most once per half TTL, on
//! the registry's clock (no background task to own).
//!
//! A reload keeps a route's family — the same registry, every key's
//! breaker with its state, an open one staying open — when the route (by
//! name) keeps the same breaker template, family name and `breaker_key`
//! section. Any change to those builds a fresh family: every key starts
//! closed. The trade-off: `reconfigure_family` could carry state through a
//! template change, but not through a change of the registry's bounds
//! (`max_breakers`, `overflow`, `idle_ttl`) or of the header the keys come
//! from; one rule — a changed family is a new family, as a cluster whose
//! endpoint breaker template changed is a new cluster — keeps what an
//! operator must predict simple. (Parameters pushed for the family through
//! `[config_source]` are not a file change: a kept family keeps running
//! them.)
//!
//! Metrics stay bounded: the registry is exported at
//! [`Detail::Aggregate`](tripline_prometheus::Detail::Aggregate) — its
//! counts by state, creations, evictions and overflows — never one series
//! per key, whatever the header's cardinality.

use std::sync::atomic::{AtomicU64, Ordering};

use http::HeaderName;
use http::request::Parts;
use tripline::clock::SharedClock;
use tripline::registry::{BreakerRegistry, RegistryError};
use tripline::{Clock, OwnedPermit};

use crate::config::{BreakerKeySection, ConfigError, RouteSection};
use crate::http::rejection::{Reason, Rejection};
use crate::table::route::Route;

/// How a request without the key header is named among the family's members.
const NO_KEY: &str = "(none)";

/// A registry key: the header's value, `None` for requests without it.
pub type BreakerKey = Option<String>;

/// A route's keyed breakers.
pub(crate) struct KeyedBreaker {
    header: HeaderName,
    pub(crate) registry: BreakerRegistry<BreakerKey>,
    clock: SharedClock,
    /// Nanoseconds on `clock` of the last eviction pass.
    last_eviction: AtomicU64,
    eviction_every: u64,
}

impl KeyedBreaker {
    /// The family `section` describes with `family` (the route's breaker
    /// name) and the route's breaker as template; `None` without a
    /// `breaker_key`.
    pub(crate) fn build(
        at: &str,
        section: &RouteSection,
        clock: &SharedClock,
    ) -> Result<Option<KeyedBreaker>, ConfigError> {
        let (Some(key), Some(template), Some(family)) = (
            &section.breaker_key,
            &section.breaker,
            section.breaker_name(),
        ) else {
            return Ok(None);
        };
        let mut template = template.clone();
        template.name = family.to_string();
        let config = crate::config::breaker_family(&template, key);
        let named = family.to_string();
        let registry =
            BreakerRegistry::builder_with_names(config.clone(), move |k: &BreakerKey| {
                format!("{named}:{}", k.as_deref().unwrap_or(NO_KEY))
            })
            .clock(clock.clone())
            .build()
            .map_err(|e| {
                ConfigError::invalid(format!("{at}.breaker_key.{}", e.field), e.constraint)
            })?;
        Ok(Some(KeyedBreaker {
            header: header_name(at, key)?,
            registry,
            clock: clock.clone(),
            last_eviction: AtomicU64::new(clock.now().as_nanos()),
            eviction_every: config.idle_ttl.map_or(u64::MAX, |t| {
                u64::try_from((t / 2).as_nanos()).unwrap_or(u64::MAX)
            }),
        }))
    }

    /// Whether a route reloaded from `before` to `after` keeps its keyed
    /// breakers: both have a family, with the same name, the same template
    /// and the same `breaker_key` section (header and bounds). What else the
    /// route changes (its path, timeouts, retries) says nothing of its
    /// tenants' health.
    pub(crate) fn same_family(before: &RouteSection, after: &RouteSection) -> bool {
        after.breaker_key.is_some()
            && before.breaker_key == after.breaker_key
            && before.breaker == after.breaker
            && before.breaker_name() == after.breaker_name()
    }

    /// The same family for a reloaded route: the registry (so every key's
    /// breaker and its state) is shared with `self`, which the requests
    /// still in flight on the previous table go on using. The eviction
    /// pacing is copied, not shared: at worst one extra eviction pass,
    /// which the registry tolerates.
    pub(crate) fn carried_over(&self) -> KeyedBreaker {
        KeyedBreaker {
            header: self.header.clone(),
            registry: self.registry.clone(),
            clock: self.clock.clone(),
            last_eviction: AtomicU64::new(self.last_eviction.load(Ordering::Relaxed)),
            eviction_every: self.eviction_every,
        }
    }

    /// A permit from the request's key's breaker, or the refusal naming it.
    fn acquire(&self, route: &str, parts: &Parts) -> Result<OwnedPermit, Rejection> {
        self.evict_when_due();
        let key = self.key(parts);
        let breaker = self.registry.get(&key).map_err(|e| {
            let name = match e {
                // Only with `overflow = "reject"`: no breaker for a new key.
                RegistryError::Full { .. } => format!("{}:overflow", self.registry.family()),
                // The template was validated; refuse rather than pass
                // unprotected if a key's breaker still cannot be built.
                RegistryError::InvalidConfig { breaker, .. } => breaker,
            };
            Rejection::new(Reason::CircuitOpen, Some(route)).breaker(&name)
        })?;
        breaker.try_acquire_owned().map_err(|r| {
            Rejection::new(Reason::from_rejected(&r), Some(route))
                .breaker(breaker.name())
                .retry_after(r.retry_after())
        })
    }

    /// The request's key: the header's value, `None` without it.
    fn key(&self, parts: &Parts) -> BreakerKey {
        parts
            .headers
            .get(&self.header)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    }

    /// The request's key as the member's name within the family says it
    /// (`(none)` without the header): what a shadow twin is keyed by.
    pub(crate) fn member_key(&self, parts: &Parts) -> String {
        self.key(parts).unwrap_or_else(|| NO_KEY.to_owned())
    }

    fn evict_when_due(&self) {
        let now = self.clock.now().as_nanos();
        let last = self.last_eviction.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= self.eviction_every
            && self
                .last_eviction
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.registry.evict_idle();
        }
    }
}

fn header_name(at: &str, key: &BreakerKeySection) -> Result<HeaderName, ConfigError> {
    HeaderName::from_bytes(key.header.as_bytes()).map_err(|_| {
        ConfigError::invalid(
            format!("{at}.breaker_key.header"),
            format!("{:?} is not a header name", key.header),
        )
    })
}

impl Route {
    /// The route breaker's permit for this request — the route's one
    /// breaker, or its key's — or the refusal saying which breaker refused.
    pub(crate) fn acquire_breaker(&self, parts: &Parts) -> Result<Option<OwnedPermit>, Rejection> {
        if let Some(keyed) = &self.guard.keyed_breaker {
            return keyed.acquire(&self.name, parts).map(Some);
        }
        match &self.breaker {
            Some(b) => b.try_acquire_owned().map(Some).map_err(|r| {
                Rejection::new(Reason::from_rejected(&r), Some(&self.name))
                    .breaker(b.name())
                    .retry_after(r.retry_after())
            }),
            None => Ok(None),
        }
    }
}
