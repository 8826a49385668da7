//! Serving one downstream connection, and parking it while it is idle.
//!
//! hyper keeps an HTTP/1 connection's read buffer (8 KiB and up), its
//! write buffer, a cached header map and its header-read timer allocated
//! between requests: 17–20 KiB per idle keep-alive connection, so 10 000
//! idle clients cost ~200 MiB (a few KiB each parked: benches/README.md).
//! HAProxy and nginx give their buffers
//! back while a connection waits; this module does the same on hyper's
//! public API.
//!
//! The connection's first bytes say its protocol (the HTTP/2 preface, or
//! anything else: HTTP/1). HTTP/2 is served by hyper to its end, unparked
//! (its frames multiplex streams, so there is no "between requests" to
//! park in), and closed with GOAWAY once it has had no open stream for
//! the keep-alive timeout ([`no_stream_for`]). HTTP/1 is served in a
//! loop: bodiless HTTP/1.1 requests by [`h1_fast`] (without hyper, until
//! the connection is idle or a request needs hyper), the others by
//! [`hyper::server::conn::http1`]:
//!
//! 1. A hyper connection serves requests (pipelined ones included) while
//!    the connection's [`Activity`] is watched: bytes read from the
//!    client, requests started, responses finished (a response is
//!    finished when hyper drops its body, after the last byte). Each time
//!    the task is polled the counts are compared with the last seen, and
//!    the clock read only when they moved; one [grace](PARK_GRACE) after
//!    the last move, with no response unfinished, the connection is idle.
//! 2. Then `graceful_shutdown` closes hyper's connection at once (it is
//!    between messages) without shutting the socket down, and `into_parts`
//!    returns the socket and any bytes hyper had read but not parsed; every
//!    hyper buffer is freed with the connection.
//! 3. Parked, the task holds the socket, the smuggling guard's state and
//!    the service, and waits for the client's next byte (peeked, not read),
//!    the keep-alive timeout counted from the start of the idleness, or the
//!    drain — whichever comes first. A byte starts a new hyper connection
//!    on the same socket; the timeout or the drain closes it.
//!
//! Only a connection that has answered a request is parked (hyper closes
//! at once only between requests). Bytes hyper had read but not parsed —
//! the start of a request sent slowly — are replayed to a new hyper
//! connection at once, unparked: hyper's header read timeout ran from the
//! start of the idleness and runs again from the new connection, so a
//! slow head gets at most twice `header_read_timeout`. A request that
//! says `Connection: close`, or is HTTP/1.0, marks the connection as
//! never parked: hyper closes it after the answer (possibly one delimited
//! by the close itself).
//!
//! The request path pays three relaxed atomic adds on counters of its own
//! connection, a header lookup and a clock read; nothing is allocated per
//! request, and the grace timer wakes a busy connection once per grace. The
//! smuggling guard ([`Guarded`]) sits under the replaying wrapper, so each
//! byte hyper reads is scanned once; [`h1_fast`] reads past it and has it
//! watch, from their head on, the bytes it hands to hyper.
//!
//! An upgrade the route allows (WebSocket) is served by hyper: when the
//! endpoint answers `101`, the request leaves the endpoint's side of the
//! switched connection in the [`Activity`]; hyper writes the `101`, lets
//! go of the socket, and [`tunnel`] relays bytes both ways, unwatched and
//! never parked, until either side closes, nothing has moved for the
//! tunnel idle timeout, or the drain is cut.

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::Service;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::{ListenerSection, ProxySection};
use crate::data::Ctx;
use crate::data::forward::{Downstream, handle};
use crate::data::server::h1_fast::{self, FastEnd};
use crate::data::server::h2_resets::StreamResets;
use crate::data::server::linger::linger;
use crate::data::smuggling::Guarded;
use crate::http::body::{BoxError, Inspect, Inspected, ProxyBody, ProxyFrames};
use crate::http::drain::{CUT, DRAINING, LevelMoves, reached};

/// How long an HTTP/1 connection stays idle in hyper before it is parked:
/// short enough that idle clients hold no buffers for long (while 10 000
/// clients connect, those of the last grace are still unparked), long
/// enough that a client sending its next request soon after the last
/// answer (the busy case) never pays the park and the new connection.
pub(crate) const PARK_GRACE: Duration = Duration::from_millis(100);

