//! An answer's body read off the endpoint's connection, and the decoder
//! of its framing (`content-length`, chunked, or until the close).

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::head::{Framing, parse_trailers};
use super::{H1Error, RawConn, give_back};
use crate::http::body::{BoxError, ProxyFrames};

/// The longest chunk-size line (size and extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;
/// The most trailer bytes accepted after the last chunk.
const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// Where a body's decoding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decoder {
    /// `content-length`: bytes still to come.
    Length(u64),
    /// Chunked: where in the chunk grammar.
    Chunked(Chunk),
    /// Everything until the endpoint closes.
    UntilClose,
    /// The body has ended.
    Done,
}

/// A place in the chunked grammar (RFC 9112 §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
    /// A chunk-size line is next.
    Size,
    /// Inside a chunk's data: bytes still to come.
    Data(u64),
    /// The CRLF after a chunk's data is next.
    DataEnd,
    /// The trailer section (after the last, empty chunk) is next.
    Trailers,
}

/// What decoding the buffered bytes gave.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    Data(Bytes),
    Trailers(HeaderMap),
    End,
    /// More bytes must be read first.
    NeedMore,
}

impl Decoder {
    pub(super) fn new(framing: Framing) -> Self {
        match framing {
            Framing::Empty | Framing::Length(0) => Decoder::Done,
            Framing::Length(n) => Decoder::Length(n),
            Framing::Chunked => Decoder::Chunked(Chunk::Size),
            Framing::UntilClose => Decoder::UntilClose,
        }
    }

    /// Whether the body has ended (nothing more will be read).
    pub(super) fn is_done(&self) -> bool {
        matches!(self, Decoder::Done | Decoder::Length(0))
    }

    /// Decodes from the front of `buf`, taking what it uses.
    pub(super) fn step(&mut self, buf: &mut BytesMut) -> Result<Step, H1Error> {
        loop {
            match *self {
                Decoder::Done | Decoder::Length(0) => {
                    *self = Decoder::Done;
                    return Ok(Step::End);
                }
                Decoder::Length(left) => {
                    let Some(data) = take(buf, left) else {
                        return Ok(Step::NeedMore);
                    };
                    *self = Decoder::Length(left - data.len() as u64);
                    return Ok(Step::Data(data));
                }
                Decoder::UntilClose => {
                    return Ok(match take(buf, u64::MAX) {
                        Some(data) => Step::Data(data),
                        None => Step::NeedMore,
                    });
                }
                Decoder::Chunked(Chunk::Size) => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        let _ = buf.split_to(used);
                        *self = Decoder::Chunked(match size {
                            0 => Chunk::Trailers,
                            n => Chunk::Data(n),
                        });
                    }
                    Ok(httparse::Status::Partial) if buf.len() > MAX_CHUNK_LINE => {
                        return Err(H1Error::new("chunk-size line longer than 4 KiB"));
                    }
                    Ok(httparse::Status::Partial) => return Ok(Step::NeedMore),
                    Err(_) => return Err(H1Error::new("invalid chunk size in the answer body")),
                },
                Decoder::Chunked(Chunk::Data(left)) => {
                    let Some(data) = take(buf, left) else {
                        return Ok(Step::NeedMore);
                    };
                    let left = left - data.len() as u64;
                    *self = Decoder::Chunked(if left == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left)
                    });
                    return Ok(Step::Data(data));
                }
                Decoder::Chunked(Chunk::DataEnd) => {
                    if buf.len() < 2 {
                        return Ok(Step::NeedMore);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(H1Error::new("chunk data not followed by CRLF"));
                    }
                    let _ = buf.split_to(2);
                    *self = Decoder::Chunked(Chunk::Size);
                }
                Decoder::Chunked(Chunk::Trailers) => match parse_trailers(buf)? {
                    Some(trailers) => {
                        *self = Decoder::Done;
                        return Ok(if trailers.is_empty() {
                            Step::End
                        } else {
                            Step::Trailers(trailers)
                        });
                    }
                    None if buf.len() > MAX_TRAILER_BYTES => {
                        return Err(H1Error::new("trailers larger than 16 KiB"));
                    }
                    None => return Ok(Step::NeedMore),
                },
            }
        }
    }

    /// What the endpoint closing the connection now means: the end of an
    /// until-close body, a truncated body otherwise.
    pub(super) fn at_close(&mut self) -> Result<(), H1Error> {
        match self {
            Decoder::UntilClose | Decoder::Done => {
                *self = Decoder::Done;
                Ok(())
            }
            _ => Err(H1Error::new("endpoint closed the connection mid-body")),
        }
    }
}

/// Up to `most` bytes off the front of `buf`; `None` when it is empty.
fn take(buf: &mut BytesMut, most: u64) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let n = usize::try_from(most).map_or(buf.len(), |m| m.min(buf.len()));
    Some(buf.split_to(n).freeze())
}

/// A streaming answer body that owns its connection while it is read:
/// read whole, the connection goes `home` (back to the pool; `None` when
/// the answer leaves it unable to carry another request); dropped early
/// or broken, it is closed with the body, since the rest of the answer
/// would still be on it.
pub(super) struct UpstreamBody<F> {
    conn: Option<RawConn>,
    decoder: Decoder,
    home: Option<F>,
}

impl<F: FnOnce(RawConn)> UpstreamBody<F> {
    pub(super) fn new(conn: RawConn, decoder: Decoder, home: Option<F>) -> Self {
        UpstreamBody {
            conn: Some(conn),
            decoder,
            home,
        }
    }

