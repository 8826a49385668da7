//! The breaker in etcd, shared by every runner that names the same store.
//!
//! Keys under the URL's prefix `P`, for breaker `NAME`:
//!
//! - `P/run/NAME/state`: the same JSON as the state file.
//! - `P/run/NAME/probes/<lease>`: one key per probe in flight, attached to
//!   an etcd lease of `probe_ttl` that its run renews while the command
//!   runs. A run that dies (on any host) stops renewing; etcd deletes the
//!   key when the lease expires, and the next run that finds a probe of
//!   the log without its key frees the slot (an abandoned probe: no
//!   evidence either way).
//!
//! Every change is one transaction guarded by the state key's
//! `mod_revision`: the state and the probe key are written together or
//! not at all, and only if nobody wrote the state since it was read. On a
//! conflict the transaction's failure branch brings back the keys as they
//! are now, and the decision is taken again on them after a short jittered
//! pause (at most [`MAX_ATTEMPTS`] times). A closed run therefore costs one
//! read when it starts and one transaction when it ends; a run refused by
//! the open breaker writes nothing unless it moved a decision (a refusal is
//! not counted in etcd: a refused fleet would otherwise write most when
//! it retries most).

mod keepalive;

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Duration;

use tripline_config::etcd::{EtcdError, Gateway, KeyValue, TxnOp, TxnOutcome};

use super::backend::StoreError;
use super::rebuild::Holders;
use super::state::{ProbeEvent, StateFile, VERSION};
use super::store_spec::{EtcdUrl, StoreSpec};
use crate::CliError;
use keepalive::KeepAlive;

/// Attempts of one read–decide–write under contention before it counts as
/// a store error.
pub(crate) const MAX_ATTEMPTS: u32 = 40;

/// What was read: the state, its key's revision, the probes with a key.
#[derive(Clone)]
struct Seen {
    state: StateFile,
    mod_revision: i64,
    live: HashSet<u64>,
}

/// One breaker's keys in etcd.
pub(crate) struct EtcdStore {
    url: EtcdUrl,
    runtime: tokio::runtime::Runtime,
    gateway: Gateway,
    probe_ttl: Duration,
    state_key: String,
    dir_key: String,
    /// The last state read or written (a run's second step starts from it:
    /// if nobody wrote meanwhile, its transaction needs no read).
    seen: RefCell<Option<Seen>>,
    /// This run's etcd lease for its probe key, once granted.
    lease: RefCell<Option<i64>>,
    keepalive: RefCell<Option<KeepAlive>>,
}

