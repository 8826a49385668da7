//! A client's request body given up once it has sent nothing for
//! `[proxy] client_body_timeout`.
//!
//! A route without a timeout would otherwise hold an upload that stalls
//! — and the client's socket and the endpoint's with it — for ever
//! (nginx gives up after its `client_body_timeout`, 60 s; HAProxy after
//! its `timeout client`). The wait counted is the client's only: from
//! the moment the body is asked for a frame the client has not sent, to
//! that frame. While the endpoint is slow to take what it was sent
//! (backpressure: the body is not asked), nothing is counted.
//!
//! Giving up ends the body with [`ClientBodyTimedOut`]: the try sending
//! it fails and is settled as the client's fault (the body is watched by
//! [`watch`](super::watch), which tells this error apart), the upstream
//! request is dropped, and the client is answered `408` with
//! `x-tripline-rejected: client_timeout` when no answer has begun.
//!
//! One timer per body, armed at the first wait and re-armed only when it
//! fires before the wait it guards is due: a body arriving in many frames
//! pays a clock read per wait, not a timer reset.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::Body;
use http_body_util::BodyExt;
use tokio::time::{Instant, Sleep};

use super::{BoxError, Inspect, Inspected, ProxyBody, ProxyFrames};
use crate::http::rejection::{Reason, log};

/// The error a body given up for its client's silence ends with.
#[derive(Debug)]
pub(crate) struct ClientBodyTimedOut(Duration);

impl std::fmt::Display for ClientBodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the client sent no body bytes for {:?}", self.0)
    }
}

impl std::error::Error for ClientBodyTimedOut {}

/// `body`, ended with [`ClientBodyTimedOut`] once it has kept its reader
/// waiting `timeout` for a frame; `client` is named in the log line. A
/// body already at its end is returned as it is (no timer, no
/// allocation).
pub(crate) fn give_up_when_idle(
    body: ProxyBody,
    timeout: Duration,
    client: SocketAddr,
) -> ProxyBody {
    if body.is_end_stream() {
        return body;
    }
    let gives_up = GivesUp {
        timeout,
        client,
        waiting_since: None,
        timer: None,
    };
    Inspected::wrap(body, gives_up).boxed()
}

/// Counts the reader's waits, and ends the body when one lasts `timeout`.
struct GivesUp {
    timeout: Duration,
    client: SocketAddr,
    /// When the reader began waiting for the frame it asked for.
    waiting_since: Option<Instant>,
    /// Armed at the first wait; boxed, as a `Sleep` is not `Unpin`.
    timer: Option<Pin<Box<Sleep>>>,
}

impl Inspect<ProxyBody> for GivesUp {
    type Error = BoxError;

    fn inspect(&mut self, _: &ProxyBody, polled: ProxyFrames, cx: &mut Context<'_>) -> ProxyFrames {
        if polled.is_ready() {
            self.waiting_since = None;
            return polled;
        }
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        let due = since + self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= due {
                let what = format!("its request body sent nothing for {:?}", self.timeout);
                log::refused(self.client, Reason::ClientTimeout, &what);
                return Poll::Ready(Some(Err(Box::new(ClientBodyTimedOut(self.timeout)))));
            }
            timer.as_mut().reset(due);
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;
    use http_body::Frame;

    use super::*;
    use crate::http::body::full;

    /// A body that sends `parts` bytes, each after `gap`, then stalls.
    struct Trickle {
        parts: usize,
        gap: Duration,
        next: Pin<Box<Sleep>>,
    }

    impl Body for Trickle {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> ProxyFrames {
            if self.parts == 0 || self.next.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.parts -= 1;
            let next = Instant::now() + self.gap;
            self.next.as_mut().reset(next);
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
        }
    }

    fn trickle(parts: usize, gap: Duration) -> ProxyBody {
        let next = Box::pin(tokio::time::sleep(gap));
        Trickle { parts, gap, next }.boxed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_is_given_up_only_after_a_whole_timeout_without_a_byte() {
        let client: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let timeout = Duration::from_millis(200);
        // Ten bytes 150 ms apart: never idle for 200 ms, then silent.
        let start = Instant::now();
        let mut body = give_up_when_idle(trickle(10, Duration::from_millis(150)), timeout, client);
        let mut frames = 0;
        let err = loop {
            match body.frame().await.unwrap() {
                Ok(_) => frames += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(frames, 10);
        assert!(err.is::<ClientBodyTimedOut>(), "{err}");
        assert_eq!(start.elapsed(), Duration::from_millis(1_700));
    }

    #[test]
    fn a_body_at_its_end_is_not_wrapped() {
        let client: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let body = give_up_when_idle(full(""), Duration::from_secs(1), client);
        assert!(body.is_end_stream());
    }
}
