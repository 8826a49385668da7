//! The store behind a run: the state dir, or etcd shared by a fleet.
//!
//! Both do the same thing — one read–decide–write at a time — in their own
//! way: the state dir under a file lock, etcd as a transaction guarded by
//! the state key's revision and retried on conflict. So `decide` must be
//! free of side effects: etcd may call it more than once, each time on the
//! state as it is then. An enum rather than a trait object: `update` is
//! generic over what the decision returns, and there are exactly two.

use std::collections::HashSet;

use super::owner::Owner;
use super::rebuild::Holders;
use super::state::StateFile;
use super::store::Store;
use super::store_etcd::EtcdStore;
use crate::CliError;

/// Where the breaker's state lives.
pub(crate) enum Backend {
    File(Store),
    /// etcd, and the state dir for what stays per host (the count of store
    /// errors).
    Etcd(Box<EtcdStore>, Store),
}

/// Why a read–decide–write did not happen.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// etcd could not be reached (or kept conflicting): `on_store_error`
    /// decides.
    Unreachable(String),
    /// Bad input or an unusable state: the run stops with this error.
    Fatal(CliError),
}

impl From<CliError> for StoreError {
    fn from(e: CliError) -> Self {
        StoreError::Fatal(e)
    }
}

impl Backend {
    /// One read–decide–write. The state is written back only if `decide`
    /// changed it (see `EtcdStore::update` for what etcd skips besides).
    pub(crate) fn update<T>(
        &self,
        mut decide: impl FnMut(&mut StateFile, Holders<'_>) -> Result<T, CliError>,
    ) -> Result<T, StoreError> {
        match self {
            Backend::File(store) => {
                let lock = store.lock()?;
                let mut state = store.read(&lock);
                let before = state.clone();
                let out = decide(&mut state, Holders::Processes)?;
                if state != before {
                    store.write(&lock, &state, before.decision_differs(&state))?;
                }
                Ok(out)
            }
            Backend::Etcd(etcd, _) => etcd.update(decide),
        }
    }

    /// Reads the state without writing (`--status`).
    pub(crate) fn read(&self) -> Result<(StateFile, Option<HashSet<u64>>), StoreError> {
        match self {
            Backend::File(store) => {
                let lock = store.lock()?;
                Ok((store.read(&lock), None))
            }
            Backend::Etcd(etcd, _) => etcd.read(),
        }
    }

    /// Who a probe lease names: the process (judged through `/proc`) in
    /// the state dir; nobody in etcd, where the lease's key alone says
    /// whether its process lives, the same way on every host.
    pub(crate) fn lease_owner(&self) -> Option<Owner> {
        match self {
            Backend::File(_) => Owner::current(),
            Backend::Etcd(..) => None,
        }
    }

    /// Ends this process's probe lease, if it took one (after its outcome
    /// was written).
    pub(crate) fn release(&self) {
        if let Backend::Etcd(etcd, _) = self {
            etcd.release();
        }
    }

    /// Where the state is, for `--status`.
    pub(crate) fn location(&self) -> String {
        match self {
            Backend::File(store) => format!("state file: {}", store.state_path().display()),
            Backend::Etcd(etcd, _) => format!("store: {}", etcd.location()),
        }
    }

    /// Counts one unreachable-store error on this host; returns the count
    /// (`None` with the state dir, which has no such errors).
    pub(crate) fn count_store_error(&self) -> Option<u64> {
        match self {
            Backend::File(_) => None,
            Backend::Etcd(_, local) => Some(local.bump_store_errors()),
        }
    }

    /// This host's count of unreachable-store errors so far.
    pub(crate) fn store_errors(&self) -> Option<u64> {
        match self {
            Backend::File(_) => None,
            Backend::Etcd(_, local) => Some(local.store_errors()),
        }
    }
}
