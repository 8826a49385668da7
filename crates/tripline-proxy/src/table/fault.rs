//! Fault injection for drills, modelled on Envoy's fault filter: per try,
//! at the upstream side, a route's tries can be answered with a made-up
//! status or held before they are sent.
//!
//! An abort answers the try *as if the endpoint had answered it*: the
//! route's failure classification, the endpoint's breaker, outlier
//! detection, retries and the route's breaker all see it, which is what a
//! drill needs to watch them trip. A delay waits before sending and counts
//! against the per-try timeout and the deadline. A refusal fails the try
//! as a connect failure, nothing sent; a reset cuts the endpoint's answer
//! half-way through its first bytes, so the try fails as a connection
//! reset mid-answer would; a hang never sends, so only the try's time
//! limit ends it. Answers shaped by a fault carry `x-tripline-fault:
//! abort`, `delay` or `reset`.
//!
//! Faults come from the route's `fault` section and from the admin
//! listener (`/api/faults`, each with a TTL on the proxy's clock). A try
//! takes the first fault whose scope (endpoint, header) matches it,
//! runtime ones first. With no fault anywhere a try pays two atomic loads.

mod dice;
mod runtime;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use http::request::Parts;
use http::{HeaderName, HeaderValue, Response};
use http_body_util::BodyExt;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tripline::Clock;
use tripline::clock::SharedClock;

use crate::config::{FaultSection, ProxyConfig, ShareSection};
use crate::http::body::{BoxError, Inspect, Inspected, ProxyBody, ProxyFrames, full};
use crate::upstream::UpstreamError;
pub(crate) use dice::Dice;
pub use runtime::MAX_TTL;
pub(crate) use runtime::RuntimeFault;

/// The header marking an answer a fault shaped.
pub const FAULT_HEADER: HeaderName = HeaderName::from_static("x-tripline-fault");

type Labels = Vec<(&'static str, String)>;

/// Every fault of a proxy: from the config (replaced on reload) and
/// switched on at run time.
pub(crate) struct Faults {
    configured: ArcSwap<Vec<(String, FaultSection)>>,
    runtime: ArcSwap<Vec<RuntimeFault>>,
    next_id: AtomicU64,
    dice: Dice,
    clock: SharedClock,
    injected: Family<Labels, Counter>,
}

/// What a fault does to one try.
#[derive(Debug, Default)]
pub(crate) struct Injected {
    delay: Option<Duration>,
    abort: Option<u16>,
    refuse: bool,
    reset: bool,
    hang: bool,
}

impl Faults {
    pub(crate) fn new(config: &ProxyConfig, clock: SharedClock, dice: Dice) -> Faults {
        let faults = Faults {
            configured: ArcSwap::from_pointee(Vec::new()),
            runtime: ArcSwap::from_pointee(Vec::new()),
            next_id: AtomicU64::new(1),
            dice,
            clock,
            injected: Family::default(),
        };
        faults.configure(config);
        faults
    }

    /// Takes the faults of `config`'s routes (at build and on reload).
    pub(crate) fn configure(&self, config: &ProxyConfig) {
        let configured = config
            .routes
            .iter()
            .filter_map(|r| Some((r.name.clone(), r.fault.clone()?)))
            .collect();
        self.configured.store(Arc::new(configured));
    }

    /// Registers `tripline_proxy_faults_injected_total{route,kind}`.
    pub(crate) fn register(&self, registry: &mut Registry, prefix: &str) {
        registry.register(
            format!("{prefix}_proxy_faults_injected"),
            "Tries a fault hit, by route and kind (abort, delay, refuse, reset, hang)",
            self.injected.clone(),
        );
    }

    /// Decides what happens to a try of `route` for `parts`, sent to the
    /// endpoint at `address`; counts what it injects.
    pub(crate) fn roll(&self, route: &str, parts: &Parts, address: &str) -> Injected {
        let configured = self.configured.load();
        let runtime = self.runtime.load();
        if configured.is_empty() && runtime.is_empty() {
            return Injected::default();
        }
        let now = self.clock.now();
        let applies = |f: &FaultSection| {
            f.endpoint.as_deref().is_none_or(|e| e == address)
                && f.header
                    .as_deref()
                    .is_none_or(|h| parts.headers.contains_key(h))
        };
        let live = runtime
            .iter()
            .filter(|f| f.route == route && f.live(now))
            .map(|f| &f.fault);
        let written = configured
            .iter()
            .filter(|(r, _)| r == route)
            .map(|(_, f)| f);
        let Some(fault) = live.chain(written).find(|f| applies(f)) else {
            return Injected::default();
        };
        let mut injected = Injected::default();
        if let Some(d) = &fault.delay
            && self.dice.hits(d.percent)
        {
            injected.delay = Some(d.duration);
            self.count(route, "delay");
        }
        if let Some(a) = &fault.abort
            && self.dice.hits(a.percent)
        {
            injected.abort = Some(a.status);
            self.count(route, "abort");
        }
        let roll = |share: &Option<ShareSection>, kind: &'static str| {
            let hit = share.as_ref().is_some_and(|s| self.dice.hits(s.percent));
            if hit {
                self.count(route, kind);
            }
            hit
        };
        injected.refuse = roll(&fault.refuse, "refuse");
        injected.reset = roll(&fault.reset, "reset");
        injected.hang = roll(&fault.hang, "hang");
        injected
    }

    fn count(&self, route: &str, kind: &str) {
        let labels = vec![("route", route.to_owned()), ("kind", kind.to_owned())];
        self.injected.get_or_create(&labels).inc();
    }

    /// Switches `fault` on for `route` for `ttl`; its id.
    pub(crate) fn add(&self, route: String, fault: FaultSection, ttl: Duration) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let now = self.clock.now();
        let added = RuntimeFault {
            id,
            route,
            fault,
            expires: now.saturating_add(ttl),
        };
        self.runtime.rcu(|list| {
            let mut list: Vec<RuntimeFault> =
                list.iter().filter(|f| f.live(now)).cloned().collect();
            list.push(added.clone());
            list
        });
        id
    }

    /// The runtime faults still live, as JSON.
    pub(crate) fn list_json(&self) -> serde_json::Value {
        let now = self.clock.now();
        let list = self.runtime.load();
        let listed: Vec<_> = list
            .iter()
            .filter(|f| f.live(now))
            .map(|f| f.listed(now))
            .collect();
        serde_json::json!({ "faults": listed })
    }

    /// Switches off the runtime fault `id` (or every one with `None`);
    /// how many were live.
    pub(crate) fn remove(&self, id: Option<u64>) -> usize {
        let now = self.clock.now();
        let before = self.runtime.rcu(|list| {
            list.iter()
                .filter(|f| f.live(now) && id.is_some_and(|id| f.id != id))
                .cloned()
                .collect::<Vec<_>>()
        });
        let was = before.iter().filter(|f| f.live(now)).count();
        was.saturating_sub(self.runtime.load().len())
    }
}

