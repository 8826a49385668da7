//! Refusing request heads whose framing could smuggle a second request,
//! or that a parser would refuse: before any parser serves them.
//!
//! When a front proxy and the server behind it disagree on which header
//! frames the body, one request can hide a second inside its body. RFC
//! 9112 §6.3 lets a server reject such a message, and a proxy that forwards
//! it is exactly where the disagreement is exploited, so the proxy answers
//! 400 and closes the connection. Which heads are refused, and why, is
//! [`head`]'s to say; every refusal is labelled `protocol_error` (flag
//! `DPE`), counted and logged, where hyper would answer some of them with
//! a bare 400 that no counter sees.
//!
//! The proxy's own HTTP/1.1 loop parses every head it is woken with and
//! hands what it does not serve to hyper through
//! [`Guarded::watch_from_head`], which judges those bytes first. hyper
//! then serves the connection until it is idle, reading through
//! [`Guarded`]: it reads each request head, skips bodies framed by
//! `Content-Length`, and judges each head line as it arrives. A refused
//! head is never handed to hyper: the bytes before it are, then reads
//! stay pending, so hyper finishes the requests before it and goes idle;
//! the connection sees [`Guarded::refused`] and answers the refusal
//! itself. The watch stops at the first chunked body (tracking chunk
//! framing is hyper's job), so a head after a chunked request on the
//! same connection is left to hyper's own checks, which are still safe:
//! hyper refuses what it cannot read, and those refusals are counted
//! (`connection.rs`).

mod head;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

pub(crate) use head::Malformed;
use head::{Head, Line};

/// A client connection whose request heads are judged as they are read.
pub(crate) struct Guarded<S> {
    inner: S,
    scan: Scanner,
    /// `[proxy] max_header_bytes`.
    limit: usize,
    /// The head refused, once one is: nothing more is read.
    refused: Option<Malformed>,
}

impl<S> Guarded<S> {
    /// Wraps `inner`, whose heads may be `limit` bytes long at most.
    pub(crate) fn new(inner: S, limit: usize) -> Self {
        Guarded {
            inner,
            scan: Scanner::Head(Head::default()),
            limit,
            refused: None,
        }
    }

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
    /// starts over at that head, whatever it saw before. `Some` when a
    /// head among them is refused, with how many of `bytes` come before
    /// it: those may go to hyper (requests pipelined ahead of it), the
    /// rest may not, and the refusal is kept for [`Guarded::refused`].
    pub(crate) fn watch_from_head(&mut self, bytes: &[u8]) -> Option<(Malformed, usize)> {
        self.scan = Scanner::Head(Head::default());
        let refused = self.scan.feed(bytes, self.limit);
        self.refused = refused.map(|(why, _)| why);
        refused
    }

    /// The head refused, if one was: the connection answers it once
    /// hyper is done with the requests before it.
    pub(crate) fn refused(&self) -> Option<Malformed> {
        self.refused
    }
}

#[derive(Debug)]
enum Scanner {
    Head(Head),
    Body(u64),
    Off,
}

