//! Serving bodiless HTTP/1.1 requests without hyper's server.
//!
//! Why: under hyper's `conn::http1` server, its dispatcher, buffered I/O,
//! role parse and encode were ~13 000 of the proxy's ~30 000
//! instructions per request (callgrind, `benches/proxy/instructions.sh`),
//! and the proxy's user-space time per request is what separates it from
//! HAProxy on the same core (`benches/README.md`). A request without a
//! body — most proxied traffic — needs none of hyper's state machine:
//! its head is parsed with `httparse` (the parser hyper itself uses), the
//! answer's head is written with its first body bytes in one `write`, and
//! the next request is read on the same buffer.
//!
//! Everything else goes to hyper, with the bytes read so far: a request
//! with a body or `Expect`, a `Connection` other than `keep-alive`, an
//! `Upgrade` or `TE` header,
//! HTTP/1.0, a non-origin-form target — once the smuggling guard has
//! judged them: a malformed head, or one longer than `[proxy]
//! max_header_bytes`, is refused here ([`refuse`](super::refuse)), never
//! handed on. hyper then serves the
//! connection until it is idle and parked (`connection.rs`); the next
//! wake-up starts here again. The smuggling guard watches what hyper
//! reads; this loop reads past it (it parses every head itself and serves
//! none with `Transfer-Encoding` or a body, the guard's whole concern)
//! and has the guard watch what it hands to hyper, from that head on.
//!
//! What hyper's server did that this loop does the same way: the header
//! read timeout (from the head's first byte, or from the wake-up), the
//! `date` header on answers without one, framing by `content-length`
//! (declared, or the body's exact size) or else chunked, no body for
//! `HEAD`, 204 and 304, trailers dropped (the client did not ask for them:
//! a request with `TE` goes to hyper), a new request refused (the
//! connection closed unanswered) once the drain has begun, and an
//! in-flight one dropped at the cut.
//!
//! While a request waits for its answer the client's socket is watched
//! too, as hyper's dispatcher does: a client that closes (or resets)
//! has its request dropped — the try to the endpoint cancelled, its
//! connection closed, the breakers told nothing (a dropped permit is
//! neutral) — and both sockets are let go at once, instead of when the
//! endpoint answers, if ever. Bytes arriving meanwhile are a pipelined
//! request, kept in the buffer; the watch stops there. It is one read
//! poll per request (the read that finds nothing would otherwise come
//! after the answer), on the buffer the loop reads heads into.
//!
//! A head's buffer is given back once the head is parsed when a large
//! head had grown it past [`KEPT_CAPACITY`]: a connection keeps no more
//! than a small buffer between requests, whatever one head took.

use std::future::{Future, poll_fn};
use std::io::Write as _;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use http::header;
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body::Body;
use http_body_util::BodyExt;
use hyper::ext::ReasonPhrase;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::connection::{PARK_GRACE, Settings};
use crate::data::Ctx;
use crate::data::forward::{Downstream, handle_with_one_host};
use crate::data::smuggling::{Guarded, Malformed};
use crate::http::body::{ProxyBody, empty};
use crate::http::drain::{CUT, LevelMoves, reached};
use crate::http::h1_spans::{self, MAX_HEADERS, Span, Spans};

/// The most buffer a connection keeps between requests: a larger one,
/// grown for one large head, is replaced by a small one once that head
/// is parsed.
const KEPT_CAPACITY: usize = 16 * 1024;

/// A chunk of the answer's body up to this size is written together with
/// the head (one `write`); a larger one on its own, not copied.
const COALESCE: usize = 16 * 1024;

/// How the loop ended.
pub(super) enum FastEnd {
    /// Idle a grace after its last answer, nothing buffered: park it.
    Idle(Instant),
    /// A request this loop does not serve: hand the connection to hyper,
    /// these bytes first.
    Delegate(Bytes),
    /// The client closed between requests, the drain began, or a head
    /// timed out and was answered 408: shut the socket down.
    Closed,
    /// A failure (a timeout, a reset, a broken answer) or the cut: drop it.
    Dropped,
}

/// What a connection is served with: the proxy, its client, its
/// listener's settings and the proxy's shutdown level.
pub(super) struct Serving<'a> {
    pub(super) inner: &'a Arc<Ctx>,
    pub(super) peer: &'a Downstream,
    pub(super) settings: &'a Settings,
    pub(super) stop: &'a watch::Receiver<u8>,
}

