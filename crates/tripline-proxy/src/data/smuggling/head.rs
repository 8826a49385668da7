//! Judging a request head line by line: what a parser would refuse, or
//! read differently from the parser behind the proxy, is refused here.
//!
//! Framing is what request smuggling turns on, so it is held to one
//! reading: `Content-Length` is digits only and, when repeated, the same
//! number; `Transfer-Encoding` is exactly `chunked` (case-insensitive),
//! once, never beside `Content-Length` nor on an HTTP/1.0 request (as
//! HAProxy refuses `identity, chunked` and `chunked, chunked`). A line
//! with a control character, a folded line, a line without a colon, a
//! name that is not a token and a request line that is not `method SP
//! target SP HTTP/1.x` are refused too: hyper would refuse them with a
//! bare 400, unlabelled and uncounted. A head longer than `[proxy]
//! max_header_bytes`, or with more lines than the parsers take, is too
//! large: `414` while still on its request line, else `431`.

use bytes::Bytes;
use http::{Response, StatusCode};

use crate::http::body::{ProxyBody, full};
use crate::http::h1_spans::MAX_HEADERS;
use crate::http::rejection::{Reason, Rejection};

/// Why a request head is refused before any parser serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// The request line alone is longer than the head limit: `414`.
    UriTooLong,
    /// The head is longer than the limit, or has too many lines: `431`.
    HeadTooLarge,
    /// Anything else: `400`, saying what was wrong.
    Bad(&'static str),
}

impl Malformed {
    /// The status answered.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Malformed::UriTooLong => StatusCode::URI_TOO_LONG,
            Malformed::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Malformed::Bad(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// What was wrong, for the log line and the answer's body.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Malformed::UriTooLong => "request line longer than max_header_bytes",
            Malformed::HeadTooLarge => "head longer than max_header_bytes or with too many lines",
            Malformed::Bad(what) => what,
        }
    }

    /// The refusal: a `protocol_error` (flag `DPE`) with this status, and
    /// a body that says what was wrong.
    pub(crate) fn response(self) -> Response<ProxyBody> {
        let mut response = Rejection::new(Reason::ProtocolError, None).response();
        *response.status_mut() = self.status();
        let body = serde_json::json!({
            "rejected": Reason::ProtocolError.as_str(),
            "flag": Reason::ProtocolError.flag(),
            "status": self.status().as_u16(),
            "detail": self.what(),
        });
        *response.body_mut() = full(Bytes::from(format!("{body}\n")));
        response
    }
}

/// A head being read: its lines so far.
#[derive(Debug, Default)]
pub(super) struct Head {
    /// A line split across reads, kept until its end arrives.
    pub(super) line: Vec<u8>,
    /// Lines judged, the request line included.
    lines: usize,
    /// Bytes of the head so far (line ends included).
    size: usize,
    length: Option<u64>,
    chunked: bool,
    http10: bool,
}

/// What a line says about the head.
pub(super) enum Line {
    More,
    Refused(Malformed),
    /// Stop watching: a chunked body, or an HTTP/2 connection.
    Chunked,
    /// The head ended; a body of this many bytes follows.
    Body(u64),
}

impl Head {
    /// Whether the head, with `pending` bytes of a line not yet ended,
    /// is over `limit`; the refusal if so.
    pub(super) fn over(&self, pending: usize, limit: usize) -> Option<Malformed> {
        (self.size + pending > limit).then_some(match self.lines {
            0 => Malformed::UriTooLong,
            _ => Malformed::HeadTooLarge,
        })
    }

    /// Judges one line (its `\n` taken off).
    pub(super) fn end_line(&mut self, line: &[u8], limit: usize) -> Line {
        self.size += line.len() + 1;
        if let Some(refused) = self.over(0, limit) {
            return Line::Refused(refused);
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.lines == 0 {
                self.size = 0;
                return Line::More; // a stray CRLF before a request line
            }
            return match (self.length, self.chunked) {
                (Some(_), true) => bad("Content-Length with Transfer-Encoding"),
                (None, true) if self.http10 => bad("Transfer-Encoding in an HTTP/1.0 request"),
                (None, true) => Line::Chunked,
                (length, false) => Line::Body(length.unwrap_or(0)),
            };
        }
        self.lines += 1;
        if self.lines > MAX_HEADERS + 1 {
            return Line::Refused(Malformed::HeadTooLarge);
        }
        if line.iter().any(|b| is_control(*b)) {
            return bad("a control character in the head");
        }
        if self.lines == 1 {
            return self.request_line(line);
        }
        self.header_line(line)
    }

    fn request_line(&mut self, line: &[u8]) -> Line {
        if line == b"PRI * HTTP/2.0" {
            // HTTP/2 frames its messages itself: nothing to watch.
            return Line::Chunked;
        }
        let mut parts = line.split(|b| *b == b' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return bad("a malformed request line");
        };
        if method.is_empty() || !method.iter().all(|b| is_token(*b)) {
            return bad("a malformed method");
        }
        if target.is_empty() || !target.iter().all(|b| (0x21..0x7f).contains(b)) {
            return bad("a malformed request target");
        }
        match version {
            b"HTTP/1.1" => {}
            b"HTTP/1.0" => self.http10 = true,
            _ => return bad("an HTTP version other than 1.0 or 1.1"),
        }
        Line::More
    }

    fn header_line(&mut self, line: &[u8]) -> Line {
        if line[0] == b' ' || line[0] == b'\t' {
            return bad("a folded header line");
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            return bad("a header line without a colon");
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.is_empty() || !name.iter().all(|b| is_token(*b)) {
            return bad("a malformed header name");
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let parsed = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            let Some(length) = parsed else {
                return bad("a Content-Length that is not a number");
            };
            if self.length.is_some_and(|l| l != length) {
                return bad("two Content-Lengths that differ");
            }
            self.length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if self.chunked {
                return bad("Transfer-Encoding given twice");
            }
            if !value.eq_ignore_ascii_case(b"chunked") {
                return bad("a Transfer-Encoding other than chunked");
            }
            self.chunked = true;
        }
        Line::More
    }
}

fn bad(what: &'static str) -> Line {
    Line::Refused(Malformed::Bad(what))
}

/// A control character (tab aside, which values may hold) or DEL.
fn is_control(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// A `tchar` of RFC 9110 §5.6.2: what names and methods are made of.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
