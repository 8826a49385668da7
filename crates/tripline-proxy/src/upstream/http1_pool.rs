//! The proxy's own keep-alive pool for cleartext HTTP/1.1 endpoints.
//!
//! hyper-util's pooled client costs ~10 000 instructions per request
//! on the proxy's path (callgrind, `benches/proxy/instructions.sh`): its
//! pool key `(Scheme, Authority)` is SipHashed a byte at a time on every
//! checkout and return, its response future is boxed, and every answer
//! whose body is still streaming spawns a task that waits for the
//! connection to be ready again before returning it. This pool sends on
//! hyper's own `conn::http1` connections — or, for a request without a
//! body, exchanges it in the request's own task on a bare connection
//! (`super::h1`: no connection task, channel or dispatcher) — and keeps
//! both kinds per thread:
//!
//! * idle connections are kept per thread (a slot per proxy thread), so a
//!   per-core runtime reuses connections its own thread drives and never
//!   wakes another core to forward a request;
//! * a connection goes back to its idle list when the answer's body ends
//!   (`body::Tracked`, the proxy's end-of-body hook, does it), not from a
//!   task of its own; only when hyper has not yet re-armed the connection
//!   (its request body still streaming) does a small task wait for it, as
//!   hyper-util always does;
//! * the idle lists are keyed by the endpoint's `host:port` with foldhash,
//!   and the key an answer needs to come back is a shared `Arc<str>`;
//! * a request that hyper hands back unsent (the pooled connection closed
//!   under it) goes out on the next idle connection or a new one, as
//!   hyper-util's `retry_canceled_requests` does; a request that was
//!   written is never sent twice here (retries are the route's to decide).
//!
//! Idle connections are closed after the pool's idle timeout (checked
//! when their list is used, and by a sweeper task), and at most
//! `max_idle` are kept per endpoint and thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::UpstreamError;
use super::h1::{self, RawConn, RequestHead};
use crate::http::body::{ProxyBody, Tracked};

/// Idle lists per thread slot: a power of two, so more proxy threads than
/// slots share slots (correct, only less local).
const SLOTS: usize = 64;

type IdleLists = HashMap<Arc<str>, IdleList, foldhash::fast::RandomState>;

/// One endpoint's idle connections on one thread slot, most recently
/// used last; `key` is the map's own key, handed to each answer.
struct IdleList {
    key: Arc<str>,
    /// hyper's connections (requests with a body).
    hyper: Vec<Idle<HyperConn>>,
    /// Bare connections (bodiless requests, [`h1`]).
    raw: Vec<Idle<RawConn>>,
}

impl IdleList {
    fn new(key: Arc<str>) -> Self {
        IdleList {
            key,
            hyper: Vec::new(),
            raw: Vec::new(),
        }
    }
}

/// A pooled connection of either kind.
trait Pooled {
    /// Whether the endpoint has not closed it.
    fn is_open(&self) -> bool;
    /// Whether it can take a request now.
    fn can_send(&self) -> bool;
    /// Its kind's idle list.
    fn list(idle: &mut IdleList) -> &mut Vec<Idle<Self>>
    where
        Self: Sized;
}

/// A hyper connection: the handle requests are sent on, and its driver
/// task. Dropping it ends the driver at once: a connection is only ever
/// dropped unusable (a try abandoned mid-request, an answer left unread)
/// or idle, and a driver left to itself would try to flush a request
/// whose endpoint stopped reading — forever, with both sockets and the
/// client's body held, since TCP never gives up on a closed window.
struct HyperConn {
    sender: SendRequest<ProxyBody>,
    /// `None` once the endpoint took the connection over (`101`): the
    /// driver then ends on its own, after handing the socket to the answer.
    driver: Option<tokio::task::AbortHandle>,
}

impl HyperConn {
    /// Lets the driver finish what it is doing: the endpoint switched
    /// protocols, and the driver hands the socket over to the answer's
    /// upgrade before it ends.
    fn taken_over(mut self) {
        self.driver = None;
    }
}