/// The HTTP/2 connection preface; anything else is HTTP/1.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How one listener's connections are served, built once per listener.
pub(crate) struct Settings {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
    /// The listener's header read timeout (also bounds the TLS handshake
    /// and the protocol sniff).
    pub(crate) header_read_timeout: Duration,
    /// How long an idle connection is kept: an HTTP/1 one between
    /// requests, an HTTP/2 one without an open stream.
    keep_alive_timeout: Duration,
    /// `[proxy] max_header_bytes`: the longest request head read.
    pub(crate) max_header_bytes: usize,
    /// `[proxy] client_body_timeout`: how long a request body may send
    /// nothing.
    client_body_timeout: Duration,
}

impl Settings {
    /// The settings of `listener`, its timeouts defaulting to `proxy`'s.
    pub(crate) fn new(listener: &ListenerSection, proxy: &ProxySection) -> Settings {
        let header_read_timeout = listener.header_read_timeout(proxy);
        let mut http1 = http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout);
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        // HTTP/2's header list is held to the same limit as an HTTP/1 head
        // (hyper's own default is 16 MiB).
        let header_list = u32::try_from(proxy.max_header_bytes).unwrap_or(u32::MAX);
        http2
            .timer(TokioTimer::new())
            .max_header_list_size(header_list);
        Settings {
            http1,
            http2,
            header_read_timeout,
            keep_alive_timeout: listener.keep_alive_timeout(proxy),
            max_header_bytes: proxy.max_header_bytes,
            client_body_timeout: proxy.client_body_timeout,
        }
    }
}

/// A socket whose next byte can be waited for without reading it: what a
/// parked connection waits on.
pub(crate) trait Park: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Resolves `true` once the client has sent a byte (left unread), and
    /// `false` when it has closed its side or the socket failed.
    fn client_sent(&self) -> impl Future<Output = bool> + Send + '_;
}

impl Park for TcpStream {
    async fn client_sent(&self) -> bool {
        peeked(self).await
    }
}

/// TLS: hyper went idle only once rustls had no plaintext left and the
/// socket had nothing more to read, so the next TLS record the client
/// sends is exactly what wakes it (rustls keeps any partial record).
impl Park for tokio_rustls::server::TlsStream<TcpStream> {
    async fn client_sent(&self) -> bool {
        peeked(self.get_ref().0).await
    }
}

async fn peeked(socket: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(socket.peek(&mut byte).await, Ok(n) if n > 0)
}

/// What a connection has done, sampled to tell when it went idle: counts
/// only, bumped with relaxed adds by the connection's own requests.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// Reads that returned bytes.
    reads: AtomicUsize,
    /// Requests handed to the service.
    started: AtomicUsize,
    /// Responses finished (their body dropped) or abandoned.
    finished: AtomicUsize,
    /// Set by a request after which hyper closes the connection itself.
    never_park: AtomicBool,
    /// The endpoint's side of a connection it took over (`101`), left by
    /// the request for the connection to relay once hyper has written
    /// the `101` and let go of the socket.
    taken_over: Mutex<Option<OnUpgrade>>,
}

impl Activity {
    /// Leaves the endpoint's side of a connection it took over, for the
    /// connection to relay to once hyper lets go of the socket.
    fn take_over(&self, endpoint: OnUpgrade) {
        self.never_park.store(true, Ordering::Relaxed);
        *self
            .taken_over
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(endpoint);
    }

    /// The endpoint's side of a connection it took over, if it did.
    fn taken_over(&self) -> Option<OnUpgrade> {
        self.taken_over
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn sample(&self) -> (usize, usize, usize) {
        (
            self.reads.load(Ordering::Relaxed),
            self.started.load(Ordering::Relaxed),
            self.finished.load(Ordering::Relaxed),
        )
    }
}

/// Counts a response as finished when dropped: kept in the service's
/// future, then in the response body, so that a dropped future counts too.
pub(crate) struct Finished(Arc<Activity>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::Relaxed);
    }
}

/// A response body that says when it is done (dropped by hyper after its
/// last frame, or on a broken connection): the body with a [`Finished`]
/// riding along, which passes every poll through.
pub(crate) type Answer = Inspected<ProxyBody, Finished>;

impl Inspect<ProxyBody> for Finished {
    type Error = BoxError;

    fn inspect(&mut self, _: &ProxyBody, polled: ProxyFrames, _: &mut Context<'_>) -> ProxyFrames {
        polled
    }
}

