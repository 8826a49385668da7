//! Listening, serving connections, and draining on shutdown.
//!
//! Each accepted connection is served on its own task by hyper: HTTP/1.1,
//! or HTTP/2 when the client opens with the HTTP/2 preface (h2c with prior
//! knowledge, or HTTP/2 picked by ALPN on a TLS listener), with
//! `TCP_NODELAY` set and a bound on how long the client may take to send a
//! request's headers (the listener's `header_read_timeout`). An idle
//! HTTP/1 keep-alive connection is parked on its bare socket, holding no
//! HTTP buffers, until the client sends again or the listener's
//! `keep_alive_timeout` passes (see [`connection`]). On shutdown the
//! listeners stop accepting, parked connections close at once, every other
//! connection is asked to finish its request in flight and then close
//! (keep-alive ends), and the proxy waits for them — up to the drain
//! timeout, after which the remaining connections are dropped.

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
            _ = $crate::data::server::reached(stop, $crate::data::server::DRAINING) => {
                conn.as_mut().graceful_shutdown();
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = $crate::data::server::reached(stop, $crate::data::server::CUT) => {}
                }
            }
        }
    }};
}
pub(crate) use serve_until_cut;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::data::forward::Downstream;
use crate::proxy::runtime::Binding;
use crate::proxy::{Inner, Proxy};

mod connection;
mod h1_fast;
mod h2_resets;
mod linger;
mod refuse;

use connection::Settings;

/// A proxy serving its listeners; dropping it does not stop it, call
/// [`shutdown`](Running::shutdown).
#[derive(Debug)]
pub struct Running {
    addrs: Vec<SocketAddr>,
    admin: Option<SocketAddr>,
    /// [`RUNNING`], then [`DRAINING`], then [`CUT`].
    stop: watch::Sender<u8>,
    /// Closed (every sender dropped) when the last connection has ended.
    connections: mpsc::Receiver<()>,
    accept: JoinSet<()>,
    drain_timeout: Duration,
    /// The proxy served, for [`reload`](Running::reload).
    pub(crate) proxy: Proxy,
    /// The access log's writer, finished after the drain.
    access_log: Option<crate::data::access_log::Writer>,
}

/// Serving.
pub(crate) const RUNNING: u8 = 0;
/// No new connections; requests in flight finish, then connections close.
pub(crate) const DRAINING: u8 = 1;
/// The drain timeout passed: remaining connections are dropped.
pub(crate) const CUT: u8 = 2;

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drained {
    /// Whether every connection finished before the drain timeout.
    pub complete: bool,
}

impl Proxy {
    /// Binds every listener and starts serving; returns once all are bound.
    pub async fn start(&self) -> io::Result<Running> {
        self.start_with(&Binding::Alone).await
    }

    /// [`start`](Proxy::start), binding as `binding` says (one of several
    /// per-core runtimes shares the ports, and only the first serves admin
    /// and refreshes DNS).
    pub(crate) async fn start_with(&self, binding: &Binding) -> io::Result<Running> {
        // One writer per proxy: the first runtime's (per core, the others
        // send their lines to the same queue).
        let access_log = match binding.is_first() {
            true => self.inner.access_log.start_writer().await?,
            false => None,
        };
        let (stop, stop_rx) = watch::channel(RUNNING);
        let (alive, connections) = mpsc::channel(1);
        let mut addrs = Vec::new();
        let mut accept = JoinSet::new();
        for (i, l) in self.inner.config.listeners.iter().enumerate() {
            let listener = binding.bind(i, &l.address).await?;
            addrs.push(listener.local_addr()?);
            let inner = self.inner.clone();
            let tls = self.inner.acceptors.get(i).cloned().flatten();
            let settings = Arc::new(Settings::new(l, &self.inner.config.proxy));
            accept.spawn(accept_loop(
                listener,
                inner,
                settings,
                tls,
                stop_rx.clone(),
                alive.clone(),
            ));
        }
        let mut admin = None;
        if binding.is_first() {
            crate::control::dns::spawn_refreshers(&self.inner, &mut accept);
            crate::control::config_source::spawn(&self.inner, &mut accept)?;
        }
        if let Some(section) = self
            .inner
            .config
            .admin
            .as_ref()
            .filter(|_| binding.is_first())
        {
            let listener = TcpListener::bind(section.address.as_str())
                .await
                .map_err(|e| crate::proxy::runtime::address_error(&section.address, e))?;
            admin = Some(listener.local_addr()?);
            accept.spawn(crate::control::admin::accept_loop(
                listener,
                self.inner.clone(),
                self.inner.config.proxy.header_read_timeout,
                stop_rx.clone(),
                alive.clone(),
            ));
        }
        Ok(Running {
            addrs,
            admin,
            stop,
            connections,
            accept,
            drain_timeout: self.inner.config.proxy.drain_timeout,
            proxy: self.clone(),
            access_log,
        })
    }
}

impl Running {
    /// The bound addresses, in listener order (port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The admin listener's bound address (port 0 resolved), when the
    /// config has an `[admin]` section: where `GET /metrics` is served.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// Stops accepting, lets requests in flight finish, and returns when
    /// every connection has closed or the drain timeout has passed.
    pub async fn shutdown(mut self) -> Drained {
        let _ = self.stop.send(DRAINING);
        self.accept.shutdown().await;
        let all_closed = async { while self.connections.recv().await.is_some() {} };
        let complete = tokio::time::timeout(self.drain_timeout, all_closed)
            .await
            .is_ok();
        let _ = self.stop.send(CUT);
        if let Some(writer) = self.access_log.take() {
            writer.finish().await;
        }
        Drained { complete }
    }

    /// Serves until `signal` completes, then drains.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Drained {
        signal.await;
        self.shutdown().await
    }

    /// Serves until SIGTERM or Ctrl-C, then drains.
    pub async fn run_until_signal(self) -> Drained {
        self.run_until(shutdown_signal()).await
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

async fn accept_loop(
    listener: TcpListener,
    inner: Arc<Inner>,
    settings: Arc<Settings>,
    tls: Option<TlsAcceptor>,
    stop: watch::Receiver<u8>,
    alive: mpsc::Sender<()>,
) {
    accept_until_drain(listener, stop, "accept failed", |stream, peer, stop| {
        let _ = stream.set_nodelay(true);
        let (inner, settings, alive) = (inner.clone(), settings.clone(), alive.clone());
        match &tls {
            None => drop(tokio::spawn(async move {
                let _alive = alive;
                let downstream = Downstream::new(peer, false);
                connection::serve(stream, downstream, inner, settings, stop).await;
            })),
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _alive = alive;
                    let limit = settings.header_read_timeout;
                    if let Some(stream) =
                        crate::upstream::tls::handshake(&acceptor, stream, limit).await
                    {
                        let downstream = Downstream::new(peer, true);
                        connection::serve(stream, downstream, inner, settings, stop).await;
                    }
                });
            }
        }
    })
    .await;
}

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
