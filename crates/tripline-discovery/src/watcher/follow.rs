//! One session's life: read with a watch, publish, wait, read again.

use std::pin::pin;

use tokio::time::Instant;
use zookeeper_client as zk;

use super::Outputs;
use crate::ZooKeeperDiscovery;
use crate::membership::{Membership, Read};

/// Follows the folder on `client` until its session ends (expired, closed
/// or refused); returns why, for the status.
pub(super) async fn follow(
    client: &zk::Client,
    config: &ZooKeeperDiscovery,
    membership: &mut Membership,
    out: &Outputs,
) -> String {
    let mut state = client.state_watcher();
    loop {
        let (children, watcher) = match read(client, &config.path).await {
            Ok(read) => read,
            Err(e) if is_terminal(&e) => return e.to_string(),
            Err(e) => {
                // Connection loss mid-read: the client reconnects within
                // the session; read again once it has.
                out.lost(config, false, e.to_string());
                if let Err(why) = connected_again(&mut state, config, out).await {
                    return why;
                }
                continue;
            }
        };
        out.publish(config, membership, &Read::of(&children, config.protocol));
        let mut changed = pin!(watcher.changed());
        loop {
            let expiry = membership.next_expiry();
            tokio::select! {
                event = &mut changed => {
                    if event.event_type == zk::EventType::Session {
                        if event.session_state.is_terminated() {
                            return format!("session {}", event.session_state);
                        }
                        out.lost(config, false, format!("session {}", event.session_state));
                        if let Err(why) = connected_again(&mut state, config, out).await {
                            return why;
                        }
                    }
                    break;
                }
                session = state.changed() => match session {
                    zk::SessionState::Disconnected => {
                        out.lost(config, false, "disconnected".to_owned());
                    }
                    s if s.is_terminated() => return format!("session {s}"),
                    // Connected again: the client restored the watch, but
                    // a read now also covers what changed meanwhile.
                    _ => break,
                },
                () = sleep_until(expiry), if expiry.is_some() && is_connected(out) => {
                    membership.expire(Instant::now());
                    out.publish_set(config, membership);
                }
            }
        }
    }
}

/// The children and a watch on them; a missing folder is empty, watched
/// for its creation.
async fn read(
    client: &zk::Client,
    path: &str,
) -> Result<(Vec<String>, zk::OneshotWatcher), zk::Error> {
    loop {
        match client.get_and_watch_children(path).await {
            Ok((children, _, watcher)) => return Ok((children, watcher)),
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e),
        }
        match client.check_and_watch_stat(path).await? {
            (None, watcher) => return Ok((Vec::new(), watcher)),
            // Created between the two calls: read its children.
            (Some(_), _) => continue,
        }
    }
}

/// Waits for the session to be connected again; `Err` (why) if it ended.
async fn connected_again(
    state: &mut zk::StateWatcher,
    config: &ZooKeeperDiscovery,
    out: &Outputs,
) -> Result<(), String> {
    loop {
        match state.state() {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => return Ok(()),
            s if s.is_terminated() => return Err(format!("session {s}")),
            s => out.lost(config, false, format!("session {s}")),
        }
        state.changed().await;
    }
}

fn is_terminal(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed
    )
}

fn is_connected(out: &Outputs) -> bool {
    out.status.borrow().session.is_connected()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