/// The future answering one request (boxed, see [`service`]).
type Answering = Pin<Box<dyn Future<Output = Result<Response<Answer>, Infallible>> + Send>>;

/// The service of one connection: every request goes to [`handle`],
/// its body (if it has one) given up after `body_timeout` without a byte.
/// (A head the smuggling guard refuses never reaches it.)
fn service(
    inner: Arc<Ctx>,
    peer: Downstream,
    body_timeout: Duration,
    activity: Arc<Activity>,
    resets: Option<Arc<StreamResets>>,
) -> impl Service<Request<Incoming>, Response = Response<Answer>, Error = Infallible, Future = Answering>
+ Send
+ Unpin
+ 'static {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let inner = inner.clone();
        let peer = peer.clone();
        activity.started.fetch_add(1, Ordering::Relaxed);
        let finished = Finished(activity.clone());
        let unanswered = resets.as_ref().map(|r| r.watch());
        if closes(&req) {
            activity.never_park.store(true, Ordering::Relaxed);
        }
        // Boxed: hyper keeps a slot the size of this future in every
        // connection; a pointer keeps serving connections small (see
        // benches/README.md, HTTP proxy) for one allocation per request.
        Box::pin(async move {
            let client = peer.peer;
            let http1 = req.version() < http::Version::HTTP_2;
            let req = req.map(|body| {
                crate::http::body::give_up_when_idle(
                    crate::http::body::boxed(body),
                    body_timeout,
                    client,
                )
            });
            let mut response = handle(&inner, req, peer).await;
            if response.status() == http::StatusCode::SWITCHING_PROTOCOLS
                && let Some(endpoint) = response.extensions_mut().remove::<OnUpgrade>()
            {
                finished.0.take_over(endpoint);
            }
            if let Some(stream) = unanswered {
                stream.answered();
            }
            // The operator's drain: the client is told to reconnect
            // (elsewhere) after this answer, and hyper closes after it.
            if http1 && inner.drain.is_on() {
                close_after(&mut response);
            }
            Ok(response.map(|body| Inspected::wrap(body, finished)))
        }) as Answering
    })
}

/// Marks an HTTP/1 answer as the connection's last (`connection: close`).
pub(super) fn close_after<B>(response: &mut Response<B>) {
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
}

/// Whether hyper will close the connection after answering `req`.
fn closes(req: &Request<Incoming>) -> bool {
    req.version() != http::Version::HTTP_11 && req.version() != http::Version::HTTP_2
        || req
            .headers()
            .get(http::header::CONNECTION)
            .is_some_and(|v| {
                v.as_bytes()
                    .split(|b| *b == b',')
                    .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"close"))
            })
}

/// Serves one accepted connection (after the TLS handshake, if any) to
/// its end: sniffs the protocol, then serves HTTP/2 as hyper does, or
/// HTTP/1 with parking.
pub(crate) async fn serve<S: Park>(
    stream: S,
    peer: Downstream,
    inner: Arc<Ctx>,
    settings: Arc<Settings>,
    mut stop: watch::Receiver<u8>,
) {
    let mut io = Guarded::new(stream, settings.max_header_bytes);
    let sniffed = tokio::select! {
        // Unwatched: the bytes sniffed go to the bodiless loop, which
        // parses them, or (HTTP/2) turn the watch off below.
        sniffed = tokio::time::timeout(settings.header_read_timeout, sniff(io.unwatched())) => sniffed,
        _ = reached(&mut stop, DRAINING) => return,
    };
    let Ok(Ok(Some((h2, first)))) = sniffed else {
        return;
    };
    let activity = Arc::new(Activity::default());
    let gauge = inner.metrics.parked.clone();
    // The service takes its own; the bodiless loop borrows these.
    let (fast_inner, fast_peer) = (inner.clone(), peer.clone());
    if h2 {
        // The preface: HTTP/2 frames its messages itself, nothing to watch.
        io.watch_from_head(&first);
        let resets = Arc::new(StreamResets::default());
        let service = service(
            inner,
            peer,
            settings.client_body_timeout,
            activity.clone(),
            Some(resets.clone()),
        );
        let io = TokioIo::new(Replay::new(first, io, activity.clone()));
        // Boxed, like HTTP/1's: the task is as large as its largest
        // state, and a parked HTTP/1 connection must not pay for HTTP/2's.
        let mut conn = Box::pin(settings.http2.serve_connection(io, service));
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = resets.exceeded() => return closed_for_resets(&fast_inner, &fast_peer, &resets),
            _ = no_stream_for(&activity, settings.keep_alive_timeout) => {
                conn.as_mut().graceful_shutdown();
            }
            _ = reached(&mut stop, DRAINING) => conn.as_mut().graceful_shutdown(),
        }
        // GOAWAY sent: the streams still open finish, up to the cut.
        tokio::select! {
            _ = conn.as_mut() => {}
            _ = resets.exceeded() => closed_for_resets(&fast_inner, &fast_peer, &resets),
            _ = reached(&mut stop, CUT) => {}
        }
    } else {
        let service = service(
            inner,
            peer,
            settings.client_body_timeout,
            activity.clone(),
            None,
        );
        let http1 = Http1 {
            settings: &settings,
            activity: &activity,
            gauge: &gauge,
            inner: &fast_inner,
            peer: &fast_peer,
        };
        serve_http1(io, first, service, &http1, &mut stop).await;
    }
}

