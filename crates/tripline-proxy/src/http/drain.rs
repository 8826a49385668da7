//! Shutting down in steps: the level every listener and connection
//! watches (serving, draining, cut), the accept loop that stops at the
//! drain, and the wait that serves a hyper connection until it is told
//! to finish. The data side's listeners and the admin listener share
//! them; they know nothing of what is served.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Serves a hyper connection to its end; once the drain starts it is asked
/// to finish gracefully, and at the cut it is dropped, which closes it and
/// cancels its request. A macro, not a function: hyper's connection types
/// each have their own `graceful_shutdown` (no common trait), and a
/// generic async function taking the shutdown as a closure trips rustc's
/// higher-ranked `Send` inference when the future is spawned.
/// `$conn` comes pinned (`std::pin::pin!` on the stack, or `Box::pin`
/// where the task must not carry the connection's whole state).
macro_rules! serve_until_cut {
    ($conn:expr, $stop:expr) => {{
        let stop: &mut tokio::sync::watch::Receiver<u8> = $stop;
        let mut conn = $conn;
        tokio::select! {
            _ = conn.as_mut() => {}
            _ = $crate::http::drain::reached(stop, $crate::http::drain::DRAINING) => {
                conn.as_mut().graceful_shutdown();
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = $crate::http::drain::reached(stop, $crate::http::drain::CUT) => {}
                }
            }
        }
    }};
}
pub(crate) use serve_until_cut;

/// Serving.
pub(crate) const RUNNING: u8 = 0;
/// No new connections; requests in flight finish, then connections close.
pub(crate) const DRAINING: u8 = 1;
/// The drain timeout passed: remaining connections are dropped.
pub(crate) const CUT: u8 = 2;

/// Accepts connections on `listener` until the drain starts, handing each
/// to `spawn` with its own view of the stop signal. An accept error (out
/// of descriptors and the like) is logged as `what` and retried shortly:
/// the connections already open keep being served.
pub(crate) async fn accept_until_drain(
    listener: TcpListener,
    mut stop: watch::Receiver<u8>,
    what: &'static str,
    mut spawn: impl FnMut(TcpStream, SocketAddr, watch::Receiver<u8>),
) {
    let for_connections = stop.clone();
    loop {
        tokio::select! {
            _ = reached(&mut stop, DRAINING) => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => spawn(stream, peer, for_connections.clone()),
                Err(e) => {
                    tracing::warn!(error = %e, "{what}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
}

/// Waits until the shutdown has reached `level` (or the sender is gone).
pub(crate) async fn reached(stop: &mut watch::Receiver<u8>, level: u8) {
    // The guard `wait_for` returns is not `Send`: drop it here.
    let _ = stop.wait_for(|s| *s >= level).await;
}

/// Tells a busy connection when to re-poll its shutdown waits
/// ([`reached`]): once, to register its task's waker (which stays the
/// same), then only when the shutdown level moved — one load, where
/// re-polling a `watch` wait on every wake-up costs ~400 instructions.
pub(crate) struct LevelMoves {
    level: watch::Receiver<u8>,
    looked: bool,
}

impl LevelMoves {
    pub(crate) fn new(stop: &watch::Receiver<u8>) -> Self {
        LevelMoves {
            level: stop.clone(),
            looked: false,
        }
    }

    /// `true` the first time, then when the level moved since the last
    /// `true` (or the proxy is gone).
    pub(crate) fn moved(&mut self) -> bool {
        if self.looked && !self.level.has_changed().unwrap_or(true) {
            return false;
        }
        self.looked = true;
        self.level.borrow_and_update();
        true
    }

    /// Whether the drain has begun.
    pub(crate) fn draining(&self) -> bool {
        *self.level.borrow() >= DRAINING
    }
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// The operator's drain, for rolling restarts (`POST /api/drain`): the
/// proxy keeps serving, but says it is not ready (`GET /ready` answers
/// 503, so a load balancer stops sending it new clients) and closes each
/// HTTP/1 connection after its answer (`connection: close`), so clients
/// reconnect to another instance before this one stops. One relaxed load
/// per answer; the admin side sets it, the data side reads it.
#[derive(Clone, Debug, Default)]
pub(crate) struct DrainSwitch(Arc<AtomicBool>);

impl DrainSwitch {
    /// Turns the drain on (`true`) or off; returns whether it was on.
    pub(crate) fn set(&self, on: bool) -> bool {
        self.0.swap(on, Ordering::Relaxed)
    }

    /// Whether the operator asked for the drain.
    pub(crate) fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
