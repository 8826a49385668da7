//! The hostile-client suite: what a client that means harm (or is
//! badly broken) can send, and what the proxy must do about it.
//!
//! - [`malformed`]: request smuggling and malformed heads, on the
//!   bodiless fast path and on hyper's, refused `400` with
//!   `x-tripline-rejected: protocol_error`, counted (`4xx`, `DPE`) and
//!   logged;
//! - [`limits`]: heads over `[proxy] max_header_bytes` (`414` for a long
//!   request line, `431` for a long head), header floods;
//! - [`slow`]: slowloris heads (`408` at the header read timeout),
//!   stalled and crawling uploads (`408` at `client_body_timeout`, the
//!   deadline), an endpoint that stops reading;
//! - [`abandoned`]: requests whose client goes away while the endpoint
//!   is silent, on every path (HTTP/1.1 GET, POST, HTTP/2), cancelled at
//!   once with both sockets closed and nothing charged;
//! - [`resources`]: a mix of all of the above, after which the proxy
//!   serves a healthy request, holds no socket of theirs, and its memory
//!   is back near where it was.
//!
//! Every case ends with the proxy still serving healthy requests. Every
//! wait is bounded ([`BOUND`]); waits for the proxy to let a socket go
//! watch the kernel's socket table ([`held_sockets`]) under a deadline.

mod abandoned;
mod limits;
mod malformed;
mod resources;
mod slow;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Sends raw bytes and reads what comes back until the proxy closes.
async fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(BOUND, stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the proxy closes the connection");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Asserts that `answer` (to `request`) is the proxy's own refusal of a
/// malformed request, with `status`.
fn assert_refused(request: &[u8], answer: &str, status: u16) {
    let request = String::from_utf8_lossy(&request[..request.len().min(120)]);
    let short = &answer[..answer.len().min(300)];
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status}")),
        "{request:?}: {short}"
    );
    assert!(
        answer.contains("x-tripline-rejected: protocol_error"),
        "{request:?}: {short}"
    );
    assert!(
        answer.contains("x-tripline-flag: DPE"),
        "{request:?}: {short}"
    );
}

/// Asserts that `answer` (to `request`) is the proxy's own 400 for a
/// malformed request.
fn assert_protocol_error(request: &[u8], answer: &str) {
    assert_refused(request, answer, 400);
}

/// Breakers that open after two failures in four calls.
const TOUCHY: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 2, failure_rate_threshold = 0.5, open_duration = "10s" }"#;

/// TCP sockets in the kernel's table, on 127.0.0.1, that are open on
/// the proxy's side and still hold a descriptor there: accepted from a
/// client on `listening` (local port), or connected by the proxy to
/// `upstream` (remote port), established or closed by the peer only
/// (`CLOSE_WAIT`: the proxy has not let go). Exact for these tests,
/// whatever else the test process has open: ports are not shared.
fn held_sockets(listening: u16, upstream: Option<u16>) -> usize {
    let table = std::fs::read_to_string("/proc/self/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = |f: &str| u16::from_str_radix(f.rsplit(':').next().unwrap(), 16).unwrap();
            let (local, remote, state) = (port(fields[1]), port(fields[2]), fields[3]);
            // 01 ESTABLISHED, 08 CLOSE_WAIT.
            (state == "01" || state == "08")
                && (local == listening || upstream.is_some_and(|u| remote == u))
        })
        .count()
}

/// Waits until `held_sockets(listening, upstream)` is `want`, watching
/// the socket table every few milliseconds up to [`BOUND`]; the count
/// seen last otherwise.
async fn sockets_settle(listening: u16, upstream: Option<u16>, want: usize) -> usize {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let held = held_sockets(listening, upstream);
        if held == want || tokio::time::Instant::now() >= deadline {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// This process's resident anonymous memory (its heap and stacks, not
/// the pages of its own binary it has touched), KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A proxy config with an `[admin]` listener and `proxy` lines in its
/// `[proxy]` section, over `upstream`.
fn config_with_admin(upstream: SocketAddr, route: &str, proxy: &str) -> String {
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream], route, ""));
    match proxy.is_empty() {
        true => text,
        false => with_proxy_section(&text, proxy),
    }
}

/// The answers counted for requests no route took: (4xx, DPE).
async fn unrouted_refusals(admin: SocketAddr) -> (f64, f64) {
    let class = metric(
        admin,
        "tripline_proxy_requests_total{route=\"\",code_class=\"4xx\"}",
    )
    .await;
    let flag = metric(
        admin,
        "tripline_proxy_refusals_total{route=\"\",flag=\"DPE\"}",
    )
    .await;
    (class.unwrap_or(0.0), flag.unwrap_or(0.0))
}