/// Serves requests on `guarded` (after `first`, bytes already read)
/// until it is idle, must go to hyper, or ends.
pub(super) async fn serve<S>(guarded: &mut Guarded<S>, first: Bytes, with: &Serving<'_>) -> FastEnd
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let ended = serve_unwatched(guarded.unwatched(), first, with).await;
    let FastEnd::Delegate(bytes) = &ended else {
        return ended;
    };
    match guarded.watch_from_head(bytes) {
        None => ended,
        // Requests pipelined ahead of the refused head are served first:
        // hyper gets them, and the guard answers the refusal after.
        Some((_, ahead)) if ahead > 0 => FastEnd::Delegate(bytes.slice(..ahead)),
        Some((malformed, _)) => refused(guarded.unwatched(), malformed, with).await,
    }
}

/// Answers a refused head and ends the loop.
async fn refused<S: AsyncWrite + Unpin>(
    io: &mut S,
    malformed: Malformed,
    with: &Serving<'_>,
) -> FastEnd {
    match super::refuse::refuse(io, malformed, with.inner, with.peer).await {
        true => FastEnd::Closed,
        false => FastEnd::Dropped,
    }
}

/// [`serve`] on the bare connection: every head is parsed here, and
/// what goes to hyper is watched before hyper reads it.
async fn serve_unwatched<S>(io: &mut S, first: Bytes, with: &Serving<'_>) -> FastEnd
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Serving {
        inner,
        peer,
        settings,
        stop,
    } = *with;
    let mut cut_rx = stop.clone();
    let mut shutdown = Shutdown {
        moves: LevelMoves::new(stop),
        cut: std::pin::pin!(reached(&mut cut_rx, CUT)),
    };
    let mut buf = BytesMut::with_capacity(first.len().max(4096));
    buf.extend_from_slice(&first);
    drop(first);
    let mut out = Vec::with_capacity(1024);
    let mut spans = [Span::default(); MAX_HEADERS];
    let mut last = Instant::now();
    let mut answered = false;
    let mut grace = std::pin::pin!(tokio::time::sleep(PARK_GRACE));
    loop {
        let mut head_deadline = None;
        let request = loop {
            if !buf.is_empty() {
                let limit = settings.max_header_bytes;
                match parse(&mut buf, &mut spans, limit) {
                    Ok(request) => break request,
                    Err(Unparsed::Partial) if buf.len() <= limit => {}
                    // A head over the limit too: the guard refuses it.
                    Err(_) => return FastEnd::Delegate(buf.freeze()),
                }
            }
            if buf.capacity() - buf.len() < 1024 {
                grow(&mut buf);
            }
            let read = if buf.is_empty() && answered {
                // Between answers a connection waits a grace, then parks.
                // One timer serves the whole loop: armed at most a grace
                // early, re-armed when it fires before the connection has
                // been idle that long — a timer wake-up per grace on a
                // busy connection, not a timer set and cancelled per
                // request (~2 000 instructions).
                let wait = between_requests(io, &mut buf, grace.as_mut(), last);
                match shutdown.unless_cut(std::pin::pin!(wait)).await {
                    Some(Some(read)) => read,
                    Some(None) => return FastEnd::Idle(last),
                    None => return FastEnd::Dropped,
                }
            } else {
                // A head that has begun (or a woken connection's first)
                // has the header read timeout; past it the client is told
                // 408 and the connection closed.
                let deadline = *head_deadline
                    .get_or_insert_with(|| Instant::now() + settings.header_read_timeout);
                let read = tokio::time::timeout_at(deadline, io.read_buf(&mut buf));
                match shutdown.unless_cut(std::pin::pin!(read)).await {
                    Some(Ok(read)) => read,
                    Some(Err(_elapsed)) => return head_timed_out(io, &buf).await,
                    None => return FastEnd::Dropped,
                }
            };
            match read {
                Ok(0) if buf.is_empty() => return FastEnd::Closed,
                Ok(0) | Err(_) => return FastEnd::Dropped,
                Ok(_) => {}
            }
        };
        if shutdown.draining() {
            return FastEnd::Closed;
        }
        if buf.capacity() > KEPT_CAPACITY {
            buf = BytesMut::from(&buf[..]);
        }
        let no_body = request.method() == Method::HEAD;
        let handled = std::pin::pin!(handle_with_one_host(inner, request, peer.clone()));
        let watched = unless_client_gone(io, &mut buf, handled);
        let Some(Some(mut response)) = shutdown.unless_cut(std::pin::pin!(watched)).await else {
            // The cut, or the client gone: the request is dropped with
            // its try, and the connection with it.
            return FastEnd::Dropped;
        };
        // The operator's drain: this answer is the connection's last.
        let closing = inner.drain.is_on();
        if closing {
            super::connection::close_after(&mut response);
        }
        match shutdown
            .unless_cut(std::pin::pin!(write_answer(
                io, &mut out, response, no_body
            )))
            .await
        {
            Some(Ok(true)) if !closing => {}
            Some(Ok(_)) => return FastEnd::Closed,
            None | Some(Err(_)) => return FastEnd::Dropped,
        }
        answered = true;
        last = Instant::now();
    }
}

