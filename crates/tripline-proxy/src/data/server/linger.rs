//! Closing a client connection so that the client can read its last
//! answer.
//!
//! A socket closed while the client's bytes still wait unread in it is
//! not closed with a FIN but reset, and a reset makes the client's kernel
//! throw away what it had received and not yet handed to the client: the
//! `400` for a malformed request (sent with the rest of the request still
//! unread), or the answer to a request whose connection is closing, is
//! lost, and the client sees "connection reset" instead. So the proxy
//! closes as nginx's `lingering_close` does: its side first (a FIN, after
//! the answer), then it reads and discards what the client still sends
//! until the client closes too, within [`LINGER_TIME`] and
//! [`LINGER_BYTES`], or until the drain's cut.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use crate::http::drain::{CUT, reached};

/// The longest a closing connection waits for the client to close its
/// side (nginx waits up to 5 s between reads and 30 s in all; a client
/// that has read its answer closes at once, so a short bound only limits
/// what a client that never closes can hold).
const LINGER_TIME: Duration = Duration::from_secs(2);

/// The most a closing connection reads and discards.
const LINGER_BYTES: usize = 256 * 1024;

/// Shuts `io`'s sending side down, then discards what the client still
/// sends until it closes, [`LINGER_TIME`] passes, [`LINGER_BYTES`] have
/// been read, or `stop` reaches the cut; the caller then drops `io`.
pub(crate) async fn linger<S>(io: &mut S, stop: &mut watch::Receiver<u8>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let closing = async {
        if io.shutdown().await.is_err() {
            return; // reset or gone already: nothing left to protect
        }
        // On the heap, and only now: an array here would sit in every
        // connection's task for its whole life (the task is as large as
        // its largest state), 4 KiB of each idle connection's memory.
        let mut sink = vec![0u8; 4096];
        let mut left = LINGER_BYTES;
        while left > 0 {
            match io.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(LINGER_TIME, closing) => {}
        _ = reached(stop, CUT) => {}
    }
}