impl EtcdStore {
    pub(crate) fn open(url: &EtcdUrl, spec: &StoreSpec, name: &str) -> Result<Self, CliError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::other(format!("cannot start the etcd client: {e}")))?;
        let dir_key = format!("{}/run/{name}/", url.prefix);
        Ok(EtcdStore {
            url: url.clone(),
            gateway: Gateway::new(url.endpoint.clone(), spec.timeout),
            runtime,
            probe_ttl: spec.probe_ttl,
            state_key: format!("{dir_key}state"),
            dir_key,
            seen: RefCell::new(None),
            lease: RefCell::new(None),
            keepalive: RefCell::new(None),
        })
    }

    pub(crate) fn location(&self) -> String {
        format!("{} (key {})", self.url.text, self.state_key)
    }

    /// See [`Backend::update`](super::backend::Backend::update).
    pub(crate) fn update<T>(
        &self,
        mut decide: impl FnMut(&mut StateFile, Holders<'_>) -> Result<T, CliError>,
    ) -> Result<T, StoreError> {
        let mut seen = match self.seen.borrow_mut().take() {
            Some(s) => s,
            None => self.read_seen()?,
        };
        let mut rng = Jitter::new();
        for attempt in 0..MAX_ATTEMPTS {
            let mut state = seen.state.clone();
            let out = decide(&mut state, Holders::EtcdKeys(&seen.live))?;
            if !worth_writing(&seen.state, &state) {
                *self.seen.borrow_mut() = Some(seen);
                return Ok(out);
            }
            let ops = self.ops(&seen.state, &state)?;
            let txn = self.gateway.txn_if_unchanged(
                self.state_key.as_bytes(),
                seen.mod_revision,
                &ops,
                self.dir_key.as_bytes(),
            );
            match self.runtime.block_on(txn).map_err(|e| self.error(e))? {
                TxnOutcome::Committed(revision) => {
                    let mut live = seen.live;
                    if let Some(lease) = *self.lease.borrow() {
                        live.extend(own_admissions(&seen.state, &state));
                        self.keep_alive(lease);
                    }
                    *self.seen.borrow_mut() = Some(Seen {
                        state,
                        mod_revision: revision,
                        live,
                    });
                    return Ok(out);
                }
                TxnOutcome::Conflict(kvs, _) => {
                    seen = self.parse(&kvs)?;
                    let pause = rng.pause(attempt);
                    self.runtime
                        .block_on(async { tokio::time::sleep(pause).await });
                }
            }
        }
        Err(StoreError::Unreachable(format!(
            "{}: {MAX_ATTEMPTS} conflicting writes in a row",
            self.url.text
        )))
    }

    /// Reads the state and the probes in flight.
    pub(crate) fn read(&self) -> Result<(StateFile, Option<HashSet<u64>>), StoreError> {
        let seen = self.read_seen()?;
        Ok((seen.state, Some(seen.live)))
    }

    /// Ends this run's probe lease (its key goes with it); best effort: an
    /// unrevoked lease expires by itself.
    pub(crate) fn release(&self) {
        if let Some(k) = self.keepalive.borrow_mut().take() {
            k.stop();
        }
        if let Some(lease) = self.lease.borrow_mut().take() {
            let _ = self.runtime.block_on(self.gateway.lease_revoke(lease));
        }
    }

    fn read_seen(&self) -> Result<Seen, StoreError> {
        let range = self.gateway.range(self.dir_key.as_bytes(), true, 0);
        let (kvs, _) = self.runtime.block_on(range).map_err(|e| self.error(e))?;
        self.parse(&kvs)
    }

    /// The state key (absent: a fresh breaker) and the probe keys. A state
    /// key that is not a run's state is refused, never overwritten: the
    /// prefix is probably someone else's.
    fn parse(&self, kvs: &[KeyValue]) -> Result<Seen, StoreError> {
        let mut seen = Seen {
            state: StateFile::fresh(),
            mod_revision: 0,
            live: HashSet::new(),
        };
        let probes = format!("{}probes/", self.dir_key);
        for kv in kvs {
            let key = String::from_utf8_lossy(&kv.key);
            if key == self.state_key {
                seen.state = serde_json::from_slice::<StateFile>(&kv.value)
                    .ok()
                    .filter(|s| s.version == VERSION)
                    .ok_or_else(|| {
                        CliError::input(format!(
                            "{} {}: key {key} does not hold a `tripline run` state (wrong prefix?); nothing written",
                            self.url.field, self.url.text
                        ))
                    })?;
                seen.mod_revision = kv.mod_revision;
            } else if let Some(id) = key.strip_prefix(&probes).and_then(|i| i.parse().ok()) {
                seen.live.insert(id);
            }
        }
        Ok(seen)
    }

    /// The transaction's writes: the state, and a leased key for each probe
    /// this run admitted.
    fn ops(&self, before: &StateFile, after: &StateFile) -> Result<Vec<TxnOp>, StoreError> {
        let value = serde_json::to_vec(after)
            .map_err(|e| CliError::other(format!("cannot encode state: {e}")))?;
        let mut ops = vec![TxnOp::Put {
            key: self.state_key.clone().into_bytes(),
            value,
            lease: 0,
        }];
        let admitted = own_admissions(before, after);
        if !admitted.is_empty() {
            let lease = self.lease()?;
            for id in admitted {
                ops.push(TxnOp::Put {
                    key: format!("{}probes/{id}", self.dir_key).into_bytes(),
                    value: std::process::id().to_string().into_bytes(),
                    lease,
                });
            }
        }
        Ok(ops)
    }

    fn lease(&self) -> Result<i64, StoreError> {
        if let Some(id) = *self.lease.borrow() {
            return Ok(id);
        }
        let grant = self.gateway.lease_grant(self.probe_ttl);
        let id = self.runtime.block_on(grant).map_err(|e| self.error(e))?;
        *self.lease.borrow_mut() = Some(id);
        Ok(id)
    }

    fn keep_alive(&self, lease: i64) {
        let mut slot = self.keepalive.borrow_mut();
        if slot.is_none() {
            *slot = KeepAlive::start(self.gateway.endpoint(), lease, self.probe_ttl);
        }
    }

    /// etcd's own refusals (no auth, permission denied, a bad request) are
    /// bad input, named by the store; anything else is an outage.
    fn error(&self, e: EtcdError) -> StoreError {
        match e {
            EtcdError::Status { status, body } if (400..500).contains(&status) => {
                StoreError::Fatal(CliError::input(format!(
                    "{} {}: etcd refused the request ({status}: {}); check its auth and the prefix",
                    self.url.field,
                    self.url.text,
                    body.trim()
                )))
            }
            other => StoreError::Unreachable(format!("{}: {other}", self.url.text)),
        }
    }
}

impl Drop for EtcdStore {
    /// A lease granted for an admission that then lost its race (the
    /// decision taken again on a conflict refused the run) is revoked
    /// here rather than left to expire.
    fn drop(&mut self) {
        self.release();
    }
}

/// Whether `after` is worth a transaction: anything but a refusal's count.
fn worth_writing(before: &StateFile, after: &StateFile) -> bool {
    let mut same = after.clone();
    same.counters.rejected = before.counters.rejected;
    &same != before
}

/// Probe leases this process admitted in `after` that `before` lacks.
fn own_admissions(before: &StateFile, after: &StateFile) -> Vec<u64> {
    let known: HashSet<u64> = before.log.iter().filter_map(admitted).collect();
    let me = std::process::id();
    after
        .log
        .iter()
        .filter(|e| matches!(e, ProbeEvent::Admit { pid, .. } if *pid == me))
        .filter_map(admitted)
        .filter(|id| !known.contains(id))
        .collect()
}

fn admitted(e: &ProbeEvent) -> Option<u64> {
    match e {
        ProbeEvent::Admit { lease, .. } => Some(*lease),
        ProbeEvent::Finish { .. } => None,
    }
}

/// Full jitter on a doubling cap (1 ms up to 64 ms), from a generator
/// seeded by the pid, so runners that conflicted once do not retry in step.
struct Jitter(u64);

impl Jitter {
    fn new() -> Self {
        Jitter(u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn pause(&mut self, attempt: u32) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let cap_micros = 1000u64 << attempt.min(6);
        Duration::from_micros(self.0 % cap_micros)
    }
}
