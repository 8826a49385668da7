//! Service discovery for tripline's proxy: a cluster's endpoints followed
//! in ZooKeeper, where Apache Dubbo registers its providers.
//!
//! Dubbo providers register under `/dubbo/<interface>/providers`, one
//! ephemeral child per provider and protocol, each named by its URL
//! percent-encoded ([`ProviderUrl`]). [`spawn`] starts a task that reads
//! (or [`watcher()`] hands over the future, for a caller's own task set)
//! that folder with a ZooKeeper watch, reads it again on every change, and
//! publishes the usable providers ([`ProviderSet`]: the chosen protocol,
//! enabled, with Dubbo's weight) on a `tokio::sync::watch` channel, with a
//! [`Status`] beside it (session connected, lost since when, or expired;
//! children skipped; reconnects).
//!
//! The proxy applies each set as it applies a DNS answer: through
//! `Cluster::set_endpoints` with [`ProviderSet::endpoint_configs`], whose
//! ids are the providers' `host:port`, so providers that stay keep their
//! breaker and outlier state, new ones start fresh, and vanished ones
//! leave (after the optional grace period).
//!
//! # What never empties a cluster
//! A lost or expired ZooKeeper session keeps the last set (the status
//! says so) while the watcher reconnects with back-off; a child that is not
//! a provider URL is skipped and counted; a read with no usable provider
//! keeps the last set (as Dubbo 3's empty protection does). See
//! `membership` and `watcher` for the rules.
//!
//! # Why `zookeeper-client`
//! Of the async Rust ZooKeeper clients on crates.io, `zookeeper-client`
//! is the one maintained today (releases through 2025 and 2026), async
//! from the ground up, and tells a session's states as ZooKeeper's own
//! Java client does (`Disconnected`, `SyncConnected`, `Expired`, `Closed`):
//! the watcher needs exactly that to keep the last set while disconnected
//! and to make a new session after an expiry. It reconnects across an
//! ensemble within the session and restores watches itself. The others:
//! `zookeeper-async` is a port of the thread-based `zookeeper` crate (a
//! watcher thread, callbacks), and `tokio-zookeeper` has no release since
//! 2024 and leaves reconnection to the caller.
//!
//! ```no_run
//! # async fn example() -> Result<(), tripline_discovery::ConfigError> {
//! use tripline_discovery::{ZooKeeperDiscovery, spawn};
//!
//! let config = ZooKeeperDiscovery::new("127.0.0.1:2181", "/dubbo/com.example.OrderService/providers");
//! let discovery = spawn(&config)?;
//! let mut providers = discovery.providers();
//! while providers.changed().await.is_ok() {
//!     let endpoints = providers.borrow_and_update().endpoint_configs();
//!     // cluster.set_endpoints(endpoints)
//!     # drop(endpoints);
//! }
//! # Ok(())
//! # }
//! ```

mod config;
mod membership;
mod provider;
mod set;
mod watcher;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::watch;
use tokio::task::AbortHandle;

pub use config::{ConfigError, Protocol, ZooKeeperDiscovery};
pub use membership::Read;
pub use provider::{DEFAULT_WEIGHT, ParseError, ProviderUrl, decode, encode};
pub use set::{Provider, ProviderSet, Session, Status};

/// A watcher's providers and status. Dropped with every receiver it gave
/// out, the watcher stops and closes its ZooKeeper session; one from
/// [`spawn`] also stops its task at once when dropped.
#[derive(Debug)]
pub struct Discovery {
    providers: watch::Receiver<ProviderSet>,
    status: watch::Receiver<Status>,
    task: Option<AbortHandle>,
}

/// The watcher itself, to run where the caller keeps its background work
/// (a `JoinSet` the proxy aborts when it drains): it ends once no
/// receiver of the set is left.
pub struct Watcher(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Future for Watcher {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// Validates `config` and returns the watcher to run and its outputs.
///
/// The set is empty until the first read; the status says `Connecting`
/// until the first session.
pub fn watcher(config: &ZooKeeperDiscovery) -> Result<(Discovery, Watcher), ConfigError> {
    config.validate()?;
    let (providers, providers_rx) = watch::channel(ProviderSet::default());
    let (status, status_rx) = watch::channel(Status::default());
    let out = watcher::Outputs { providers, status };
    let discovery = Discovery {
        providers: providers_rx,
        status: status_rx,
        task: None,
    };
    Ok((
        discovery,
        Watcher(Box::pin(watcher::run(config.clone(), out))),
    ))
}

/// Validates `config` and starts following it on the current tokio
/// runtime (it panics outside one, as `tokio::spawn` does).
pub fn spawn(config: &ZooKeeperDiscovery) -> Result<Discovery, ConfigError> {
    let (mut discovery, watcher) = watcher(config)?;
    discovery.task = Some(tokio::spawn(watcher).abort_handle());
    Ok(discovery)
}

impl Discovery {
    /// The providers: a receiver that sees each new set (`changed()`).
    pub fn providers(&self) -> watch::Receiver<ProviderSet> {
        self.providers.clone()
    }

    /// How the watcher is doing: a receiver that sees each change.
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
