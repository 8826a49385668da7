//! Refusing requests that carry both `Content-Length` and
//! `Transfer-Encoding`: the classic request-smuggling vector.
//!
//! When a front proxy and the server behind it disagree on which header
//! frames the body, one request can hide a second inside its body. RFC
//! 9112 §6.3 lets a server reject such a message, and a proxy that forwards
//! it is exactly where the disagreement is exploited, so the proxy answers
//! 400 and closes the connection.
//!
//! hyper handles the conflict safely on its own (it ignores the length,
//! reads chunked, and closes the connection after the response) but it
//! drops `Content-Length` before the request reaches a handler, so the
//! conflict cannot be seen there. [`Guarded`] watches the bytes the client
//! sends instead: it reads each request head, skips bodies framed by
//! `Content-Length`, and raises a flag on a head with both headers. It stops
//! watching at the first chunked body (tracking chunk framing is hyper's
//! job), so a conflict after a chunked request on the same connection is
//! left to hyper's own handling, which is still safe.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// Longest head line watched; hyper refuses longer heads itself.
const MAX_LINE: usize = 64 * 1024;

/// A client connection whose request heads are watched for a
/// `Content-Length` + `Transfer-Encoding` conflict.
pub(crate) struct Guarded<S> {
    inner: S,
    scan: Scanner,
    conflict: Arc<AtomicBool>,
}

impl<S> Guarded<S> {
    /// Wraps `inner`; the returned flag is raised on a conflicting head.
    pub(crate) fn new(inner: S) -> (Self, Arc<AtomicBool>) {
        let conflict = Arc::new(AtomicBool::new(false));
        let scan = Scanner::Head(Head::default());
        (
            Guarded {
                inner,
                scan,
                conflict: conflict.clone(),
            },
            conflict,
        )
    }
}

impl<S> Guarded<S> {
    /// The connection itself (to wait on it without reading).
    pub(crate) fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The connection without the watch, for good: once a client and an
    /// endpoint switched protocols, what follows is not HTTP/1.
    pub(crate) fn into_inner(self) -> S {
        self.inner
    }

    /// The connection, to read without the watch: for a reader that
    /// parses every head itself (the bodiless path, which serves no
    /// request with `Transfer-Encoding` or a body), and hands whatever it
    /// does not serve on through [`Guarded::watch_from_head`]. Scanning
    /// what that reader already parses was ~1 100 instructions per
    /// request.
    pub(crate) fn unwatched(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Watches `bytes`, which start at a request head, as if just read:
    /// what a reader that bypassed the watch hands on to hyper. The watch
    /// starts over at that head, whatever it saw before.
    pub(crate) fn watch_from_head(&mut self, bytes: &[u8]) {
        self.scan = Scanner::Head(Head::default());
        if self.scan.feed(bytes) {
            self.conflict.store(true, Ordering::Release);
        }
    }
}

#[derive(Debug, Default)]
struct Head {
    line: Vec<u8>,
    lines: usize,
    length: Option<u64>,
    chunked: bool,
}

#[derive(Debug)]
enum Scanner {
    Head(Head),
    Body(u64),
    Off,
}

impl Scanner {
    /// Feeds bytes the client sent; `true` when a head is conflicting.
    fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            match self {
                Scanner::Off => return false,
                Scanner::Body(left) => {
                    let n = usize::try_from(*left)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len());
                    bytes = &bytes[n..];
                    *left -= n as u64;
                    if *left == 0 {
                        *self = Scanner::Head(Head::default());
                    }
                }
                Scanner::Head(head) => {
                    let Some(end) = memchr::memchr(b'\n', bytes) else {
                        head.line.extend_from_slice(bytes);
                        if head.line.len() > MAX_LINE {
                            *self = Scanner::Off;
                        }
                        return false;
                    };
                    // A line read whole (nearly all of them) is judged in
                    // place; only one split across reads is copied.
                    let judged = if head.line.is_empty() {
                        head.end_line(&bytes[..end])
                    } else {
                        head.line.extend_from_slice(&bytes[..end]);
                        let line = std::mem::take(&mut head.line);
                        head.end_line(&line)
                    };
                    bytes = &bytes[end + 1..];
                    match judged {
                        Line::More => {}
                        Line::Conflict => {
                            *self = Scanner::Off;
                            return true;
                        }
                        Line::Chunked => *self = Scanner::Off,
                        Line::Body(0) => *self = Scanner::Head(Head::default()),
                        Line::Body(n) => *self = Scanner::Body(n),
                    }
                }
            }
        }
        false
    }
}

enum Line {
    More,
    Conflict,
    /// Stop watching: a chunked body, or an HTTP/2 connection.
    Chunked,
    Body(u64),
}

impl Head {
    fn end_line(&mut self, line: &[u8]) -> Line {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.lines == 0 {
                return Line::More; // a stray CRLF before a request line
            }
            return match (self.length, self.chunked) {
                (Some(_), true) => Line::Conflict,
                (None, true) => Line::Chunked,
                (length, false) => Line::Body(length.unwrap_or(0)),
            };
        }
        if self.lines == 0 && line == b"PRI * HTTP/2.0" {
            // HTTP/2 frames its messages itself: nothing to watch.
            return Line::Chunked;
        }
        self.lines += 1;
        if let Some(colon) = line.iter().position(|b| *b == b':') {
            let name = &line[..colon];
            if name.eq_ignore_ascii_case(b"content-length") {
                let value = String::from_utf8_lossy(&line[colon + 1..]);
                self.length = Some(value.trim().parse().unwrap_or(0));
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                self.chunked = true;
            }
        }
        Line::More
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let this = &mut *self;
            if this.scan.feed(&buf.filled()[before..]) {
                this.conflict.store(true, Ordering::Release);
            }
        }
        polled
    }
}

crate::io_wrap::write_through!(Guarded);

#[cfg(test)]
mod tests {
    use super::*;

    fn conflicts(chunks: &[&[u8]]) -> bool {
        let mut scan = Scanner::Head(Head::default());
        chunks.iter().any(|c| scan.feed(c))
    }

    #[test]
    fn both_headers_in_one_head_conflict_in_either_order_and_split_anywhere() {
        let head: &[u8] = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(conflicts(&[head]));
        let reversed: &[u8] =
            b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n";
        assert!(conflicts(&[reversed]));
        for split in 1..head.len() {
            assert!(
                conflicts(&[&head[..split], &head[split..]]),
                "split at {split}"
            );
        }
    }

    #[test]
    fn bodies_framed_by_length_are_skipped_and_the_next_head_is_read() {
        // A body that looks like a conflicting head is only a body.
        let body: &[u8] = b"Content-Length: 1\r\nTransfer-Encoding: x\r\n\r\n";
        let first = format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len());
        assert!(!conflicts(&[
            first.as_bytes(),
            body,
            b"GET / HTTP/1.1\r\n\r\n"
        ]));
        let smuggled: &[u8] =
            b"GET / HTTP/1.1\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(conflicts(&[first.as_bytes(), body, smuggled]));
    }

    #[test]
    fn plain_requests_do_not_conflict() {
        assert!(!conflicts(&[
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            b"\r\nGET /b HTTP/1.1\r\n\r\n"
        ]));
        assert!(!conflicts(&[
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n"
        ]));
    }
}
