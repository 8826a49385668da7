//! The proxy's own keep-alive pool for cleartext HTTP/1.1 endpoints.
//!
//! hyper-util's pooled client costs ~10 000 instructions per request
//! on the proxy's path (callgrind, `benches/proxy/instructions.sh`): its
//! pool key `(Scheme, Authority)` is SipHashed a byte at a time on every
//! checkout and return, its response future is boxed, and every answer
//! whose body is still streaming spawns a task that waits for the
//! connection to be ready again before returning it. This pool sends on
//! hyper's own `conn::http1` connections and keeps them per thread:
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
use crate::body::{ProxyBody, Tracked};

/// Idle lists per thread slot: a power of two, so more proxy threads than
/// slots share slots (correct, only less local).
const SLOTS: usize = 64;

type IdleLists = HashMap<Arc<str>, IdleList, foldhash::fast::RandomState>;

/// One endpoint's idle connections on one thread slot, most recently
/// used last; `key` is the map's own key, handed to each answer.
struct IdleList {
    key: Arc<str>,
    idle: Vec<Idle>,
}

/// A cleartext HTTP/1.1 client with a per-thread keep-alive pool; clones
/// share the pool.
#[derive(Clone)]
pub(crate) struct Http1Pool {
    shared: Arc<Shared>,
}

struct Shared {
    connect_timeout: Duration,
    idle_timeout: Duration,
    max_idle: usize,
    slots: Box<[Mutex<IdleLists>]>,
    /// Whether a sweeper task runs for this pool.
    sweeping: AtomicBool,
}

struct Idle {
    sender: SendRequest<ProxyBody>,
    since: Instant,
}

impl Http1Pool {
    /// A pool that connects within `connect_timeout` and keeps at most
    /// `max_idle` connections per endpoint and thread, each for at most
    /// `idle_timeout`.
    pub(crate) fn new(connect_timeout: Duration, idle_timeout: Duration, max_idle: usize) -> Self {
        Http1Pool {
            shared: Arc::new(Shared {
                connect_timeout,
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
        mut request: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, UpstreamError> {
        let slot = thread_slot();
        while let Some((mut sender, key)) = self.shared.checkout(slot, address) {
            match sender.try_send_request(request).await {
                Ok(response) => return Ok(self.answer(response, sender, slot, key)),
                Err(mut unsent) => match unsent.take_message() {
                    // The connection closed before the request was
                    // written: nothing reached the endpoint, try another.
                    Some(back) => request = back,
                    None => return Err(UpstreamError::other(unsent.into_error())),
                },
            }
        }
        let mut sender = self.connect(address).await?;
        let key = self.shared.key(slot, address);
        match sender.try_send_request(request).await {
            Ok(response) => Ok(self.answer(response, sender, slot, key)),
            Err(failed) => Err(UpstreamError::other(failed.into_error())),
        }
    }

    /// Opens a connection to `address` and spawns its driver on this runtime.
    async fn connect(&self, address: &str) -> Result<SendRequest<ProxyBody>, UpstreamError> {
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
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(UpstreamError::connect)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "tripline-proxy: upstream connection ended");
            }
        });
        Ok(sender)
    }

    /// The endpoint's answer, its body wrapped to bring the connection
    /// back to the pool when it ends well; failed or dropped early, the
    /// connection is closed with it (hyper cannot reuse a connection with
    /// an unread answer on it).
    fn answer(
        &self,
        response: Response<Incoming>,
        sender: SendRequest<ProxyBody>,
        slot: usize,
        key: Arc<str>,
    ) -> Response<ProxyBody> {
        let back = Return {
            pool: self.clone(),
            sender,
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

    /// Takes `sender` back as idle, if it can send again and there is room.
    fn checkin(&self, slot: usize, key: Arc<str>, sender: SendRequest<ProxyBody>) {
        let shared = &self.shared;
        let now = Instant::now();
        {
            let mut lists = shared.lock(slot);
            let list = &mut lists
                .entry(key.clone())
                .or_insert_with(|| IdleList {
                    key,
                    idle: Vec::new(),
                })
                .idle;
            // Stale entries are dropped by checkouts and the sweeper; a full
            // list is cleaned here first, so that dead connections (an
            // endpoint closing idle ones sooner than we do) never take the
            // place of a live one. Not on every return: with 64 idle
            // connections that scan would cost more than the pool saves.
            if list.len() >= shared.max_idle {
                list.retain(|idle| shared.usable(idle, now));
            }
            if list.len() >= shared.max_idle {
                return; // dropping the sender closes the connection
            }
            list.push(Idle { sender, since: now });
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
    fn usable(&self, idle: &Idle, now: Instant) -> bool {
        !idle.sender.is_closed() && now.saturating_duration_since(idle.since) < self.idle_timeout
    }

    /// The most recently used idle connection to `address` that can take
    /// a request now, and the shared key to return it under. Stale ones
    /// met on the way are dropped (closed).
    fn checkout(&self, slot: usize, address: &str) -> Option<(SendRequest<ProxyBody>, Arc<str>)> {
        let mut lists = self.lock(slot);
        let list = lists.get_mut(address)?;
        let now = Instant::now();
        while let Some(idle) = list.idle.pop() {
            if self.usable(&idle, now) && idle.sender.is_ready() {
                return Some((idle.sender, list.key.clone()));
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
        let list = IdleList {
            key: key.clone(),
            idle: Vec::new(),
        };
        lists.insert(key.clone(), list);
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
                list.idle.retain(|idle| shared.usable(idle, now));
                !list.idle.is_empty()
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
    sender: SendRequest<ProxyBody>,
    slot: usize,
    key: Arc<str>,
}

impl Return {
    /// Back to the pool now if hyper is ready for the next request on it,
    /// else once it is (a request body may still be streaming up).
    fn give(self) {
        let Return {
            pool,
            mut sender,
            slot,
            key,
        } = self;
        if sender.is_ready() {
            pool.checkin(slot, key, sender);
        } else if !sender.is_closed() {
            tokio::spawn(async move {
                if sender.ready().await.is_ok() {
                    pool.checkin(slot, key, sender);
                }
            });
        }
    }
}
