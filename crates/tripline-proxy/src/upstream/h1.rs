//! A bodiless request's exchange with an HTTP/1.1 endpoint, driven in
//! the request's own task.
//!
//! Why not hyper's client here: under hyper's `conn::http1` the
//! connection lives in a task of its own, and every request crosses a
//! channel to it and its answer a oneshot back; hyper's client
//! dispatcher is polled three times per request (~3 750 instructions
//! each) and the task is woken twice. All of it was 28 % of the proxy's
//! instructions per request (callgrind, `benches/proxy/instructions.sh`).
//! A request without a body — most proxied traffic: `GET`, `HEAD`,
//! `DELETE`, `OPTIONS` — needs none of that machinery: its head is
//! written with one `write`, the answer's head read and parsed with
//! `httparse` (the parser hyper itself uses) and its body decoded as it
//! is read. An answer whose body is already in the buffer (small bodies,
//! the common case) gives the connection back before the client has even
//! been answered.
//!
//! Requests with a body stay on hyper's client: an endpoint may answer
//! while the body is still being sent (and stop reading it), which needs
//! reading and writing at once — hyper's dispatcher does exactly that.

mod body;
mod head;

use std::future::Future as _;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::body::{ProxyBody, empty, full};
use crate::http::headers::ForwardedValues;
use body::{Decoder, UpstreamBody};
use head::Framing;

/// Read size: an answer head and a small body fit in one read.
const READ_CHUNK: usize = 8 * 1024;

/// A broken exchange: what the endpoint sent (or did) that an HTTP/1.1
/// answer cannot be.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct H1Error(String);

impl H1Error {
    fn new(reason: impl Into<String>) -> Self {
        H1Error(reason.into())
    }
}

/// Whether a request can be exchanged here: no body to send, and not a
/// `CONNECT` (a tunnel, not a request/answer exchange).
pub(super) fn is_bodiless(method: &Method, body: &impl http_body::Body) -> bool {
    body.is_end_stream() && method != Method::CONNECT
}

/// What is written for a request: its method, origin-form path and
/// headers (hop-by-hop ones already removed), and what the proxy adds
/// without copying the client's header map for it.
pub(crate) struct RequestHead<'a> {
    pub(crate) method: &'a Method,
    pub(crate) path: &'a str,
    pub(crate) headers: &'a HeaderMap,
    /// This hop's elements, appended to the chains `headers` carries.
    pub(crate) forwarded: Option<&'a ForwardedValues>,
    /// A `Host` to send, when `headers` has none.
    pub(crate) host: Option<&'a str>,
}

impl<'a> RequestHead<'a> {
    /// The head of an already built `request` (origin-form URI).
    pub(super) fn of<B>(request: &'a Request<B>) -> Self {
        RequestHead {
            method: request.method(),
            path: request.uri().path_and_query().map_or("/", |p| p.as_str()),
            headers: request.headers(),
            forwarded: None,
            host: None,
        }
    }
}

/// One connection to an endpoint with its read buffer: idle in the pool,
/// in use by one request, or owned by the answer body being read off it.
pub(super) struct RawConn {
    stream: TcpStream,
    /// Bytes read and not yet decoded; empty whenever the connection is idle.
    buf: BytesMut,
    /// The request head being written (kept to reuse its allocation).
    out: Vec<u8>,
}

/// How an exchange failed, and whether the request may have reached the
/// endpoint.
pub(super) enum Failed {
    /// Writing the request failed: the endpoint cannot have a whole
    /// request to act on.
    Unsent(std::io::Error),
    /// After the request was written.
    Answer(H1Error),
}

impl Failed {
    /// The failure as the client's error, whichever side it was on.
    pub(super) fn into_error(self) -> crate::http::body::BoxError {
        match self {
            Failed::Unsent(e) => e.into(),
            Failed::Answer(e) => e.into(),
        }
    }
}

/// Gives `conn` back to the pool through `home` (present only when the
/// answer left the connection able to carry another request), unless
/// bytes nobody asked for follow the answer on it.
fn give_back<F: FnOnce(RawConn)>(conn: RawConn, home: Option<F>) {
    if let Some(home) = home
        && conn.buf.is_empty()
    {
        home(conn);
    }
}

impl RawConn {
    pub(super) fn new(stream: TcpStream) -> Self {
        RawConn {
            stream,
            buf: BytesMut::new(),
            out: Vec::new(),
        }
    }

    /// Whether an idle connection can still take a request: the endpoint
    /// has not closed it nor sent anything unasked for. Costs no system
    /// call unless the connection became readable while idle (tokio
    /// clears readiness on the short read that ends each answer).
    pub(super) fn is_open(&self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        match self.stream.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            }
        }
    }

    /// Writes `request`'s head and reads the answer's head.
    async fn exchange(&mut self, request: &RequestHead<'_>) -> Result<head::Head, Failed> {
        self.out.clear();
        head::encode_request(request, &mut self.out);
        self.stream
            .write_all(&self.out)
            .await
            .map_err(Failed::Unsent)?;
        loop {
            if !self.buf.is_empty()
                && let Some(head) =
                    head::parse_response(&mut self.buf, request.method).map_err(Failed::Answer)?
            {
                return Ok(head);
            }
            match std::future::poll_fn(|cx| self.poll_fill(cx)).await {
                Ok(0) => {
                    return Err(Failed::Answer(H1Error::new(
                        "endpoint closed the connection before its answer's head",
                    )));
                }
                Ok(_) => {}
                Err(e) => {
                    return Err(Failed::Answer(H1Error::new(format!(
                        "reading the answer: {e}"
                    ))));
                }
            }
        }
    }

    /// Reads what the endpoint sent into the buffer; `Ok(0)` at its close.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        // tokio's `read_buf` future holds nothing between polls; polling a
        // fresh one is a plain non-blocking read through the reactor.
        std::pin::pin!(self.stream.read_buf(&mut self.buf))
            .as_mut()
            .poll(cx)
    }
}

/// Sends the bodiless `request` on `conn` and returns the answer; its
/// body gives the connection to `home` once read whole (at once when the
/// body is already in the buffer) if the connection can carry another
/// request.
pub(super) async fn send<F>(
    mut conn: RawConn,
    request: &RequestHead<'_>,
    home: F,
) -> Result<Response<ProxyBody>, Failed>
where
    F: FnOnce(RawConn) + Send + Sync + Unpin + 'static,
{
    let head = conn.exchange(request).await?;
    let (parts, ()) = head.response.into_parts();
    let home = head.reusable.then_some(home);
    let whole = match head.framing {
        Framing::Empty | Framing::Length(0) => Some(empty()),
        Framing::Length(n) if n <= conn.buf.len() as u64 => {
            Some(full(conn.buf.split_to(n as usize).freeze()))
        }
        _ => None,
    };
    let body = match whole {
        Some(body) => {
            give_back(conn, home);
            body
        }
        None => UpstreamBody::new(conn, Decoder::new(head.framing), home).boxed(),
    };
    Ok(Response::from_parts(parts, body))
}