/// Says why an HTTP/2 connection is being closed without GOAWAY (as
/// Envoy aborts it): its client cancelled too many streams early
/// ([`h2_resets`](super::h2_resets)). The caller drops the connection.
fn closed_for_resets(inner: &Ctx, peer: &Downstream, resets: &StreamResets) {
    inner.metrics.premature_reset_closes.inc();
    let (premature, closed) = resets.counts();
    tracing::warn!(
        client = %peer.peer,
        premature,
        closed,
        "tripline-proxy: closing an HTTP/2 connection whose client cancelled {premature} of {closed} streams before their answer (rapid reset)"
    );
}

/// Returns once an HTTP/2 connection has had no open stream for
/// `timeout`: its keep-alive timeout, as an idle HTTP/1 connection's.
/// Streams, not bytes, are what count: a client's PINGs keep the
/// connection alive at the TCP level, but they do not keep it in use
/// (Envoy's `idle_timeout` counts the same way). Sampled four times per
/// timeout, so the close comes between one and 1.25 timeouts after the
/// last stream ended; an idle connection costs a timer wake-up per
/// quarter timeout.
async fn no_stream_for(activity: &Activity, timeout: Duration) {
    let streams = || {
        let (_, started, finished) = activity.sample();
        (started, finished)
    };
    unchanged_for(timeout, streams, |(started, finished)| started == finished).await;
}

/// Returns once `sample` has given the same value, one that is `idle`,
/// for `timeout`. Sampled four times per timeout: the end comes between
/// one and 1.25 timeouts after the last change, for a timer wake-up per
/// quarter timeout.
async fn unchanged_for<T: PartialEq>(
    timeout: Duration,
    sample: impl Fn() -> T,
    idle: impl Fn(&T) -> bool,
) {
    let step = timeout / 4;
    let mut seen = sample();
    let mut quiet = Duration::ZERO;
    loop {
        tokio::time::sleep(step).await;
        let now = sample();
        if now == seen && idle(&now) {
            quiet += step;
            if quiet >= timeout {
                return;
            }
        } else {
            seen = now;
            quiet = Duration::ZERO;
        }
    }
}

/// Reads until the bytes part from the HTTP/2 preface (HTTP/1) or match
/// all of it (HTTP/2); `None` when the client closes first. The bytes
/// read are returned, to be replayed.
async fn sniff<S: AsyncRead + Unpin>(io: &mut S) -> io::Result<Option<(bool, Bytes)>> {
    let mut buf = [0u8; PREFACE.len()];
    let mut n = 0;
    loop {
        let read = io.read(&mut buf[n..]).await?;
        if read == 0 {
            return Ok(None);
        }
        n += read;
        if buf[..n] != PREFACE[..n] {
            return Ok(Some((false, Bytes::copy_from_slice(&buf[..n]))));
        }
        if n == PREFACE.len() {
            return Ok(Some((true, Bytes::copy_from_slice(&buf))));
        }
    }
}

/// How a hyper HTTP/1 connection ended.
#[derive(Clone, Copy)]
enum Ended {
    /// Idle since the instant given, and closed by the park: park it.
    Idle(Instant),
    /// Closed by hyper after its last answer, or by the drain: close it
    /// so the client can read that answer ([`linger`]).
    Closed,
    /// Failed (a malformed request hyper answered 400 itself, `parse`;
    /// a timeout; a reset): close it as [`Ended::Closed`], so the client
    /// can read the 400.
    Failed { parse: bool },
    /// Cut at the end of the drain: drop it.
    Dropped,
}