/// Runs `answer` to its end (`Some`) unless the client closes or resets
/// its connection first (`None`: `answer` is dropped by the caller,
/// cancelling the request). The client's socket is read into `buf` while
/// the answer is awaited, and only then: bytes that arrive are the next
/// request, pipelined, and end the watch (a client still sending is not
/// gone); when `buf` already holds some, there is nothing to watch.
async fn unless_client_gone<S, T>(
    io: &mut S,
    buf: &mut BytesMut,
    mut answer: Pin<&mut impl Future<Output = T>>,
) -> Option<T>
where
    S: AsyncRead + Unpin,
{
    let mut watching = buf.is_empty();
    let mut read = std::pin::pin!(io.read_buf(buf));
    poll_fn(|cx| {
        if let Poll::Ready(answered) = answer.as_mut().poll(cx) {
            return Poll::Ready(Some(answered));
        }
        if watching && let Poll::Ready(read) = read.as_mut().poll(cx) {
            match read {
                Ok(0) | Err(_) => return Poll::Ready(None),
                Ok(_) => watching = false,
            }
        }
        Poll::Pending
    })
    .await
}

/// The answer to a head that did not arrive within the header read
/// timeout (a slowloris client, or a stalled one).
const HEAD_TIMED_OUT: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";

/// How long the 408 may take to be written: the socket's send buffer
/// takes it at once unless the client stopped reading, which is no reason
/// to hold the connection.
const HEAD_TIMED_OUT_WRITE: std::time::Duration = std::time::Duration::from_secs(1);

/// Ends a connection whose head did not arrive in time. When part of a
/// head came, the client is told why with a 408 (as HAProxy's `timeout
/// http-request` does; hyper closes unanswered) and the connection closes
/// gracefully, so the answer is not lost to a reset; a connection that
/// sent nothing is dropped as an idle one would be.
async fn head_timed_out<S: AsyncWrite + Unpin>(io: &mut S, buf: &BytesMut) -> FastEnd {
    if buf.is_empty() {
        return FastEnd::Dropped;
    }
    match tokio::time::timeout(HEAD_TIMED_OUT_WRITE, io.write_all(HEAD_TIMED_OUT)).await {
        Ok(Ok(())) => FastEnd::Closed,
        _ => FastEnd::Dropped,
    }
}

/// Reads the client's next bytes into `buf`; `None` once the connection
/// has been idle a grace since `last` (`grace` is re-armed when it fires
/// sooner).
async fn between_requests<S: AsyncRead + Unpin>(
    io: &mut S,
    buf: &mut BytesMut,
    mut grace: Pin<&mut tokio::time::Sleep>,
    last: Instant,
) -> Option<std::io::Result<usize>> {
    let mut read = std::pin::pin!(io.read_buf(buf));
    poll_fn(|cx| {
        if let Poll::Ready(read) = read.as_mut().poll(cx) {
            return Poll::Ready(Some(read));
        }
        while grace.as_mut().poll(cx).is_ready() {
            let due = last + PARK_GRACE;
            if Instant::now() >= due {
                return Poll::Ready(None);
            }
            grace.as_mut().reset(due);
        }
        Poll::Pending
    })
    .await
}

