//! The response body: a whole buffer, or chunks streamed from the encoder.
//!
//! A scrape of 20 000 breakers is megabytes of text. Built as one string it
//! would hold the whole exposition in memory at once (and a string that
//! doubles as it grows holds up to twice that); streamed, the encoder hands
//! 64 KiB chunks to the connection through a short queue and blocks when
//! the client reads slower than it writes, so a scrape holds the samples
//! and a few chunks, whatever its size.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Bytes per streamed chunk.
const CHUNK: usize = 64 * 1024;
/// Chunks queued ahead of a slow client.
pub(crate) const QUEUE: usize = 4;

/// The body of a `/metrics` response.
///
/// ```
/// use hyper::body::Body;
/// use tripline_prometheus::http::MetricsBody;
///
/// let body = MetricsBody::from("# EOF\n");
/// assert_eq!(body.size_hint().exact(), Some(6));
/// ```
#[derive(Debug)]
pub struct MetricsBody(Inner);

#[derive(Debug)]
enum Inner {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Result<Bytes, ScrapeError>>),
}

impl MetricsBody {
    pub(crate) fn stream(rx: mpsc::Receiver<Result<Bytes, ScrapeError>>) -> Self {
        MetricsBody(Inner::Stream(rx))
    }

    pub(crate) fn empty() -> Self {
        MetricsBody(Inner::Full(None))
    }
}

impl From<String> for MetricsBody {
    fn from(s: String) -> Self {
        MetricsBody(Inner::Full(Some(Bytes::from(s))))
    }
}

impl From<&'static str> for MetricsBody {
    fn from(s: &'static str) -> Self {
        MetricsBody(Inner::Full(Some(Bytes::from_static(s.as_bytes()))))
    }
}

/// The scrape failed after the response started: a collector returned an
/// error. The connection is closed mid-body, so the scraper sees a failed
/// scrape rather than a truncated exposition.
///
/// ```
/// let e = tripline_prometheus::http::ScrapeError;
/// assert_eq!(e.to_string(), "encoding the metrics failed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrapeError;

impl fmt::Display for ScrapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("encoding the metrics failed")
    }
}

impl std::error::Error for ScrapeError {}

impl Body for MetricsBody {
    type Data = Bytes;
    type Error = ScrapeError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ScrapeError>>> {
        match &mut self.0 {
            Inner::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Inner::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|c| c.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.0, Inner::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::Stream(_) => SizeHint::default(),
        }
    }
}

/// A `fmt::Write` that sends what is written as chunks, blocking while the
/// queue is full. Runs on a blocking thread, never on the runtime.
pub(crate) struct ChunkWriter {
    tx: mpsc::Sender<Result<Bytes, ScrapeError>>,
    buf: String,
}

impl ChunkWriter {
    pub(crate) fn new(tx: mpsc::Sender<Result<Bytes, ScrapeError>>) -> Self {
        ChunkWriter {
            tx,
            buf: String::with_capacity(CHUNK),
        }
    }

    fn send(&mut self) -> fmt::Result {
        let chunk = std::mem::replace(&mut self.buf, String::with_capacity(CHUNK));
        // The client went away: stop encoding.
        self.tx
            .blocking_send(Ok(Bytes::from(chunk)))
            .map_err(|_| fmt::Error)
    }

    /// Sends what is left, or the error that ended the encoding.
    pub(crate) fn finish(mut self, result: fmt::Result) {
        let _ = match result {
            Ok(()) if self.buf.is_empty() => Ok(()),
            Ok(()) => self.send(),
            Err(_) => self
                .tx
                .blocking_send(Err(ScrapeError))
                .map_err(|_| fmt::Error),
        };
    }
}

impl fmt::Write for ChunkWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.buf.push_str(s);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(())
    }
}