impl Drop for HyperConn {
    fn drop(&mut self) {
        if let Some(driver) = &self.driver {
            driver.abort();
        }
    }
}

impl Pooled for HyperConn {
    fn is_open(&self) -> bool {
        !self.sender.is_closed()
    }
    fn can_send(&self) -> bool {
        self.sender.is_ready()
    }
    fn list(idle: &mut IdleList) -> &mut Vec<Idle<Self>> {
        &mut idle.hyper
    }
}

impl Pooled for RawConn {
    fn is_open(&self) -> bool {
        RawConn::is_open(self)
    }
    fn can_send(&self) -> bool {
        true
    }
    fn list(idle: &mut IdleList) -> &mut Vec<Idle<Self>> {
        &mut idle.raw
    }
}

/// A cleartext HTTP/1.1 client with a per-thread keep-alive pool; clones
/// share the pool.
#[derive(Clone)]
pub(crate) struct Http1Pool {
    shared: Arc<Shared>,
}

struct Shared {
    connect_timeout: Duration,
    /// `TCP_USER_TIMEOUT` of every connection (`upstream_stall_timeout`).
    stall_timeout: Duration,
    idle_timeout: Duration,
    max_idle: usize,
    slots: Box<[Mutex<IdleLists>]>,
    /// Whether a sweeper task runs for this pool.
    sweeping: AtomicBool,
}

struct Idle<C> {
    conn: C,
    since: Instant,
}

impl Http1Pool {
    /// A pool that connects within `connect_timeout`, gives a connection
    /// up once what it sent stays unacknowledged for `stall_timeout`, and
    /// keeps at most `max_idle` connections per endpoint and thread, each
    /// for at most `idle_timeout`.
    pub(crate) fn new(
        connect_timeout: Duration,
        stall_timeout: Duration,
        idle_timeout: Duration,
        max_idle: usize,
    ) -> Self {
        Http1Pool {
            shared: Arc::new(Shared {
                connect_timeout,
                stall_timeout,
                idle_timeout,
                max_idle,
                slots: (0..SLOTS).map(|_| Mutex::default()).collect(),
                sweeping: AtomicBool::new(false),
            }),
        }
    }