/// The proxy's cut, polled only when the shutdown level moved.
struct Shutdown<F> {
    moves: LevelMoves,
    cut: Pin<F>,
}

impl<F, C> Shutdown<F>
where
    F: std::ops::DerefMut<Target = C>,
    C: Future<Output = ()>,
{
    /// Runs `fut` to its end, unless the proxy is cut first (`None`).
    /// Taken pinned where the caller built it: a request's future is
    /// kilobytes, and each move of it is a `memcpy`.
    async fn unless_cut<T>(&mut self, mut fut: Pin<&mut impl Future<Output = T>>) -> Option<T> {
        poll_fn(|cx| {
            if self.moves.moved() && self.cut.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            fut.as_mut().poll(cx).map(Some)
        })
        .await
    }

    /// Whether the drain has begun: new requests are refused.
    fn draining(&self) -> bool {
        self.moves.draining()
    }
}

/// Why the front of the buffer is not a request to serve here.
enum Unparsed {
    /// Not all of a head yet.
    Partial,
    /// A request for hyper (or bytes that are none).
    NotHere,
}

/// Makes room in `buf` for the next read: doubled while small, by a
/// quarter once past [`KEPT_CAPACITY`], so that a large head (up to
/// `max_header_bytes`) holds little more memory than it is long — a few
/// copies of a rare head against twice its size for every slow client.
fn grow(buf: &mut BytesMut) {
    if buf.capacity() < KEPT_CAPACITY {
        buf.reserve(4096);
        return;
    }
    let mut bigger = BytesMut::with_capacity(buf.len() + buf.len() / 4);
    bigger.extend_from_slice(buf);
    *buf = bigger;
}

/// The whole head of a request served here, taken out of the buffer;
/// one longer than `limit` is not (it goes to the guard, which refuses it).
fn parse(
    buf: &mut BytesMut,
    spans: &mut Spans,
    limit: usize,
) -> Result<Request<ProxyBody>, Unparsed> {
    let mut lines = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let (len, method, target, count) = match httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut request, buf, &mut lines)
    {
        Ok(httparse::Status::Complete(len)) => {
            if len > limit {
                return Err(Unparsed::NotHere);
            }
            let (Some(1), Some(method), Some(path)) =
                (request.version, request.method, request.path)
            else {
                return Err(Unparsed::NotHere);
            };
            if !path.starts_with('/') || !request.headers.iter().all(is_served) {
                return Err(Unparsed::NotHere);
            }
            let Ok(method) = Method::from_bytes(method.as_bytes()) else {
                return Err(Unparsed::NotHere);
            };
            let path = h1_spans::range_in(buf, path.as_bytes());
            let count = h1_spans::locate(buf, request.headers, spans);
            (len, method, path, count)
        }
        Ok(httparse::Status::Partial) => return Err(Unparsed::Partial),
        Err(_) => return Err(Unparsed::NotHere),
    };
    let head = buf.split_to(len).freeze();
    let uri = Uri::from_maybe_shared(head.slice(target));
    let mut hosts = 0;
    let headers = h1_spans::header_map(&head, &spans[..count], |name, _| {
        hosts += usize::from(name == header::HOST);
    });
    let (Ok(uri), Ok(headers), 1) = (uri, headers, hosts) else {
        // Taken out of the buffer already: only a 400 is left to give —
        // hyper's, for a head it will read as malformed too, or the
        // proxy's for a `Host` missing or given twice (hyper serves such
        // a head; `forward::handle` refuses it).
        let mut back = BytesMut::with_capacity(head.len() + buf.len());
        back.extend_from_slice(&head);
        back.extend_from_slice(buf);
        *buf = back;
        return Err(Unparsed::NotHere);
    };
    let mut request = Request::new(empty());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_11;
    *request.headers_mut() = headers;
    Ok(request)
}

/// Whether a header line leaves the request to this loop: no body, no
/// expectation, nothing that changes the connection.
fn is_served(line: &httparse::Header<'_>) -> bool {
    let is = |name: &str| line.name.eq_ignore_ascii_case(name);
    if is("content-length") {
        return line.value.trim_ascii() == b"0";
    }
    if is("connection") {
        // What HTTP/1.1 clients commonly send, and the default anyway.
        return line
            .value
            .split(|b| *b == b',')
            .all(|token| token.trim_ascii().eq_ignore_ascii_case(b"keep-alive"));
    }
    !(is("transfer-encoding") || is("expect") || is("upgrade") || is("te"))
}

