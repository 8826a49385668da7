//! What the watcher publishes: the providers now, and how it is going.

use tokio::time::Instant;
use tripline::cluster::EndpointConfig;

/// One provider the cluster should call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provider {
    /// `host:port` (`[v6]:port`): also the endpoint's id, so an address
    /// that stays keeps its breaker and outlier state.
    pub address: String,
    /// Dubbo's weight as registered (100 when the URL does not say).
    pub weight: u32,
    /// Gone from ZooKeeper and within its grace period: still called, but
    /// leaving unless it registers again.
    pub leaving: bool,
}

/// The providers to call, sorted by address, each address once.
///
/// ```
/// use tripline_discovery::{Provider, ProviderSet};
///
/// let set = ProviderSet::new(vec![
///     Provider { address: "10.0.0.6:50051".into(), weight: 100, leaving: false },
///     Provider { address: "10.0.0.5:50051".into(), weight: 200, leaving: false },
/// ]);
/// let endpoints = set.endpoint_configs();
/// assert_eq!(endpoints[0].id, "10.0.0.5:50051");
/// assert_eq!(endpoints[0].weight, 200);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderSet {
    providers: Vec<Provider>,
}

impl ProviderSet {
    /// Sorts `providers` by address; a repeated address keeps its first.
    pub fn new(mut providers: Vec<Provider>) -> Self {
        providers.sort_by(|a, b| a.address.cmp(&b.address));
        providers.dedup_by(|a, b| a.address == b.address);
        ProviderSet { providers }
    }

    /// The providers, sorted by address.
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// Whether there is none (only before the first usable read).
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// The provider at `address`.
    pub fn get(&self, address: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.address == address)
    }

    /// The endpoints for `Cluster::set_endpoints`: id and address are the
    /// provider's `host:port` (so endpoints that stay keep their state);
    /// the weight is Dubbo's, brought into tripline's 1..=10 000 (a Dubbo
    /// weight of 0 becomes 1: tripline has no zero weight, and Dubbo's
    /// own balancers still call a weight-0 provider when all are 0).
    pub fn endpoint_configs(&self) -> Vec<EndpointConfig> {
        self.providers
            .iter()
            .map(|p| {
                EndpointConfig::new(p.address.clone(), p.address.clone())
                    .weight(p.weight.clamp(1, EndpointConfig::MAX_WEIGHT))
            })
            .collect()
    }
}

/// The ZooKeeper session as the watcher sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Session {
    /// Not yet connected once.
    Connecting,
    /// Connected; the set follows ZooKeeper.
    Connected,
    /// The connection is lost (or no server answers) since then; the last
    /// set stays while the client reconnects.
    Lost {
        /// When the connection was lost.
        since: Instant,
    },
    /// The ensemble expired the session (its watches are gone); the last
    /// set stays while a new session is made, with back-off.
    Expired {
        /// When the expiry was seen.
        since: Instant,
    },
}

impl Session {
    /// Whether the set is following ZooKeeper now.
    pub fn is_connected(self) -> bool {
        self == Session::Connected
    }
}

/// How discovery is going: for the proxy's metric, log line and flag.
///
/// ```
/// use tripline_discovery::{Session, Status};
///
/// let status = Status::default();
/// assert_eq!(status.session, Session::Connecting);
/// assert!(!status.session.is_connected());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The session now.
    pub session: Session,
    /// Reads of the folder so far (each child change makes one).
    pub reads: u64,
    /// Sessions made after the first (after an expiry or a failed connect).
    pub reconnects: u64,
    /// Children of the last read that were not provider URLs.
    pub skipped: usize,
    /// Such children over all reads.
    pub skipped_total: u64,
    /// Enabled providers of the chosen protocol in the last read: 0 with
    /// `other_protocols` set means the path offers nothing callable.
    pub usable: usize,
    /// Disabled providers of the chosen protocol in the last read.
    pub disabled: usize,
    /// Providers of other protocols in the last read, by scheme: when the
    /// set is empty, this says why (only `dubbo://` providers, say).
    pub other_protocols: Vec<(String, usize)>,
    /// The last read had no usable provider and the last set was kept.
    pub kept_last_set: bool,
    /// The last error from ZooKeeper, if the last attempt failed.
    pub last_error: Option<String>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            session: Session::Connecting,
            reads: 0,
            reconnects: 0,
            skipped: 0,
            skipped_total: 0,
            usable: 0,
            disabled: 0,
            other_protocols: Vec::new(),
            kept_last_set: false,
            last_error: None,
        }
    }
}
