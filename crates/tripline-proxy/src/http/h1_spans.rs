//! HTTP/1 header lines located in a message head, then built into a
//! `HeaderMap` whose values share the head's bytes.
//!
//! `httparse` hands back slices borrowed from the read buffer, which must
//! be split (to keep what follows the head) before the values can share
//! it. Noting each line's offsets first — on the stack, as hyper does —
//! lets the head be split off and frozen, then every value be a cheap
//! slice of it: no copy of a value, no allocation for the offsets.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The most header lines a head may carry (hyper's own default).
pub(crate) const MAX_HEADERS: usize = 100;

/// Where one header line's name and value sit in a head. Offsets fit in
/// `u32`: heads are bounded far below 4 GiB by their readers.
#[derive(Clone, Copy, Default)]
pub(crate) struct Span {
    name: (u32, u32),
    value: (u32, u32),
}

/// Room for a head's spans.
pub(crate) type Spans = [Span; MAX_HEADERS];

/// Where `part`, a slice `httparse` borrowed from `buf`, sits in `buf`:
/// so that it can be taken from the head once the head is split off and
/// frozen, sharing its bytes.
pub(crate) fn range_in(buf: &[u8], part: &[u8]) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - buf.as_ptr() as usize;
    start..start + part.len()
}

/// Notes where each of `lines` (parsed from `buf`) sits in `buf`;
/// returns how many were noted.
pub(crate) fn locate(buf: &[u8], lines: &[httparse::Header<'_>], spans: &mut Spans) -> usize {
    let base = buf.as_ptr() as usize;
    let at = |s: &[u8]| ((s.as_ptr() as usize - base) as u32, s.len() as u32);
    for (span, line) in spans.iter_mut().zip(lines) {
        *span = Span {
            name: at(line.name.as_bytes()),
            value: at(line.value),
        };
    }
    lines.len().min(MAX_HEADERS)
}

/// The header map of `head` (the bytes the spans were located in, split
/// off and frozen), each line shown to `note` as it is added. `Err`
/// names the line that is not a valid header.
pub(crate) fn header_map(
    head: &Bytes,
    spans: &[Span],
    mut note: impl FnMut(&HeaderName, &[u8]),
) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::with_capacity(spans.len());
    let range = |(start, len): (u32, u32)| start as usize..(start + len) as usize;
    for span in spans {
        let raw = &head[range(span.name)];
        let name = HeaderName::from_bytes(raw).map_err(|_| {
            format!(
                "invalid header name {:?}",
                String::from_utf8_lossy(raw).into_owned()
            )
        })?;
        let value = HeaderValue::from_maybe_shared(head.slice(range(span.value)))
            .map_err(|_| format!("invalid value of header {name}"))?;
        note(&name, value.as_bytes());
        headers.append(name, value);
    }
    Ok(headers)
}