/// What an HTTP/1 connection is served with.
struct Http1<'a> {
    settings: &'a Settings,
    activity: &'a Arc<Activity>,
    gauge: &'a Gauge,
    inner: &'a Arc<Ctx>,
    peer: &'a Downstream,
}

/// The HTTP/1 loop: bodiless requests served by [`h1_fast`] until the
/// connection is idle or a request needs hyper; then a hyper connection
/// until idle; parked, woken by the client's next byte, and so on.
async fn serve_http1<S, Svc>(
    mut io: Guarded<S>,
    mut first: Bytes,
    mut service: Svc,
    http1: &Http1<'_>,
    stop: &mut watch::Receiver<u8>,
) where
    S: Park,
    Svc: Service<Request<Incoming>, Response = Response<Answer>, Error = Infallible>
        + Unpin
        + Send
        + 'static,
    Svc::Future: Unpin + Send + 'static,
{
    let Http1 {
        settings,
        activity,
        gauge,
        inner,
        peer,
    } = *http1;
    loop {
        // Boxed, like hyper's connection below: a parked task keeps a
        // pointer's room for it.
        let with = h1_fast::Serving {
            inner,
            peer,
            settings,
            stop,
        };
        match Box::pin(h1_fast::serve(&mut io, first, &with)).await {
            FastEnd::Delegate(bytes) => first = bytes,
            FastEnd::Idle(since) => {
                first = Bytes::new();
                if !park(&io, since + settings.keep_alive_timeout, gauge, stop).await {
                    return;
                }
                continue;
            }
            // Unwatched: a refused head's connection discards the rest.
            FastEnd::Closed => return linger(io.unwatched(), stop).await,
            FastEnd::Dropped => return,
        }
        let replay = Replay::new(first, io, activity.clone());
        // Boxed: the parked task keeps a pointer's room for it, not the
        // whole connection state.
        let mut conn = Box::new(
            settings
                .http1
                .serve_connection(TokioIo::new(replay), service),
        );
        // Boxed too: its timers and select are not needed while parked.
        let ended = Box::pin(drive(&mut conn, activity, stop)).await;
        if let Ended::Closed = ended
            && let Some(endpoint) = activity.taken_over()
        {
            let io = conn.into_parts();
            return Box::pin(tunnel(io.io, io.read_buf, endpoint, inner, stop)).await;
        }
        let since = match ended {
            Ended::Dropped => return,
            Ended::Idle(since) => Some(since),
            Ended::Closed | Ended::Failed { .. } => None,
        };
        let http1::Parts {
            io: replay,
            read_buf,
            service: kept,
            ..
        } = conn.into_parts();
        let mut replay = replay.into_inner();
        // A head the guard refused: hyper has answered what came before
        // it and gone idle (or failed on its start); the refusal is the
        // connection's last answer.
        if let Some(malformed) = replay.inner.refused() {
            let client = replay.inner.unwatched();
            if !super::refuse::refuse(client, malformed, inner, peer).await {
                return;
            }
            return linger(client, stop).await;
        }
        let Some(since) = since else {
            if let Ended::Failed { parse: true } = ended {
                super::refuse::count_refused_by_hyper(inner, peer);
            }
            return linger(&mut replay, stop).await;
        };
        service = kept;
        let (guarded, unread) = replay.into_parts();
        io = guarded;
        // Moved, so that an empty buffer (hyper's read buffer, kilobytes
        // of capacity) is freed here, not held while parked.
        first = unparsed(read_buf, unread);
        if !first.is_empty() {
            // The start of a request sent slowly: serve it on at once.
            continue;
        }
        let deadline = since + settings.keep_alive_timeout;
        if !park(&io, deadline, gauge, stop).await {
            return;
        }
    }
}

