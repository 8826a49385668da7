//! Answering a request head the proxy refuses before serving it: a
//! malformed or oversized head (see [`Malformed`]), on whichever path
//! read it — the proxy's own HTTP/1.1 loop, or hyper's connection through
//! the smuggling guard.
//!
//! The answer is the proxy's labelled refusal (`x-tripline-rejected:
//! protocol_error`, flag `DPE`) with `connection: close`; it is counted
//! as the refusals the request path makes are (no route: `route=""`) and
//! logged, rate-limited ([`log::refused`]). The caller then closes the
//! connection gracefully, so the answer is not lost to a reset.

use std::time::Duration;

use tokio::io::AsyncWrite;

use crate::data::Ctx;
use crate::data::forward::Downstream;
use crate::data::server::h1_fast::write_answer;
use crate::data::smuggling::Malformed;
use crate::http::rejection::{Reason, log};

/// How long the refusal may take to be written: the socket's send buffer
/// takes it at once unless the client stopped reading, which is no reason
/// to hold the connection.
const WRITE_TIME: Duration = Duration::from_secs(1);

/// Counts, logs and writes the refusal of `malformed`; `false` when it
/// could not be written (the connection is then only dropped).
pub(super) async fn refuse<S: AsyncWrite + Unpin>(
    io: &mut S,
    malformed: Malformed,
    inner: &Ctx,
    peer: &Downstream,
) -> bool {
    let mut response = malformed.response();
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    inner.metrics.observe(None, &response);
    log::refused(peer.peer, Reason::ProtocolError, malformed.what());
    let mut out = Vec::with_capacity(512);
    let written = write_answer(io, &mut out, response, false);
    matches!(tokio::time::timeout(WRITE_TIME, written).await, Ok(Ok(_)))
}

/// Counts and logs a head hyper refused itself (its own bare 400, 414
/// or 431, already written): one the guard did not judge, after a chunked
/// body on the same connection.
pub(super) fn count_refused_by_hyper(inner: &Ctx, peer: &Downstream) {
    let malformed = Malformed::Bad("a head hyper could not parse");
    inner.metrics.observe(None, &malformed.response());
    log::refused(peer.peer, Reason::ProtocolError, malformed.what());
}