    /// Sends `request` (origin-form URI, `Host` set) to `address`
    /// (`host:port`) on an idle connection of this thread, or a new one.
    pub(crate) async fn send(
        &self,
        address: &str,
        request: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, UpstreamError> {
        if h1::is_bodiless(request.method(), request.body()) {
            return self
                .send_bodiless(address, &RequestHead::of(&request))
                .await;
        }
        self.send_on_hyper(address, request).await
    }

    /// [`Http1Pool::send`] on one of hyper's connections, whatever the
    /// request: what an upgrade needs (the bare connection cannot be taken
    /// over by the endpoint).
    pub(crate) async fn send_on_hyper(
        &self,
        address: &str,
        mut request: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, UpstreamError> {
        let slot = thread_slot();
        while let Some((mut conn, key)) = self.shared.checkout::<HyperConn>(slot, address) {
            match conn.sender.try_send_request(request).await {
                Ok(response) => return Ok(self.answer(response, conn, slot, key)),
                Err(mut unsent) => match unsent.take_message() {
                    // The connection closed before the request was
                    // written: nothing reached the endpoint, try another.
                    Some(back) => request = back,
                    None => return Err(UpstreamError::other(unsent.into_error())),
                },
            }
        }
        let mut conn = self.connect(address).await?;
        let key = self.shared.key(slot, address);
        match conn.sender.try_send_request(request).await {
            Ok(response) => Ok(self.answer(response, conn, slot, key)),
            Err(failed) => Err(UpstreamError::other(failed.into_error())),
        }
    }

    /// [`Http1Pool::send`] for a request without a body, on a bare
    /// connection driven by this task ([`h1`]).
    pub(crate) async fn send_bodiless(
        &self,
        address: &str,
        request: &RequestHead<'_>,
    ) -> Result<Response<ProxyBody>, UpstreamError> {
        let slot = thread_slot();
        while let Some((conn, key)) = self.shared.checkout::<RawConn>(slot, address) {
            match h1::send(conn, request, self.home(slot, key)).await {
                Ok(response) => return Ok(response),
                // The pooled connection broke under the write: the
                // endpoint has no whole request to act on, try another.
                Err(h1::Failed::Unsent(_)) => {}
                Err(failed) => return Err(UpstreamError::other(failed.into_error())),
            }
        }
        let conn = RawConn::new(self.open(address).await?);
        let key = self.shared.key(slot, address);
        h1::send(conn, request, self.home(slot, key))
            .await
            .map_err(|failed| UpstreamError::other(failed.into_error()))
    }

    /// Where a bare connection goes once its answer has been read whole.
    fn home(
        &self,
        slot: usize,
        key: Arc<str>,
    ) -> impl FnOnce(RawConn) + Send + Sync + Unpin + 'static {
        let pool = self.clone();
        move |conn| pool.checkin(slot, key, conn)
    }

    /// Opens a TCP connection to `address` within the connect timeout.
    async fn open(&self, address: &str) -> Result<TcpStream, UpstreamError> {
        let stream = tokio::time::timeout(self.shared.connect_timeout, open(address))
            .await
            .map_err(|_| {
                UpstreamError::connect(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to {address} timed out"),
                ))
            })?
            .map_err(UpstreamError::connect)?;
        let _ = stream.set_nodelay(true);
        // Best effort, as hyper-util's connector does: a kernel without the
        // option still serves, bounded by the try's own timeouts.
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        let _ =
            socket2::SockRef::from(&stream).set_tcp_user_timeout(Some(self.shared.stall_timeout));
        Ok(stream)
    }

    /// Opens a connection to `address` and spawns its hyper driver on
    /// this runtime.
    async fn connect(&self, address: &str) -> Result<HyperConn, UpstreamError> {
        let stream = self.open(address).await?;
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(UpstreamError::connect)?;
        let driver = tokio::spawn(async move {
            if let Err(e) = connection.with_upgrades().await {
                tracing::debug!(error = %e, "tripline-proxy: upstream connection ended");
            }
        });
        Ok(HyperConn {
            sender,
            driver: Some(driver.abort_handle()),
        })
    }

    /// The endpoint's answer, its body wrapped to bring the connection
    /// back to the pool when it ends well; failed or dropped early, the
    /// connection is closed with it (hyper cannot reuse a connection with
    /// an unread answer on it).
    fn answer(
        &self,
        response: Response<Incoming>,
        conn: HyperConn,
        slot: usize,
        key: Arc<str>,
    ) -> Response<ProxyBody> {
        if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
            conn.taken_over();
            return response.map(crate::http::body::boxed);
        }
        let back = Return {
            pool: self.clone(),
            conn,
            slot,
            key,
        };
        let (parts, body) = response.into_parts();
        let body = Tracked::new(body, move |ended_well| {
            if ended_well {
                back.give();
            }
        });
        Response::from_parts(parts, body.boxed())
    }

    /// Takes `conn` back as idle, if it can send again and there is room.
    fn checkin<C: Pooled>(&self, slot: usize, key: Arc<str>, conn: C) {
        let shared = &self.shared;
        let now = Instant::now();
        {
            let mut lists = shared.lock(slot);
            let list = C::list(
                lists
                    .entry(key.clone())
                    .or_insert_with(|| IdleList::new(key)),
            );
            // Stale entries are dropped by checkouts and the sweeper; a full
            // list is cleaned here first, so that dead connections (an
            // endpoint closing idle ones sooner than we do) never take the
            // place of a live one. Not on every return: with 64 idle
            // connections that scan would cost more than the pool saves.
            if list.len() >= shared.max_idle {
                list.retain(|idle| shared.usable(idle, now));
            }
            if list.len() >= shared.max_idle {
                return; // dropping the connection closes it
            }
            list.push(Idle { conn, since: now });
        }
        if !shared.sweeping.swap(true, Ordering::AcqRel) {
            tokio::spawn(sweep(Arc::downgrade(shared), shared.idle_timeout));
        }
    }
}