/// Relays bytes both ways between the client and the endpoint that took
/// its connection over (`101`), until either closes, nothing has moved
/// either way for `[proxy] tunnel_idle_timeout`, or the drain is cut.
/// What the client sent after its request and hyper had already read —
/// often its first frame — goes to the endpoint first. Bytes are relayed
/// as they are: the smuggling guard watches HTTP/1 heads, not the
/// protocol the two sides switched to.
async fn tunnel<S: Park>(
    io: TokioIo<Replay<Guarded<S>>>,
    read_buf: Bytes,
    endpoint: OnUpgrade,
    inner: &Ctx,
    stop: &mut watch::Receiver<u8>,
) {
    let (guarded, unread) = io.into_inner().into_parts();
    let client = guarded.into_inner();
    let early = unparsed(read_buf, unread);
    let moved = Arc::new(Activity::default());
    let relay = async {
        // hyper's upstream driver hands the socket over as soon as it has
        // read the `101`, which the client has just been sent.
        let mut endpoint = TokioIo::new(endpoint.await?);
        endpoint.write_all(&early).await?;
        // Every byte relayed is read from one side: counting the reads of
        // both is counting progress.
        let mut client = Replay::new(Bytes::new(), client, moved.clone());
        let mut endpoint = Replay::new(Bytes::new(), endpoint, moved.clone());
        tokio::io::copy_bidirectional(&mut client, &mut endpoint).await?;
        Ok::<_, BoxError>(())
    };
    let gauge = &inner.metrics.tunnels;
    gauge.inc();
    tokio::select! {
        relayed = relay => {
            if let Err(e) = relayed {
                tracing::debug!(error = %e, "tripline-proxy: upgraded connection ended");
            }
        }
        _ = nothing_read_for(&moved, inner.settings.tunnel_idle_timeout) => {}
        _ = reached(stop, CUT) => {}
    }
    gauge.dec();
}

/// Returns once `moved` has counted no read for `timeout` (the close
/// comes between one and 1.25 timeouts after the last byte relayed).
async fn nothing_read_for(moved: &Activity, timeout: Duration) {
    unchanged_for(timeout, || moved.sample().0, |_| true).await;
}

/// What a closed hyper connection had read but not parsed (`read_buf`),
/// then what it had not even read (`unread`); empty buffers are dropped.
fn unparsed(read_buf: Bytes, unread: Bytes) -> Bytes {
    match (read_buf.is_empty(), unread.is_empty()) {
        (true, true) => Bytes::new(),
        (false, true) => read_buf,
        (true, false) => unread,
        (false, false) => {
            let mut both = BytesMut::with_capacity(read_buf.len() + unread.len());
            both.extend_from_slice(&read_buf);
            both.extend_from_slice(&unread);
            both.freeze()
        }
    }
}

/// Serves `conn` until it ends; closes it for [`Ended::Idle`] once it
/// has been idle a grace after answering at least one request (hyper
/// closes at once only between requests: before its first, it would
/// instead answer the next one with `Connection: close`).
///
/// Each time the task is polled the activity counts are compared with
/// the last seen (three relaxed loads), and the clock is read only when
/// they moved; the grace timer is re-armed only when it fires early, so
/// a busy connection costs one timer wake-up per grace, not per request.
async fn drive<I, Svc>(
    conn: &mut http1::Connection<I, Svc>,
    activity: &Activity,
    stop: &mut watch::Receiver<u8>,
) -> Ended
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    Svc: Service<Request<Incoming>, Response = Response<Answer>, Error = Infallible> + Unpin,
    Svc::Future: Unpin,
{
    let mut tick = std::pin::pin!(tokio::time::sleep(PARK_GRACE));
    let mut cut_rx = stop.clone();
    let mut moves = LevelMoves::new(stop);
    let mut cut = std::pin::pin!(reached(&mut cut_rx, CUT));
    let mut drain = std::pin::pin!(reached(stop, DRAINING));
    let mut seen = activity.sample();
    let mut moved = Instant::now();
    let first_request = seen.1;
    let mut parking: Option<Instant> = None;
    let mut draining = false;
    poll_fn(|cx| {
        if moves.moved() {
            if cut.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ended::Dropped);
            }
            if !draining && drain.as_mut().poll(cx).is_ready() {
                draining = true;
                Pin::new(&mut *conn).graceful_shutdown();
            }
        }
        if let Poll::Ready(done) = conn.poll_without_shutdown(cx) {
            return Poll::Ready(match (done, parking) {
                (Err(e), _) => {
                    tracing::debug!(error = %e, "connection ended");
                    Ended::Failed {
                        parse: e.is_parse() || e.is_parse_too_large(),
                    }
                }
                (Ok(()), Some(since)) if !draining => Ended::Idle(since),
                (Ok(()), _) => Ended::Closed,
            });
        }
        if parking.is_some() || draining {
            return Poll::Pending;
        }
        let now = activity.sample();
        if now != seen {
            seen = now;
            moved = Instant::now();
        }
        while tick.as_mut().poll(cx).is_ready() {
            let (_, started, finished) = seen;
            let idle = started == finished
                && started != first_request
                && !activity.never_park.load(Ordering::Relaxed);
            let due = moved + PARK_GRACE;
            let now = Instant::now();
            if !idle {
                tick.as_mut().reset(now + PARK_GRACE);
            } else if now >= due {
                parking = Some(moved);
                Pin::new(&mut *conn).graceful_shutdown();
                // hyper closes on its next poll.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            } else {
                tick.as_mut().reset(due);
            }
        }
        Poll::Pending
    })
    .await
}

