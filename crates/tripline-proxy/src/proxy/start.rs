//! Starting and stopping: binding the listeners, serving them with the
//! data side, starting the control side's tasks (admin listener, DNS
//! refreshes, the config source) on the first runtime, and draining.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::config::{ConfigError, ProxyConfig};
use crate::control::reload::ReloadReport;
use crate::http::drain::{CUT, DRAINING, RUNNING, reached, shutdown_signal};
use crate::proxy::Proxy;
use crate::proxy::runtime::Binding;

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
        let (data, control) = (&self.inner.data, &self.inner.control);
        let config = &self.inner.config;
        let access_log = match binding.is_first() {
            true => data.access_log.start_writer().await?,
            false => None,
        };
        let (stop, stop_rx) = watch::channel(RUNNING);
        let (alive, connections) = mpsc::channel(1);
        let mut addrs = Vec::new();
        let mut accept = JoinSet::new();
        for (i, section) in config.listeners.iter().enumerate() {
            let listener = binding.bind(i, &section.address).await?;
            addrs.push(listener.local_addr()?);
            let tls = self.inner.acceptors.get(i).cloned().flatten();
            let (section, settings, data) = (section.clone(), config.proxy.clone(), data.clone());
            let (stop, alive) = (stop_rx.clone(), alive.clone());
            accept.spawn(async move {
                crate::data::server::serve_listener(
                    listener, &section, &settings, data, tls, stop, alive,
                )
                .await;
            });
        }
        let mut admin = None;
        if binding.is_first() {
            // Not a task of `accept`, which ends when the drain begins:
            // tries that the default limit ends may still be in flight.
            // It ends at the cut, when no request is left to end.
            let coarse = data.coarse.clone();
            let mut until_cut = stop_rx.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = coarse.run() => {}
                    () = reached(&mut until_cut, CUT) => {}
                }
            });
            crate::control::dns::spawn_refreshers(control, &mut accept);
            crate::control::discovery::spawn_watches(control, &mut accept);
            crate::control::health::spawn_checkers(control, &mut accept);
            crate::control::config_source::spawn(control, &mut accept)?;
        }
        if let Some(section) = config.admin.as_ref().filter(|_| binding.is_first()) {
            let listener = TcpListener::bind(section.address.as_str())
                .await
                .map_err(|e| crate::proxy::runtime::address_error(&section.address, e))?;
            admin = Some(listener.local_addr()?);
            accept.spawn(crate::control::admin::accept_loop(
                listener,
                control.clone(),
                config.proxy.header_read_timeout,
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
            drain_timeout: config.proxy.drain_timeout,
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

impl Running {
    /// Replaces the routes and clusters with those of `config`, keeping
    /// breaker state where identity did not change; see
    /// [`Proxy::reload`].
    pub fn reload(&self, config: ProxyConfig) -> Result<ReloadReport, ConfigError> {
        self.proxy.reload(config)
    }
}
