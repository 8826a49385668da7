//! The watcher task: one ZooKeeper session following one providers folder.
//!
//! It reads the folder's children with a watch, publishes the set, and
//! waits for whichever comes first: the watch firing (a provider joined or
//! left: read again), the session's state changing, or a vanished
//! provider's grace ending. Each read sets a new one-shot watch, so no
//! change between two reads is lost (ZooKeeper fires a watch for any
//! change after the read that set it).
//!
//! A lost connection is the client's to repair within the session timeout
//! (the session and its watch survive it); meanwhile the set is frozen and
//! the status says `Lost`. Once connected again the folder is read anew.
//! With no server reachable for the whole session timeout the client
//! gives the session up itself (`Expired`, about 1.4× the timeout here).
//! An expired session (or one that could not be made) is replaced by a new
//! one after a back-off doubling from 100 ms to 5 s, the set still frozen.
//! Frozen means frozen: vanished providers' grace does not run out while
//! ZooKeeper cannot say whether they came back.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::membership::{Membership, Read};
use crate::{ProviderSet, Session, Status, ZooKeeperDiscovery};

mod backoff;
mod follow;

pub(crate) use backoff::Backoff;

/// The two channels the watcher publishes on.
pub(crate) struct Outputs {
    pub(crate) providers: watch::Sender<ProviderSet>,
    pub(crate) status: watch::Sender<Status>,
}

impl Outputs {
    /// Applies a read and publishes the set (only when it changed) and the
    /// status (always: the read count moves).
    pub(crate) fn publish(
        &self,
        config: &ZooKeeperDiscovery,
        membership: &mut Membership,
        read: &Read,
    ) {
        let applied = membership.apply(read, Instant::now());
        for (child, why) in &read.skipped {
            tracing::warn!(path = %config.path, %child, %why, "provider URL skipped: not a provider URL");
        }
        if !applied {
            tracing::warn!(
                path = %config.path,
                other_protocols = ?read.other_protocols,
                disabled = read.disabled,
                skipped = read.skipped.len(),
                "no usable {} provider in ZooKeeper; keeping the last known providers",
                config.protocol
            );
        }
        // Status first: whoever sees the new set sees its status too.
        self.status.send_modify(|s| {
            s.session = Session::Connected;
            s.reads += 1;
            s.skipped = read.skipped.len();
            s.skipped_total += read.skipped.len() as u64;
            s.usable = read.providers.len();
            s.disabled = read.disabled;
            s.other_protocols = read
                .other_protocols
                .iter()
                .map(|(p, n)| (p.clone(), *n))
                .collect();
            s.kept_last_set = !applied;
            s.last_error = None;
        });
        self.publish_set(config, membership);
    }

    /// Publishes the membership's set if it differs from the last one.
    pub(crate) fn publish_set(&self, config: &ZooKeeperDiscovery, membership: &Membership) {
        let set = membership.set();
        let changed = self.providers.send_if_modified(|current| {
            let changed = *current != set;
            if changed {
                *current = set.clone();
            }
            changed
        });
        if changed {
            let addresses: Vec<&str> = set.providers().iter().map(|p| p.address.as_str()).collect();
            tracing::info!(path = %config.path, providers = ?addresses, "providers follow ZooKeeper");
        }
    }

    /// Marks the session lost (or expired), keeping the first `since`;
    /// logs once, when it stops being connected.
    pub(crate) fn lost(&self, config: &ZooKeeperDiscovery, expired: bool, error: String) {
        self.status.send_modify(|s| {
            let since = match s.session {
                Session::Lost { since } | Session::Expired { since } => since,
                Session::Connecting | Session::Connected => {
                    tracing::warn!(
                        zookeeper = %config.zookeeper,
                        path = %config.path,
                        %error,
                        expired,
                        "ZooKeeper session lost; keeping the last known providers and retrying"
                    );
                    Instant::now()
                }
            };
            // A failed connect after an expiry is still an expiry.
            let expired = expired || matches!(s.session, Session::Expired { .. });
            s.session = if expired {
                Session::Expired { since }
            } else {
                Session::Lost { since }
            };
            s.last_error = Some(error);
        });
    }
}

/// Follows `config` until every receiver of the set is dropped (or the
/// task is aborted); the session closes with it.
pub(crate) async fn run(config: ZooKeeperDiscovery, out: Outputs) {
    tokio::select! {
        () = follow_sessions(&config, &out) => {}
        () = out.providers.closed() => {}
    }
}

/// One session after another, for ever.
async fn follow_sessions(config: &ZooKeeperDiscovery, out: &Outputs) {
    let mut membership = Membership::new(config.grace);
    let mut backoff = Backoff::default();
    let mut sessions = 0u64;
    loop {
        let client = match connect(config).await {
            Ok(client) => client,
            Err(error) => {
                out.lost(config, false, error);
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
        };
        if sessions > 0 {
            out.status.send_modify(|s| s.reconnects += 1);
        }
        sessions += 1;
        backoff.reset();
        let ended = follow::follow(&client, config, &mut membership, out).await;
        out.lost(config, true, ended);
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// A new session, or why none could be made within the session timeout.
async fn connect(config: &ZooKeeperDiscovery) -> Result<zk::Client, String> {
    let connecting = zk::Client::connector()
        .with_session_timeout(config.session_timeout)
        .connect(&config.zookeeper);
    match tokio::time::timeout(config.session_timeout + Duration::from_secs(1), connecting).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(format!("cannot connect to {}: {e}", config.zookeeper)),
        Err(_) => Err(format!(
            "cannot connect to {}: no session within {:?}",
            config.zookeeper, config.session_timeout
        )),
    }
}