impl Scanner {
    /// Feeds bytes the client sent; on a refused head, why, and how many
    /// of `bytes` came before that head (0 when it began in an earlier
    /// feed).
    fn feed(&mut self, bytes: &[u8], limit: usize) -> Option<(Malformed, usize)> {
        let mut at = 0;
        let mut head_start = 0;
        while at < bytes.len() {
            let rest = &bytes[at..];
            match self {
                Scanner::Off => return None,
                Scanner::Body(left) => {
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(rest.len());
                    at += n;
                    *left -= n as u64;
                    if *left == 0 {
                        *self = Scanner::Head(Head::default());
                        head_start = at;
                    }
                }
                Scanner::Head(head) => {
                    let Some(end) = memchr::memchr(b'\n', rest) else {
                        head.line.extend_from_slice(rest);
                        return head
                            .over(head.line.len(), limit)
                            .map(|why| (why, head_start));
                    };
                    // A line read whole (nearly all of them) is judged in
                    // place; only one split across reads is copied.
                    let judged = if head.line.is_empty() {
                        head.end_line(&rest[..end], limit)
                    } else {
                        head.line.extend_from_slice(&rest[..end]);
                        let line = std::mem::take(&mut head.line);
                        head.end_line(&line, limit)
                    };
                    at += end + 1;
                    match judged {
                        Line::More => {}
                        Line::Refused(why) => {
                            *self = Scanner::Off;
                            return Some((why, head_start));
                        }
                        Line::Chunked => *self = Scanner::Off,
                        Line::Body(0) => {
                            *self = Scanner::Head(Head::default());
                            head_start = at;
                        }
                        Line::Body(n) => *self = Scanner::Body(n),
                    }
                }
            }
        }
        None
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.refused.is_some() {
            // Pending, not the end: hyper finishes what it has, goes
            // idle, and the connection answers the refusal. Its idle
            // watch's timer wakes the task.
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let this = &mut *self;
            let read = &buf.filled()[before..];
            if let Some((why, ahead)) = this.scan.feed(read, this.limit) {
                this.refused = Some(why);
                buf.set_filled(before + ahead);
                if ahead == 0 {
                    return Poll::Pending;
                }
            }
        }
        polled
    }
}

crate::http::io_wrap::write_through!(Guarded);

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 64 * 1024;

    fn refused(chunks: &[&[u8]]) -> Option<Malformed> {
        let mut scan = Scanner::Head(Head::default());
        chunks
            .iter()
            .find_map(|c| scan.feed(c, LIMIT))
            .map(|(why, _)| why)
    }

    fn conflicts(chunks: &[&[u8]]) -> bool {
        refused(chunks).is_some()
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

    #[test]
    fn framing_read_two_ways_and_malformed_lines_are_refused() {
        let cases: [&[u8]; 10] = [
            b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: identity, chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET / HTTP/1.1\r\nX-A: a\0b\r\n\r\n",
            b"GET / HTTP/1.1\r\nX-A: a\r\n folded\r\n\r\n",
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            b"G@T / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.2\r\n\r\n",
        ];
        for case in cases {
            let why = refused(&[case]);
            assert!(
                matches!(why, Some(Malformed::Bad(_))),
                "{:?}: {why:?}",
                String::from_utf8_lossy(case)
            );
        }
        // The same length twice is one reading; `chunked` in any case too.
        assert!(!conflicts(&[
            b"POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc"
        ]));
        assert!(!conflicts(&[
            b"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
        ]));
    }

    #[test]
    fn a_head_over_the_limit_is_refused_414_on_its_request_line_and_431_after() {
        let long_line = format!("GET /{} HTTP/1.1\r\n", "a".repeat(LIMIT));
        assert_eq!(
            refused(&[long_line.as_bytes()]),
            Some(Malformed::UriTooLong)
        );
        // Unended, in pieces: refused once the pieces pass the limit.
        let piece = vec![b'a'; 4096];
        let mut chunks: Vec<&[u8]> = vec![b"GET /"];
        chunks.extend(std::iter::repeat_n(&piece[..], 20));
        assert_eq!(refused(&chunks), Some(Malformed::UriTooLong));
        let long_head = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(LIMIT));
        assert_eq!(
            refused(&[long_head.as_bytes()]),
            Some(Malformed::HeadTooLarge)
        );
        let many: String = (0..200).map(|i| format!("x-{i}: v\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(refused(&[many.as_bytes()]), Some(Malformed::HeadTooLarge));
    }

    #[test]
    fn a_refused_head_says_how_many_bytes_of_its_read_came_before_it() {
        let mut scan = Scanner::Head(Head::default());
        let good = b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
        let mut read = good.to_vec();
        read.extend_from_slice(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n");
        let (_, ahead) = scan.feed(&read, LIMIT).unwrap();
        assert_eq!(ahead, good.len());
    }
}