impl Shared {
    fn lock(&self, slot: usize) -> MutexGuard<'_, IdleLists> {
        self.slots[slot]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an idle connection may still be used at `now`.
    fn usable<C: Pooled>(&self, idle: &Idle<C>, now: Instant) -> bool {
        now.saturating_duration_since(idle.since) < self.idle_timeout && idle.conn.is_open()
    }

    /// The most recently used idle connection to `address` that can take
    /// a request now, and the shared key to return it under. Stale ones
    /// met on the way are dropped (closed).
    fn checkout<C: Pooled>(&self, slot: usize, address: &str) -> Option<(C, Arc<str>)> {
        let mut lists = self.lock(slot);
        let list = lists.get_mut(address)?;
        let idle = C::list(list);
        if idle.is_empty() {
            return None;
        }
        let now = Instant::now();
        while let Some(idle) = C::list(list).pop() {
            if self.usable(&idle, now) && idle.conn.can_send() {
                return Some((idle.conn, list.key.clone()));
            }
        }
        None
    }

    /// The shared key for `address` in `slot` (allocated once per
    /// endpoint and thread).
    fn key(&self, slot: usize, address: &str) -> Arc<str> {
        let mut lists = self.lock(slot);
        if let Some(list) = lists.get(address) {
            return list.key.clone();
        }
        let key: Arc<str> = Arc::from(address);
        lists.insert(key.clone(), IdleList::new(key.clone()));
        key
    }
}

/// Closes idle connections past the idle timeout that no request came to
/// take; ends with the pool.
async fn sweep(shared: Weak<Shared>, idle_timeout: Duration) {
    let period = (idle_timeout / 2).clamp(Duration::from_millis(100), Duration::from_secs(30));
    loop {
        tokio::time::sleep(period).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let now = Instant::now();
        for slot in 0..shared.slots.len() {
            // An emptied list goes too: DNS re-resolution moves endpoints
            // to new addresses, and the old ones' keys must not pile up.
            shared.lock(slot).retain(|_, list| {
                list.hyper.retain(|idle| shared.usable(idle, now));
                list.raw.retain(|idle| shared.usable(idle, now));
                !list.hyper.is_empty() || !list.raw.is_empty()
            });
        }
    }
}

/// Resolves and connects to `address`: an `ip:port` directly, a name by
/// the system resolver (each address in turn).
async fn open(address: &str) -> std::io::Result<TcpStream> {
    match address.parse::<std::net::SocketAddr>() {
        Ok(addr) => TcpStream::connect(addr).await,
        Err(_) => TcpStream::connect(address).await,
    }
}

/// This thread's idle-list slot, assigned on first use.
fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
    }
    SLOT.with(|slot| *slot)
}

/// A connection on its way back to its idle list.
struct Return {
    pool: Http1Pool,
    conn: HyperConn,
    slot: usize,
    key: Arc<str>,
}

impl Return {
    /// Back to the pool now if hyper is ready for the next request on it,
    /// else once it is (a request body may still be streaming up).
    fn give(self) {
        let Return {
            pool,
            mut conn,
            slot,
            key,
        } = self;
        if conn.sender.is_ready() {
            pool.checkin(slot, key, conn);
        } else if !conn.sender.is_closed() {
            tokio::spawn(async move {
                if conn.sender.ready().await.is_ok() {
                    pool.checkin(slot, key, conn);
                }
            });
        }
    }
}
