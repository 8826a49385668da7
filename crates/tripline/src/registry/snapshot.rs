//! State snapshots of a whole registry: short-lived
//! processes (CLI tools, serverless functions, workers that restart often)
//! keep their protection across restarts by writing the family's breaker
//! states out at exit and reading them back at start.

use super::{BreakerRegistry, RegistryError, RegistryKey};
use crate::breaker::{CircuitBreaker, Snapshot};

impl<K: RegistryKey> BreakerRegistry<K> {
    /// Every keyed breaker's state, with its key (the overflow breaker is
    /// shared by many keys and not included). Serialise the keys your way;
    /// [`Snapshot`] is serde data.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tripline::registry::{BreakerRegistry, RegistryConfig};
    /// use tripline::State;
    ///
    /// let old = BreakerRegistry::<String>::try_new(RegistryConfig::default()).unwrap();
    /// old.get(&"eu".to_string()).unwrap().open_for(Duration::from_secs(60));
    /// let saved = old.snapshot();
    ///
    /// // Later, in a new process:
    /// let new = BreakerRegistry::<String>::try_new(RegistryConfig::default()).unwrap();
    /// for (key, snapshot) in saved {
    ///     new.restore(&key, &snapshot).unwrap();
    /// }
    /// assert_eq!(new.get(&"eu".to_string()).unwrap().state(), State::Open);
    /// ```
    pub fn snapshot(&self) -> Vec<(K, Snapshot)> {
        let guard = scc::Guard::new();
        self.shared
            .map
            .iter(&guard)
            .map(|(k, e)| (k.clone(), e.breaker.snapshot()))
            .collect()
    }

    /// Gets (or creates) the breaker of `key` and puts it into the state of
    /// `snapshot` — open until its original deadline, its window counts,
    /// its backoff step. Meant for a fresh registry at start: a breaker
    /// that already saw calls keeps them and adds the snapshot's.
    pub fn restore(&self, key: &K, snapshot: &Snapshot) -> Result<CircuitBreaker, RegistryError> {
        let breaker = self.get(key)?;
        breaker.restore_from(snapshot);
        Ok(breaker)
    }
}
