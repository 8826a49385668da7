//! Registry-level subscriptions: one callback sees the events of every
//! breaker of the family, tagged with the key.
//!
//! A breaker's events reach the registry through one forwarding subscriber
//! on the breaker, holding the key and a weak handle to the registry (no
//! cycle). Forwarders cost ~110 bytes per breaker, so they are installed
//! only once somebody subscribes to the registry: the first subscription
//! installs them on every breaker present, and every breaker created after
//! it gets one at creation. The two sides meet through sequentially
//! consistent fences (the creator inserts then reads the flag, the
//! subscriber sets the flag then scans), so no breaker is missed, and the
//! breaker itself installs its forwarder at most once (the check happens
//! under its event lock: the map may hand out an entry twice while it
//! resizes, so a flag in the entry could be copied and claimed twice).
//!
//! Events are transitions only — rare — so the subscriber list is a mutex,
//! cloned before the callbacks run so that a callback may call back into
//! the registry.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::entry::Entry;
use super::{BreakerRegistry, RegistryKey, Shared};
use crate::breaker::{CircuitBreaker, Event};

type Callback<K> = Arc<dyn Fn(Option<&K>, &Event) + Send + Sync>;

pub(crate) struct Subscribers<K> {
    next_id: AtomicU64,
    list: Mutex<Vec<(u64, Callback<K>)>>,
}

impl<K> Subscribers<K> {
    pub(crate) fn new() -> Self {
        Subscribers {
            next_id: AtomicU64::new(0),
            list: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn add(&self, f: Callback<K>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().push((id, f));
        id
    }

    pub(crate) fn remove(&self, id: u64) {
        self.lock().retain(|(i, _)| *i != id);
    }

    /// Delivers `event` of the breaker of `key` (`None`: the overflow
    /// breaker) to every subscriber; a panicking one does not stop the rest.
    pub(crate) fn dispatch(&self, key: Option<&K>, event: &Event) {
        let subscribers: Vec<Callback<K>> = self.lock().iter().map(|(_, f)| f.clone()).collect();
        for f in subscribers {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(key, event)));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Callback<K>)>> {
        // Every critical section leaves the list consistent.
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a [`RegistrySubscription`] needs from the registry, without its
/// key type.
pub(crate) trait Unsubscribe: Send + Sync {
    fn unsubscribe(&self, id: u64);
}

/// Keeps a registry-level subscription alive; dropping it unsubscribes.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use tripline::registry::{BreakerRegistry, RegistryConfig};
///
/// let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
/// let events = Arc::new(AtomicUsize::new(0));
/// let seen = events.clone();
/// let subscription = registry.subscribe(move |key, event| {
///     assert_eq!(key, Some(&7));
///     assert_eq!(&*event.breaker, "default:7");
///     seen.fetch_add(1, Ordering::Relaxed);
/// });
/// registry.get(&7).unwrap().force_open();
/// assert_eq!(events.load(Ordering::Relaxed), 1);
/// drop(subscription);
/// registry.get(&7).unwrap().reset();
/// assert_eq!(events.load(Ordering::Relaxed), 1, "unsubscribed");
/// ```
#[must_use = "dropping a RegistrySubscription unsubscribes at once"]
pub struct RegistrySubscription {
    pub(crate) registry: Weak<dyn Unsubscribe>,
    pub(crate) id: u64,
}

impl RegistrySubscription {
    /// Keeps the callback subscribed for the registry's whole life.
    pub fn detach(mut self) {
        self.registry = Weak::<Detached>::new();
    }
}

struct Detached;

impl Unsubscribe for Detached {
    fn unsubscribe(&self, _: u64) {}
}

impl Drop for RegistrySubscription {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            registry.unsubscribe(self.id);
        }
    }
}

impl fmt::Debug for RegistrySubscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrySubscription")
            .field("id", &self.id)
            .finish()
    }
}

impl<K: RegistryKey> BreakerRegistry<K> {
    /// Calls `f` with every event of every breaker of the family — present
    /// and future — with the breaker's key (`None` for the overflow
    /// breaker), until the returned subscription is dropped.
    pub fn subscribe(
        &self,
        f: impl Fn(Option<&K>, &Event) + Send + Sync + 'static,
    ) -> RegistrySubscription {
        let id = self.shared.subscribers.add(Arc::new(f));
        self.shared.start_forwarding(&self.shared);
        let shared: Arc<dyn Unsubscribe> = self.shared.clone();
        RegistrySubscription {
            registry: Arc::downgrade(&shared),
            id,
        }
    }
}

impl<K: RegistryKey> Unsubscribe for Shared<K> {
    fn unsubscribe(&self, id: u64) {
        self.subscribers.remove(id);
    }
}

impl<K: RegistryKey> Shared<K> {
    /// Installs forwarders on every breaker, once, at the first subscription.
    fn start_forwarding(&self, this: &Arc<Self>) {
        if self.forwarding.swap(true, Ordering::SeqCst) {
            return;
        }
        fence(Ordering::SeqCst);
        let guard = scc::Guard::new();
        for (key, entry) in self.map.iter(&guard) {
            forward(Some(key), entry, this);
        }
        self.forward_overflow_if_subscribed(this);
    }

    /// After `key` was inserted: its forwarder, if anyone listens.
    pub(crate) fn forward_if_subscribed(&self, key: &K, this: &Arc<Self>) {
        fence(Ordering::SeqCst);
        if self.forwarding.load(Ordering::SeqCst) {
            let guard = scc::Guard::new();
            if let Some(entry) = self.map.peek(key, &guard) {
                forward(Some(key), entry, this);
            }
        }
    }

    /// After the overflow breaker was created: its forwarder, if anyone
    /// listens.
    pub(crate) fn forward_overflow_if_subscribed(&self, this: &Arc<Self>) {
        fence(Ordering::SeqCst);
        if self.forwarding.load(Ordering::SeqCst)
            && let Some(b) = self.overflow_breaker.get()
            && !self.overflow_forwarded.swap(true, Ordering::AcqRel)
        {
            install(None, b, this);
        }
    }
}

fn forward<K: RegistryKey>(key: Option<&K>, entry: &Entry, this: &Arc<Shared<K>>) {
    install(key, &entry.breaker, this);
}

/// Subscribes the forwarder of `key`'s breaker (`None`: the overflow one).
fn install<K: RegistryKey>(key: Option<&K>, breaker: &CircuitBreaker, this: &Arc<Shared<K>>) {
    let registry = Arc::downgrade(this);
    let key = key.cloned();
    breaker.subscribe_forwarder_once(move |event| {
        if let Some(shared) = registry.upgrade() {
            shared.subscribers.dispatch(key.as_ref(), event);
        }
    });
}
