//! The proxy under drill: reached over HTTP, or built in this process
//! over in-process upstreams (for CI, where no proxy is running).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::time::Instant;
use tripline::breaker::Subscription;
use tripline_proxy::config::{AdminSection, ListenerSection, ProxyConfig};
use tripline_proxy::{Proxy, Running};

use crate::DrillError;
use crate::admin::Admin;
use crate::events::{TransitionLog, subscribe_sse};
use crate::file::{Drill, Target};
use crate::upstream::Upstreams;

/// A target ready for load: where to send it, its admin API, and the
/// transitions it reports.
pub(crate) struct Live {
    pub(crate) url: String,
    pub(crate) admin: Admin,
    pub(crate) transitions: TransitionLog,
    /// In-process upstream names to the addresses the proxy knows them by.
    pub(crate) upstreams: BTreeMap<String, String>,
    local: Option<Local>,
}

/// What an in-process target keeps alive.
struct Local {
    running: Running,
    _subscriptions: Vec<Subscription>,
    _upstreams: Upstreams,
}

impl Live {
    /// Connects to (or builds) the drill's target; the transitions count
    /// from `start`.
    pub(crate) async fn open(drill: &Drill, start: Instant) -> Result<Live, DrillError> {
        match &drill.target {
            Target::Remote { admin, url } => {
                let admin_api = Admin::new(admin.clone());
                admin_api.check().await?;
                let transitions = subscribe_sse(admin, start).await?;
                Ok(Live {
                    url: url.clone(),
                    admin: admin_api,
                    transitions,
                    upstreams: BTreeMap::new(),
                    local: None,
                })
            }
            Target::InProcess {
                config,
                upstreams,
                seed,
            } => {
                // Collected: a closure held across the await would make the
                // drill's future non-Send.
                let specs: Vec<_> = upstreams
                    .iter()
                    .map(|(n, s)| (n.clone(), s.latency))
                    .collect();
                let (servers, addrs) = Upstreams::start(specs)
                    .await
                    .map_err(|e| DrillError::Target(format!("cannot start upstreams: {e}")))?;
                let mut text = config.clone();
                for (name, addr) in &addrs {
                    text = text.replace(&format!("${{{name}}}"), &addr.to_string());
                }
                let mut config = ProxyConfig::from_toml(&text).map_err(|e| DrillError::File {
                    file: "target.proxy".to_owned(),
                    message: e.to_string(),
                })?;
                // Loopback, free ports: a drill in CI never collides.
                config.listeners = vec![ListenerSection::new("127.0.0.1:0")];
                // On loopback, so no token: the drill itself is the only
                // client of the admin API it starts.
                config.admin = Some(AdminSection {
                    address: "127.0.0.1:0".to_owned(),
                    token: None,
                    token_file: None,
                });
                let proxy = Proxy::builder(config.clone())
                    .fault_seed(*seed)
                    .build()
                    .map_err(|e| DrillError::File {
                        file: "target.proxy".to_owned(),
                        message: e.to_string(),
                    })?;
                let transitions = TransitionLog::new(start);
                let subscriptions = subscribe_all(&proxy, &config, &transitions);
                let running = proxy
                    .start()
                    .await
                    .map_err(|e| DrillError::Target(format!("cannot start the proxy: {e}")))?;
                let url = format!("http://{}", running.local_addrs()[0]);
                let admin_addr: Option<SocketAddr> = running.admin_addr();
                let admin = Admin::new(format!(
                    "http://{}",
                    admin_addr.ok_or_else(|| DrillError::Target("no admin listener".to_owned()))?
                ));
                Ok(Live {
                    url,
                    admin,
                    transitions,
                    upstreams: addrs.into_iter().map(|(n, a)| (n, a.to_string())).collect(),
                    local: Some(Local {
                        running,
                        _subscriptions: subscriptions,
                        _upstreams: servers,
                    }),
                })
            }
        }
    }

    /// Drains an in-process proxy; a remote one is left running.
    pub(crate) async fn close(self) {
        if let Some(local) = self.local {
            local.running.shutdown().await;
        }
    }
}

/// Subscribes to every route breaker and every endpoint breaker.
fn subscribe_all(proxy: &Proxy, config: &ProxyConfig, log: &TransitionLog) -> Vec<Subscription> {
    let mut subs = Vec::new();
    for route in &config.routes {
        if let Some(b) = proxy.route_breaker(&route.name) {
            subs.push(b.subscribe(log.breaker_listener()));
        }
    }
    for name in config.clusters.keys() {
        if let Some(cluster) = proxy.cluster(name) {
            for endpoint in cluster.endpoints() {
                subs.push(endpoint.breaker().subscribe(log.breaker_listener()));
            }
        }
    }
    subs
}