/// Writes `response` (without a body when `no_body`: an answer to HEAD);
/// `Ok(false)` when the connection cannot carry another request.
pub(super) async fn write_answer<S: AsyncWrite + Unpin>(
    io: &mut S,
    out: &mut Vec<u8>,
    response: Response<ProxyBody>,
    no_body: bool,
) -> std::io::Result<bool> {
    let (parts, mut body) = response.into_parts();
    let status = parts.status;
    let no_body = no_body
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || status.is_informational();
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    // The endpoint's own reason phrase when it was not the canonical one
    // (as hyper's server writes it; HAProxy and nginx keep it too).
    let reason = match parts.extensions.get::<ReasonPhrase>() {
        Some(reason) => reason.as_bytes(),
        None => status.canonical_reason().unwrap_or("").as_bytes(),
    };
    out.extend_from_slice(reason);
    out.extend_from_slice(b"\r\n");
    let mut declared = None;
    let mut dated = false;
    for (name, value) in &parts.headers {
        if name == header::TRANSFER_ENCODING {
            continue;
        }
        if name == header::CONTENT_LENGTH {
            declared = std::str::from_utf8(value.as_bytes())
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
        }
        dated |= name == header::DATE;
        line(out, name.as_str().as_bytes(), value.as_bytes());
    }
    if !dated {
        DATE.with(|date| date.write_line(out));
    }
    let length = match (no_body, declared, body.size_hint().exact()) {
        (true, ..) => Some(0),
        (false, Some(n), _) => Some(n),
        (false, None, Some(n)) => {
            line(
                out,
                b"content-length",
                itoa::Buffer::new().format(n).as_bytes(),
            );
            Some(n)
        }
        (false, None, None) => {
            line(out, b"transfer-encoding", b"chunked");
            None
        }
    };
    out.extend_from_slice(b"\r\n");
    if no_body {
        io.write_all(out).await?;
        return Ok(true);
    }
    let mut sent = 0u64;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame
            .map_err(|e| std::io::Error::other(e.to_string()))?
            .into_data()
        else {
            continue; // trailers: the client did not ask for them
        };
        if data.is_empty() {
            continue;
        }
        sent += data.len() as u64;
        if length.is_none() {
            // A `Vec` takes formatted writes without failing.
            let _ = write!(out, "{:x}\r\n", data.len());
        }
        if out.len() + data.len() <= COALESCE {
            out.extend_from_slice(&data);
        } else {
            io.write_all(out).await?;
            out.clear();
            io.write_all(&data).await?;
        }
        if length.is_none() {
            out.extend_from_slice(b"\r\n");
        }
        if !body.is_end_stream() && !out.is_empty() {
            io.write_all(out).await?;
            out.clear();
        }
    }
    if length.is_none() {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    if !out.is_empty() {
        io.write_all(out).await?;
    }
    // A body that disagrees with its declared length leaves the client
    // out of step: the connection ends with it.
    Ok(length.is_none_or(|n| n == sent))
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The `date` header's value, formatted once per second per thread.
struct CachedDate {
    second: std::cell::Cell<u64>,
    text: std::cell::RefCell<[u8; 29]>,
}

impl CachedDate {
    /// Writes the `date` line, reformatting the value when the second
    /// changed since the last answer of this thread.
    fn write_line(&self, out: &mut Vec<u8>) {
        let now = tripline::clock::system_time_after(std::time::Duration::ZERO);
        let second = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut text = self.text.borrow_mut();
        if second != self.second.get() {
            self.second.set(second);
            let formatted = httpdate::fmt_http_date(now);
            let n = formatted.len().min(text.len());
            text[..n].copy_from_slice(&formatted.as_bytes()[..n]);
        }
        line(out, b"date", &text[..]);
    }
}

thread_local! {
    static DATE: CachedDate = const {
        CachedDate {
            second: std::cell::Cell::new(0),
            text: std::cell::RefCell::new([0; 29]),
        }
    };
}