/// Holds the bare socket until the client sends (`true`: serve it again)
/// or closes, the `deadline` passes, or the drain starts (`false`).
async fn park<S: Park>(
    io: &Guarded<S>,
    deadline: Instant,
    gauge: &Gauge,
    stop: &mut watch::Receiver<u8>,
) -> bool {
    if Instant::now() >= deadline {
        return false;
    }
    struct Parked<'a>(&'a Gauge);
    impl Drop for Parked<'_> {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    gauge.inc();
    let _parked = Parked(gauge);
    tokio::select! {
        sent = io.get_ref().client_sent() => sent,
        _ = tokio::time::sleep_until(deadline) => false,
        _ = reached(stop, DRAINING) => false,
    }
}

/// The connection as hyper reads it: bytes already read (the protocol
/// sniff, or what a parked hyper connection had not parsed) first, then
/// the socket; every read that returns bytes is counted.
pub(crate) struct Replay<S> {
    first: Bytes,
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Replay<S> {
    fn new(first: Bytes, inner: S, activity: Arc<Activity>) -> Self {
        Replay {
            first,
            inner,
            activity,
        }
    }

    /// The socket, and the bytes not yet replayed.
    fn into_parts(self) -> (S, Bytes) {
        (self.inner, self.first)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.first.is_empty() {
            let n = this.first.len().min(buf.remaining());
            buf.put_slice(&this.first[..n]);
            this.first.advance(n);
            this.activity.reads.fetch_add(1, Ordering::Relaxed);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.reads.fetch_add(1, Ordering::Relaxed);
        }
        polled
    }
}

crate::http::io_wrap::write_through!(Replay);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every connection's task is as large as the largest state of its
    /// future, for the connection's whole life: a buffer or a large
    /// future held inline in one state (the lingering close's read
    /// buffer once was, 4 KiB) is paid by every idle connection. The
    /// states that are large are boxed; this keeps it so.
    #[tokio::test]
    async fn a_connections_task_stays_small() {
        let text = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9\"]\n";
        let config = crate::config::ProxyConfig::from_toml(text).unwrap();
        let settings = Arc::new(Settings::new(&config.listeners[0], &config.proxy));
        let proxy = crate::Proxy::builder(config).build().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = listener.local_addr().unwrap();
        let stream = TcpStream::connect(peer).await.unwrap();
        let (_stop, stop) = watch::channel(0);
        let connection = serve(
            stream,
            Downstream::new(peer, false),
            proxy.inner.data.clone(),
            settings,
            stop,
        );
        let size = std::mem::size_of_val(&connection);
        // 2 016 bytes in release and 2 048 in debug builds today; 6 024 with
        // the read buffer inline.
        assert!(size <= 3072, "{size} bytes a connection task");
    }

    #[tokio::test(start_paused = true)]
    async fn a_relay_that_moves_is_not_idle_and_one_that_stops_is_after_its_timeout() {
        let moved = Arc::new(Activity::default());
        let timeout = Duration::from_millis(400);
        let start = Instant::now();
        let bytes = moved.clone();
        // A byte every 150 ms for 1.5 s, then nothing.
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(150)).await;
                bytes.reads.fetch_add(1, Ordering::Relaxed);
            }
        });
        nothing_read_for(&moved, timeout).await;
        let idle_after = start.elapsed();
        // The last byte came at 1.5 s; idle from one to 1.25 timeouts later.
        assert!(idle_after >= Duration::from_millis(1_900), "{idle_after:?}");
        assert!(idle_after <= Duration::from_millis(2_000), "{idle_after:?}");
    }
}
