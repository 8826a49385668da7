//! Message heads: the request written to the endpoint, the answer's head
//! read back, and how the answer's body is framed (RFC 9112 §6.3).

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode, Version};
use hyper::ext::ReasonPhrase;

use super::{H1Error, RequestHead};
use crate::http::headers::chain_of;

use crate::http::h1_spans::{self, MAX_HEADERS, Span, Spans};

/// The largest answer head read before the endpoint is judged broken.
pub(super) const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Writes `request`'s head in HTTP/1.1 origin form. The request carries
/// no body (the caller checks), so no framing header is written and a
/// `transfer-encoding` left on it is dropped rather than promising a
/// chunked body that never comes. This hop's forwarded elements are
/// appended as `ForwardedValues::append_to` would: to the first value of
/// an existing chain, which replaces the header's other lines.
pub(super) fn encode_request(request: &RequestHead<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(request.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let elements = request.forwarded.map(|f| f.elements());
    let mut extended = [false; 2];
    for (name, value) in request.headers {
        if name == header::TRANSFER_ENCODING {
            continue;
        }
        let element = elements
            .as_ref()
            .and_then(|e| e.iter().position(|(n, _)| n == name));
        let (Some(i), Some(elements)) = (element, &elements) else {
            line(out, name.as_str().as_bytes(), value.as_bytes());
            continue;
        };
        if std::mem::replace(&mut extended[i], true) {
            continue;
        }
        let own = elements[i].1.as_bytes();
        match chain_of(request.headers, name) {
            Some(chain) => line(
                out,
                name.as_str().as_bytes(),
                &[chain.as_bytes(), b", ", own].concat(),
            ),
            None => line(out, name.as_str().as_bytes(), own),
        }
    }
    for ((name, own), done) in elements.iter().flatten().zip(extended) {
        if !done {
            line(out, name.as_str().as_bytes(), own.as_bytes());
        }
    }
    // A `Host` the proxy supplies comes from the request's URI or the
    // config: a value that is not visible text is left out, as a failed
    // `HeaderValue` would be.
    if let Some(host) = request
        .host
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
    {
        line(out, b"host", host.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// How an answer's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body (an answer to `HEAD`, a 204 or a 304).
    Empty,
    /// `content-length` bytes.
    Length(u64),
    /// `transfer-encoding: chunked`.
    Chunked,
    /// Everything until the endpoint closes the connection.
    UntilClose,
}

/// An answer's head, and what the connection can do after its body.
pub(super) struct Head {
    pub(super) response: Response<()>,
    pub(super) framing: Framing,
    /// Whether the connection may carry another request once the body
    /// has been read whole.
    pub(super) reusable: bool,
}

/// Parses the answer head at the front of `buf`, taking it out of the
/// buffer; informational (1xx) answers in front of it are skipped, as
/// hyper's client does. `Ok(None)`: the head is not all there yet.
pub(super) fn parse_response(buf: &mut BytesMut, method: &Method) -> Result<Option<Head>, H1Error> {
    // Each line's name and value as offsets into the head, so that the
    // values can share the head's bytes instead of being copied; on the
    // stack, as hyper's are: no allocation per answer for them.
    let mut spans = [Span::default(); MAX_HEADERS];
    loop {
        let Some(line) = parse_once(buf, &mut spans)? else {
            if buf.len() > MAX_HEAD_BYTES {
                return Err(H1Error::new("answer head larger than 64 KiB"));
            }
            return Ok(None);
        };
        let head = buf.split_to(line.len).freeze();
        if line.status.is_informational() {
            if line.status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(H1Error::new(
                    "101 Switching Protocols to a request without upgrade",
                ));
            }
            continue;
        }
        return build(&head, &line, &spans[..line.count], method).map(Some);
    }
}

/// A parsed status line, and how far the head goes.
struct StatusLine {
    len: usize,
    status: StatusCode,
    version: Version,
    /// How many header lines `spans` holds.
    count: usize,
    /// Where in the head the reason phrase is, when it is not the
    /// status's canonical one (kept for the client, as hyper keeps it).
    reason: Option<std::ops::Range<usize>>,
}

fn parse_once(buf: &BytesMut, spans: &mut Spans) -> Result<Option<StatusLine>, H1Error> {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let status = httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut response, buf, &mut headers)
        .map_err(|e| H1Error::new(format!("malformed answer head: {e}")))?;
    let httparse::Status::Complete(len) = status else {
        return Ok(None);
    };
    let code = response.code.unwrap_or_default();
    let status = StatusCode::from_u16(code)
        .map_err(|_| H1Error::new(format!("answer status {code} out of range")))?;
    let version = match response.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let count = h1_spans::locate(buf, response.headers, spans);
    let reason = response
        .reason
        .filter(|r| !r.is_empty() && Some(*r) != status.canonical_reason())
        .map(|r| h1_spans::range_in(buf, r.as_bytes()));
    Ok(Some(StatusLine {
        len,
        status,
        version,
        count,
        reason,
    }))
}

fn build(
    head: &Bytes,
    line: &StatusLine,
    spans: &[Span],
    method: &Method,
) -> Result<Head, H1Error> {
    let mut seen = FramingHeaders::default();
    let headers = h1_spans::header_map(head, spans, |name, value| seen.note(name, value))
        .map_err(H1Error::new)?;
    let framing = seen.framing(line.status, method)?;
    let reusable =
        line.version == Version::HTTP_11 && framing != Framing::UntilClose && !seen.close;
    let mut response = Response::new(());
    *response.status_mut() = line.status;
    *response.version_mut() = line.version;
    *response.headers_mut() = headers;
    if let Some(at) = &line.reason
        && let Ok(reason) = ReasonPhrase::try_from(head.slice(at.clone()))
    {
        response.extensions_mut().insert(reason);
    }
    Ok(Head {
        response,
        framing,
        reusable,
    })
}

/// What an answer's header lines say about its framing and connection,
/// noted line by line as the header map is built (no lookups after).
#[derive(Default)]
struct FramingHeaders {
    /// The `content-length` all its values agree on, if any was sent.
    length: Option<u64>,
    /// Why the `content-length` values cannot be believed, if they cannot.
    bad_length: Option<&'static str>,
    transfer_encoding: bool,
    /// Whether the last transfer coding named is `chunked` (a body whose
    /// final coding is anything else runs until the connection closes).
    chunked: bool,
    /// `connection: close`.
    close: bool,
}

impl FramingHeaders {
    fn note(&mut self, name: &HeaderName, value: &[u8]) {
        if name == header::CONTENT_LENGTH {
            for item in value.split(|b| *b == b',') {
                match parse_length(item.trim_ascii()) {
                    None => self.bad_length = Some("invalid content-length in the answer"),
                    Some(n) if self.length.is_some_and(|seen| seen != n) => {
                        self.bad_length = Some("answer carries conflicting content-lengths");
                    }
                    Some(n) => self.length = Some(n),
                }
            }
        } else if name == header::TRANSFER_ENCODING {
            self.transfer_encoding = true;
            self.chunked = value
                .rsplit(|b| *b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name == header::CONNECTION {
            self.close |= value
                .split(|b| *b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        }
    }

    /// The answer body's framing (RFC 9112 §6.3). An answer with both
    /// `transfer-encoding` and `content-length`, or with `content-length`s
    /// that disagree, is refused: one of them lies, and a proxy that
    /// guessed would desynchronise the connection.
    fn framing(&self, status: StatusCode, method: &Method) -> Result<Framing, H1Error> {
        if method == Method::HEAD
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            return Ok(Framing::Empty);
        }
        if self.transfer_encoding {
            if self.length.is_some() || self.bad_length.is_some() {
                return Err(H1Error::new(
                    "answer carries both transfer-encoding and content-length",
                ));
            }
            return Ok(if self.chunked {
                Framing::Chunked
            } else {
                Framing::UntilClose
            });
        }
        if let Some(reason) = self.bad_length {
            return Err(H1Error::new(reason));
        }
        Ok(self.length.map_or(Framing::UntilClose, Framing::Length))
    }
}

fn parse_length(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

/// Parses trailer lines at the front of `buf` (after a chunked body's
/// last chunk), taking them and the empty line ending them out of the
/// buffer. `Ok(None)`: not all there yet.
pub(super) fn parse_trailers(buf: &mut BytesMut) -> Result<Option<HeaderMap>, H1Error> {
    let mut lines = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let (len, found) = match httparse::parse_headers(buf, &mut lines) {
        Ok(httparse::Status::Complete((len, found))) => (len, found),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(H1Error::new(format!("malformed trailers: {e}"))),
    };
    let mut trailers = HeaderMap::with_capacity(found.len());
    for line in found {
        let name = HeaderName::from_bytes(line.name.as_bytes())
            .map_err(|_| H1Error::new(format!("invalid trailer name {:?}", line.name)))?;
        let value = HeaderValue::from_bytes(line.value)
            .map_err(|_| H1Error::new(format!("invalid value of trailer {name}")))?;
        trailers.append(name, value);
    }
    let _ = buf.split_to(len);
    Ok(Some(trailers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::headers::ForwardedValues;

    fn parse(raw: &[u8], method: Method) -> Result<Option<Head>, H1Error> {
        parse_response(&mut BytesMut::from(raw), &method)
    }

    fn framing_of(raw: &[u8]) -> Framing {
        parse(raw, Method::GET).unwrap().unwrap().framing
    }

    #[test]
    fn a_request_head_is_written_in_origin_form_without_transfer_encoding() {
        let request = http::Request::builder()
            .method(Method::DELETE)
            .uri("/a/b?c=d")
            .header("host", "up:80")
            .header("transfer-encoding", "chunked")
            .header("x-y", "z")
            .body(())
            .unwrap();
        let mut out = Vec::new();
        encode_request(&RequestHead::of(&request), &mut out);
        assert_eq!(
            out,
            b"DELETE /a/b?c=d HTTP/1.1\r\nhost: up:80\r\nx-y: z\r\n\r\n"
        );
    }

    /// The header lines of an encoded head, sorted (order is free).
    fn lines_of(out: &[u8]) -> Vec<String> {
        let text = String::from_utf8(out.to_vec()).unwrap();
        let mut lines: Vec<String> = text
            .split("\r\n")
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn forwarded_elements_are_written_as_appending_them_to_the_map_would() {
        let cases: &[&[(&str, &str)]] = &[
            &[("accept", "*/*")],
            &[("x-forwarded-for", "10.0.0.1"), ("accept", "*/*")],
            &[
                ("x-forwarded-for", "10.0.0.1"),
                ("x-forwarded-for", "10.0.0.2"),
                ("forwarded", "for=10.0.0.1"),
            ],
            &[("x-forwarded-for", "  "), ("forwarded", "for=a")],
            &[("forwarded", "for=\"[::1]\""), ("host", "svc")],
        ];
        let forwarded = ForwardedValues::new("192.0.2.7".parse().unwrap(), "https");
        for case in cases {
            let mut headers = HeaderMap::new();
            for (name, value) in *case {
                headers.append(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            let direct = RequestHead {
                method: &Method::GET,
                path: "/",
                headers: &headers,
                forwarded: Some(&forwarded),
                host: None,
            };
            let mut written = Vec::new();
            encode_request(&direct, &mut written);
            let mut appended = headers.clone();
            forwarded.append_to(&mut appended);
            let mut request = http::Request::new(());
            *request.headers_mut() = appended;
            let mut expected = Vec::new();
            encode_request(&RequestHead::of(&request), &mut expected);
            assert_eq!(lines_of(&written), lines_of(&expected), "case {case:?}");
        }
    }

    #[test]
    fn a_host_is_supplied_only_when_given_and_visible() {
        let headers = HeaderMap::new();
        let mut head = RequestHead {
            method: &Method::GET,
            path: "/",
            headers: &headers,
            forwarded: None,
            host: Some("10.0.0.1:8080"),
        };
        let mut out = Vec::new();
        encode_request(&head, &mut out);
        assert_eq!(lines_of(&out), ["host: 10.0.0.1:8080"]);
        head.host = Some("bad\r\nx-injected: 1");
        out.clear();
        encode_request(&head, &mut out);
        assert!(lines_of(&out).is_empty());
    }

    #[test]
    fn an_answer_head_is_parsed_and_taken_out_of_the_buffer() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 503 Busy\r\nRetry-After: 5\r\ncontent-length: 2\r\n\r\nokNEXT"[..],
        );
        let head = parse_response(&mut buf, &Method::GET).unwrap().unwrap();
        assert_eq!(head.response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(head.response.headers()["retry-after"], "5");
        assert_eq!(head.framing, Framing::Length(2));
        assert!(head.reusable);
        assert_eq!(&buf[..], b"okNEXT");
    }

    #[test]
    fn a_partial_head_asks_for_more_and_leaves_the_buffer_alone() {
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\ncontent-le"[..]);
        assert!(parse_response(&mut buf, &Method::GET).unwrap().is_none());
        assert_eq!(buf.len(), 27);
    }

    #[test]
    fn informational_answers_are_skipped() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        let head = parse(raw, Method::GET).unwrap().unwrap();
        assert_eq!(head.response.status(), StatusCode::OK);
        assert!(head.response.headers().get("link").is_none());
    }

    #[test]
    fn framing_follows_rfc_9112() {
        assert_eq!(
            framing_of(b"HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n"),
            Framing::Length(12)
        );
        assert_eq!(
            framing_of(b"HTTP/1.1 200 OK\r\ncontent-length: 3, 3\r\n\r\n"),
            Framing::Length(3)
        );
        assert_eq!(
            framing_of(b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\n"),
            Framing::Chunked
        );
        assert_eq!(
            framing_of(b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n"),
            Framing::UntilClose
        );
        assert_eq!(framing_of(b"HTTP/1.1 200 OK\r\n\r\n"), Framing::UntilClose);
        assert_eq!(
            framing_of(b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n"),
            Framing::Empty
        );
        assert_eq!(
            framing_of(b"HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n"),
            Framing::Empty
        );
        let head = parse(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
            Method::HEAD,
        )
        .unwrap()
        .unwrap();
        assert_eq!(head.framing, Framing::Empty);
    }

    #[test]
    fn only_a_delimited_http_1_1_answer_without_close_keeps_its_connection() {
        let reusable = |raw: &[u8]| parse(raw, Method::GET).unwrap().unwrap().reusable;
        assert!(reusable(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"));
        assert!(!reusable(
            b"HTTP/1.1 200 OK\r\nconnection: keep-alive, Close\r\ncontent-length: 0\r\n\r\n"
        ));
        assert!(!reusable(b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n"));
        assert!(!reusable(b"HTTP/1.1 200 OK\r\n\r\n"));
    }

    #[test]
    fn lying_or_broken_answers_are_refused_with_the_reason() {
        let refused = |raw: &[u8]| {
            parse(raw, Method::GET)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(
            refused(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n")
                .contains("both")
        );
        assert!(
            refused(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\ncontent-length: 5\r\n\r\n")
                .contains("conflicting")
        );
        assert!(
            refused(b"HTTP/1.1 200 OK\r\ncontent-length: -4\r\n\r\n")
                .contains("invalid content-length")
        );
        assert!(
            refused(b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999\r\n\r\n")
                .contains("invalid content-length")
        );
        assert!(refused(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").contains("101"));
        assert!(refused(b"HTPT/1.1 200 OK\r\n\r\n").contains("malformed"));
        let mut huge = b"HTTP/1.1 200 OK\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES + 1));
        assert!(refused(&huge).contains("64 KiB"));
    }

    #[test]
    fn trailers_are_parsed_up_to_their_empty_line() {
        let mut buf = BytesMut::from(&b"grpc-status: 14\r\ngrpc-message: down\r\n\r\nrest"[..]);
        let trailers = parse_trailers(&mut buf).unwrap().unwrap();
        assert_eq!(trailers["grpc-status"], "14");
        assert_eq!(&buf[..], b"rest");
        let mut none = BytesMut::from(&b"\r\n"[..]);
        assert!(parse_trailers(&mut none).unwrap().unwrap().is_empty());
        assert!(
            parse_trailers(&mut BytesMut::from(&b"grpc-status: 1"[..]))
                .unwrap()
                .is_none()
        );
    }
}
