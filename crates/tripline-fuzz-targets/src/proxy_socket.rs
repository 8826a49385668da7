//! Arbitrary bytes on a socket to a running in-process proxy.
//!
//! One proxy (and one upstream behind it) is started on 127.0.0.1 the
//! first time the target runs and serves every input after, as a
//! long-lived sidecar would. For each input the target connects, writes
//! the bytes, half-closes and reads until the proxy closes. The proxy
//! must answer or close within [`BOUND`] — never hang — and must never
//! panic, not even in a task of its own: a panic hook counts panics
//! anywhere in the process, so one that tokio would swallow in a
//! connection task still fails the input. After each input a plain
//! request must still be served, so an input that wedges the accept loop
//! or poisons shared state is caught on the input that did it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tripline::ManualClock;
use tripline_proxy::config::ProxyConfig;
use tripline_proxy::{Proxy, Running};

/// How long the proxy has to answer or close one input's connection.
pub const BOUND: Duration = Duration::from_secs(10);

static PANICS: AtomicUsize = AtomicUsize::new(0);

struct Harness {
    runtime: Runtime,
    addr: SocketAddr,
    // Kept so the proxy keeps serving for the life of the process.
    _serving: Mutex<(Proxy, Running)>,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("no tokio runtime: {e}"));
        let (addr, serving) = runtime.block_on(start());
        Harness {
            runtime,
            addr,
            _serving: Mutex::new(serving),
        }
    })
}

/// An upstream that reads the whole request and answers 200, and a proxy
/// in front of it with retries, deadlines and a keyed route, so inputs
/// reach the code that reads headers for those.
async fn start() -> (SocketAddr, (Proxy, Running)) {
    let upstream = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("cannot bind the upstream: {e}"));
    let upstream_addr = upstream
        .local_addr()
        .unwrap_or_else(|e| panic!("no upstream address: {e}"));
    tokio::spawn(async move {
        while let Ok((stream, _)) = upstream.accept().await {
            let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                let _ = req.into_body().collect().await;
                Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                    Bytes::from_static(b"ok"),
                )))
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    let config = format!(
        r#"
[proxy]
header_read_timeout = "300ms"

[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "keyed"
cluster = "backend"
match = {{ path_prefix = "/keyed" }}
breaker = {{ minimum_calls = 5 }}
timeout = {{ overall = "300ms" }}
breaker_key = {{ header = "x-tenant" }}

[[routes]]
name = "api"
cluster = "backend"
retry = {{ attempts = 3, retryable = true }}
timeout = {{ overall = "300ms", honour_incoming = true }}

[clusters.backend]
endpoints = ["{upstream_addr}"]
"#
    );
    let config = ProxyConfig::from_toml(&config).unwrap_or_else(|e| panic!("harness config: {e}"));
    let proxy = Proxy::builder(config)
        .clock(ManualClock::new())
        .build()
        .unwrap_or_else(|e| panic!("harness proxy: {e}"));
    let running = proxy
        .start()
        .await
        .unwrap_or_else(|e| panic!("harness proxy does not start: {e}"));
    let addr = running.local_addrs()[0];
    (addr, (proxy, running))
}

/// How long the connection must stay quiet after the proxy's first
/// answer bytes before the answer counts as complete (a kept-alive
/// connection is not closed after answering).
const QUIET: Duration = Duration::from_millis(50);

/// How long the proxy may stay silent before the harness half-closes:
/// longer than the harness's header-read and request timeouts (300 ms),
/// so a request the bytes completed has been answered by then.
const SILENT: Duration = Duration::from_secs(1);

/// Writes `bytes` and reads until the proxy closes, or until it answered
/// and then went quiet; `None` if it neither answered nor closed within
/// [`BOUND`].
///
/// The write side stays open at first: hyper drops a connection whose
/// client half-closes before the answer, which would hide everything past
/// the parser. An input that stops mid-request is answered by the
/// harness's short header-read and request timeouts. Only when the proxy
/// stays silent for [`SILENT`] (it waits for a next request that never
/// comes — the proxy has no idle timeout) does the harness half-close,
/// and then the proxy must close.
async fn exchange(addr: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("the proxy refuses connections: {e}"));
    // The proxy may close before reading everything (a refused request):
    // a failed write is its answer, not an error of the target.
    let _ = stream.write_all(bytes).await;
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut half_closed = false;
    loop {
        let wait = match (answer.is_empty(), half_closed) {
            (false, _) => QUIET,
            (true, false) => SILENT,
            (true, true) => BOUND,
        };
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Some(answer), // closed, cleanly or by reset
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) if !answer.is_empty() => return Some(answer), // answered, kept alive
            Err(_) if half_closed => return None,
            Err(_) => {
                let _ = stream.shutdown().await;
                half_closed = true;
            }
        }
    }
}

/// Feeds `data` to the proxy as one connection's bytes.
pub fn proxy_request(data: &[u8]) {
    let h = harness();
    let panics = PANICS.load(Ordering::SeqCst);
    let answered = h.runtime.block_on(exchange(h.addr, data));
    assert!(
        answered.is_some(),
        "the proxy neither answered nor closed within {BOUND:?}"
    );
    let plain = b"GET /after HTTP/1.1\r\nhost: fuzz\r\nconnection: close\r\n\r\n";
    let after = h
        .runtime
        .block_on(exchange(h.addr, plain))
        .unwrap_or_else(|| panic!("the proxy stopped answering after this input"));
    assert!(
        after.starts_with(b"HTTP/1.1 200"),
        "a plain request after this input got: {}",
        String::from_utf8_lossy(&after)
    );
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        panics,
        "the proxy panicked on this input"
    );
}