impl Injected {
    /// Waits the injected delay, if any (inside the try's time limit).
    pub(crate) async fn delay(&self) {
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
    }

    /// The injected connection refusal, if the try is refused: it fails
    /// as a connect failure, nothing sent.
    pub(crate) fn refused(&self) -> Option<UpstreamError> {
        self.refuse.then(|| {
            UpstreamError::refused_by_fault(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "fault injected: connection refused",
            ))
        })
    }

    /// Never completes when the try hangs (the try's time limit ends it);
    /// at once otherwise.
    pub(crate) async fn hang(&self) {
        if self.hang {
            std::future::pending::<()>().await;
        }
    }

    /// The endpoint's answer, cut after its first bytes when the try is
    /// reset: its body ends in an error, as a connection reset mid-answer
    /// would end it.
    pub(crate) fn cut(&self, response: Response<ProxyBody>) -> Response<ProxyBody> {
        if !self.reset {
            return response;
        }
        let (mut parts, body) = response.into_parts();
        parts
            .headers
            .insert(FAULT_HEADER, HeaderValue::from_static("reset"));
        let cut = Inspected::wrap(body, CutAfterFirstFrame(false));
        Response::from_parts(parts, BodyExt::boxed(cut))
    }

    /// The injected answer, if the try is aborted.
    pub(crate) fn abort(&self) -> Option<Response<ProxyBody>> {
        let status = http::StatusCode::from_u16(self.abort?).ok()?;
        let mut response = Response::new(full("fault injected: abort\n"));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(FAULT_HEADER, HeaderValue::from_static("abort"));
        Some(response)
    }

    /// Marks an endpoint's answer to a delayed try.
    pub(crate) fn mark<B>(&self, response: &mut Response<B>) {
        if self.delay.is_some() && !response.headers().contains_key(FAULT_HEADER) {
            response
                .headers_mut()
                .insert(FAULT_HEADER, HeaderValue::from_static("delay"));
        }
    }
}

/// Passes the first half of the first data frame, then ends the body with
/// an error (never at its end before that error: a reader stops at an
/// end). Half, so that an answer with a declared length arrives short of
/// it, as an answer reset mid-way does.
struct CutAfterFirstFrame(bool);

impl Inspect<ProxyBody> for CutAfterFirstFrame {
    type Error = BoxError;

    fn inspect(&mut self, _: &ProxyBody, polled: ProxyFrames, _: &mut Context<'_>) -> ProxyFrames {
        let reset = || {
            Poll::Ready(Some(Err(
                "fault injected: connection reset mid-answer".into()
            )))
        };
        if self.0 {
            return reset();
        }
        match polled {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    self.0 = true;
                    let half = data.slice(..data.len() / 2);
                    Poll::Ready(Some(Ok(http_body::Frame::data(half))))
                }
                // Trailers before any byte: the answer ends here, cut.
                Err(_) => reset(),
            },
            // An answer that ended before any byte is cut at its end.
            Poll::Ready(None) => reset(),
            other => other,
        }
    }

    fn is_end_stream(&self, _: &ProxyBody) -> bool {
        false
    }
}