    /// The body has ended: the connection goes home.
    fn finish(&mut self) {
        if let Some(conn) = self.conn.take() {
            give_back(conn, self.home.take());
        }
    }

    fn fail(&mut self, error: H1Error) -> ProxyFrames {
        self.conn = None;
        Poll::Ready(Some(Err(error.into())))
    }
}

impl<F: FnOnce(RawConn) + Unpin> Body for UpstreamBody<F> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> ProxyFrames {
        let this = &mut *self;
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match this.decoder.step(&mut conn.buf) {
                Err(e) => return this.fail(e),
                Ok(Step::Data(data)) => {
                    if this.decoder.is_done() {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Ok(Step::Trailers(trailers)) => {
                    this.finish();
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                Ok(Step::End) => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Ok(Step::NeedMore) => match ready!(conn.poll_fill(cx)) {
                    Ok(0) => {
                        if let Err(e) = this.decoder.at_close() {
                            return this.fail(e);
                        }
                        // Ended by the close: nothing to give back.
                        this.conn = None;
                        return Poll::Ready(None);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        return this.fail(H1Error::new(format!("reading the answer body: {e}")));
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.conn.is_none() || self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.decoder {
            Decoder::Length(left) => SizeHint::with_exact(left),
            Decoder::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decodes `input` fed in the given pieces, as reads would bring it.
    fn decode(
        mut decoder: Decoder,
        pieces: &[&[u8]],
    ) -> Result<(Vec<u8>, Option<HeaderMap>), H1Error> {
        let mut buf = BytesMut::new();
        let mut data = Vec::new();
        let mut next = pieces.iter();
        loop {
            match decoder.step(&mut buf)? {
                Step::Data(d) => data.extend_from_slice(&d),
                Step::Trailers(t) => return Ok((data, Some(t))),
                Step::End => return Ok((data, None)),
                Step::NeedMore => match next.next() {
                    Some(piece) => buf.extend_from_slice(piece),
                    None => {
                        decoder.at_close()?;
                        return Ok((data, None));
                    }
                },
            }
        }
    }

    fn chunked(chunks: &[Vec<u8>], trailer: Option<&str>) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in chunks.iter().filter(|c| !c.is_empty()) {
            out.extend_from_slice(format!("{:X};ext=1\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n");
        if let Some(t) = trailer {
            out.extend_from_slice(format!("grpc-status: {t}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    proptest! {
        /// However the reads split a chunked body, the data and trailers
        /// come out whole and in order.
        #[test]
        fn chunked_bodies_decode_whatever_the_read_boundaries(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
            trailer in proptest::option::of("[0-9]{1,2}"),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let wire = chunked(&chunks, trailer.as_deref());
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
            at.push(0);
            at.push(wire.len());
            at.sort_unstable();
            let pieces: Vec<&[u8]> = at.windows(2).map(|w| &wire[w[0]..w[1]]).collect();
            let (data, trailers) = decode(Decoder::new(Framing::Chunked), &pieces).unwrap();
            prop_assert_eq!(data, chunks.concat());
            prop_assert_eq!(trailers.map(|t| t["grpc-status"].to_str().unwrap().to_owned()), trailer);
        }

        /// A length-framed body yields exactly its length, split anyhow,
        /// and leaves what follows it in the buffer.
        #[test]
        fn length_bodies_stop_at_their_length(
            body in proptest::collection::vec(any::<u8>(), 0..500),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut wire = body.clone();
            wire.extend_from_slice(b"NEXT");
            let at = cut.index(wire.len() + 1);
            let mut decoder = Decoder::new(Framing::Length(body.len() as u64));
            let mut buf = BytesMut::from(&wire[..at]);
            let mut data = Vec::new();
            let mut fed = false;
            loop {
                match decoder.step(&mut buf).unwrap() {
                    Step::Data(d) => data.extend_from_slice(&d),
                    Step::End => break,
                    Step::NeedMore if !fed => { buf.extend_from_slice(&wire[at..]); fed = true; }
                    other => panic!("unexpected {other:?}"),
                }
            }
            prop_assert!(wire[body.len()..].starts_with(&buf));
            prop_assert_eq!(data, body);
        }
    }

    #[test]
    fn a_body_cut_short_is_an_error_but_an_until_close_body_ends_at_the_close() {
        assert!(decode(Decoder::new(Framing::Length(5)), &[b"abc"]).is_err());
        assert!(decode(Decoder::new(Framing::Chunked), &[b"5\r\nab"]).is_err());
        let (data, _) = decode(Decoder::new(Framing::UntilClose), &[b"ab", b"cd"]).unwrap();
        assert_eq!(data, b"abcd");
    }

    #[test]
    fn broken_chunked_framing_is_refused() {
        let err = |wire: &[u8]| {
            decode(Decoder::new(Framing::Chunked), &[wire])
                .unwrap_err()
                .to_string()
        };
        assert!(err(b"zz\r\n").contains("invalid chunk size"));
        assert!(err(b"2\r\nabXY0\r\n\r\n").contains("CRLF"));
        assert!(err(b"12345678901234567\r\n").contains("invalid chunk size"));
        let long_extension = [b"5;".as_slice(), &[b'x'; MAX_CHUNK_LINE]].concat();
        assert!(err(&long_extension).contains("4 KiB"));
    }
}
