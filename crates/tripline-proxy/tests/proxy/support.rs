//! Real upstreams, a real proxy and a real client on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tripline::ManualClock;
use tripline_proxy::config::ProxyConfig;
use tripline_proxy::{Proxy, Running};

/// Every wait in these tests is bounded by this.
pub const BOUND: Duration = Duration::from_secs(10);

/// A hyper upstream answering with `answer`, counting requests.
pub struct Upstream {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
    /// Every request's body, in arrival order.
    pub bodies: Arc<Mutex<Vec<Bytes>>>,
}

impl Upstream {
    pub async fn start<F>(answer: F) -> Upstream
    where
        F: Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let answer = Arc::new(answer);
        let counted = hits.clone();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let answer = answer.clone();
                let hits = counted.clone();
                let kept = kept.clone();
                let service = service_fn(move |req: Request<Incoming>| {
                    hits.fetch_add(1, Ordering::SeqCst);
                    let response = answer(&req);
                    let kept = kept.clone();
                    async move {
                        // Read the whole request before answering.
                        if let Ok(body) = req.into_body().collect().await {
                            kept.lock().unwrap().push(body.to_bytes());
                        }
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
            }
        });
        Upstream { addr, hits, bodies }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A raw TCP upstream: `on_connection` gets every accepted socket.
pub async fn raw_upstream<F, Fut>(on_connection: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(on_connection(stream));
        }
    });
    addr
}

/// An endpoint that accepts connections and never reads from them: an
/// upload to it fills the sockets' buffers until its receive window closes.
pub async fn unreading_upstream() -> SocketAddr {
    raw_upstream(|stream| async move {
        std::future::pending::<()>().await;
        drop(stream);
    })
    .await
}

/// POSTs a body of `size` bytes to `addr` from a task of its own and
/// returns the start of the answer, read within [`BOUND`]. The client is
/// gone once this returns (a connection left open would make the proxy's
/// drain wait out its lingering close).
pub async fn upload_and_read_answer(addr: SocketAddr, size: usize) -> String {
    let (mut reader, mut writer) = TcpStream::connect(addr).await.unwrap().into_split();
    let upload = tokio::spawn(async move {
        let head = format!("POST /doc HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n");
        writer.write_all(head.as_bytes()).await?;
        writer.write_all(&vec![b'x'; size]).await
    });
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(BOUND, reader.read(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    upload.abort();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

/// `text` (a config) with `lines` in a `[proxy]` section of its own.
pub fn with_proxy_section(text: &str, lines: &str) -> String {
    text.replacen(
        "[[listeners]]",
        &format!("[proxy]\n{lines}\n\n[[listeners]]"),
        1,
    )
}

/// Starts a proxy from `text` (whose cluster `backend` has one endpoint
/// that never reads) with a 300 ms `upstream_stall_timeout`, uploads
/// more than the sockets hold, and checks the try was given up as the
/// endpoint's failure (502), though no route timeout bounds it.
pub async fn assert_given_up_after_the_stall_timeout(text: &str) {
    let text = with_proxy_section(text, "upstream_stall_timeout = \"300ms\"");
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let answer = upload_and_read_answer(addr, 64 << 20).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    let cluster = proxy.cluster("backend").unwrap();
    let calls = cluster.endpoints()[0].breaker().metrics().calls;
    assert_eq!(calls.failed, 1, "{calls:?}");
    running.shutdown().await;
}

pub fn respond(status: u16, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r
}

/// A proxy from `config` on a manual clock, serving on a free port.
pub async fn start_proxy(config: &str) -> (Proxy, Running, SocketAddr, ManualClock) {
    let config = ProxyConfig::from_toml(config).unwrap();
    let clock = ManualClock::new();
    let proxy = Proxy::builder(config).clock(clock.clone()).build().unwrap();
    let running = proxy.start().await.unwrap();
    let addr = running.local_addrs()[0];
    (proxy, running, addr, clock)
}

/// A config with one listener, one route `api` over cluster `backend`.
pub fn config(endpoints: &[SocketAddr], route: &str, cluster: &str) -> String {
    let endpoints: Vec<String> = endpoints.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n{route}\n\n[clusters.backend]\nendpoints = [{}]\n{cluster}\n",
        endpoints.join(", ")
    )
}

/// The client's view of one answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// Sends `req` through the proxy at `proxy`, bounded by [`BOUND`].
pub async fn send(proxy: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    send_body(proxy, method, path, headers, Bytes::new()).await
}

/// Like [`send`], with a request body.
pub async fn send_body(
    proxy: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Answer {
    let mut builder = Request::builder()
        .method(method)
        .uri(format!("http://{proxy}{path}"));
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let req = builder.body(Full::new(body)).unwrap();
    let response = tokio::time::timeout(BOUND, client().request(req))
        .await
        .expect("the proxy answers")
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = tokio::time::timeout(BOUND, response.into_body().collect())
        .await
        .expect("the body ends")
        .unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body.to_bytes()).into_owned(),
    }
}

pub async fn get(proxy: SocketAddr, path: &str) -> Answer {
    send(proxy, "GET", path, &[]).await
}

/// An upstream that reports each request and answers when released.
pub async fn held_upstream(
    release: Arc<tokio::sync::Notify>,
) -> (SocketAddr, tokio::sync::mpsc::Receiver<()>) {
    let (arrived, arrivals) = tokio::sync::mpsc::channel(8);
    let addr = raw_upstream(move |mut s| {
        let release = release.clone();
        let arrived = arrived.clone();
        async move {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = arrived.send(()).await;
            release.notified().await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\ndone")
                .await;
        }
    })
    .await;
    (addr, arrivals)
}

/// An `[admin]` section on a free port, to append to a config.
pub const ADMIN_SECTION: &str = "\n[admin]\naddress = \"127.0.0.1:0\"\n";

/// A JSON request to the admin listener.
pub async fn admin_json(admin: SocketAddr, method: &str, path: &str, json: &str) -> Answer {
    let body = Bytes::from(json.to_owned());
    send_body(
        admin,
        method,
        path,
        &[("content-type", "application/json")],
        body,
    )
    .await
}

/// The value of the metric series whose line starts with `series`, in a
/// plain-text scrape of the admin listener.
pub async fn metric(admin: SocketAddr, series: &str) -> Option<f64> {
    let text = send(admin, "GET", "/metrics", &[("accept", "text/plain")])
        .await
        .body;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// The breaker of endpoint `endpoint` in the cluster `backend` of
/// [`config`].
pub fn endpoint_breaker(proxy: &Proxy, endpoint: SocketAddr) -> tripline::CircuitBreaker {
    proxy
        .cluster("backend")
        .unwrap()
        .endpoint(&endpoint.to_string())
        .unwrap()
        .breaker()
        .clone()
}

/// Reads from `stream` until `seen` holds a whole request head, then
/// takes that head out of `seen`; `false` once the client has closed
/// (or the read failed). What raw upstreams use to answer request by
/// request.
pub async fn read_request_head(stream: &mut TcpStream, seen: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            seen.drain(..at + 4);
            return true;
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// What the proxy logs while the returned guard lives, on this thread
/// (the tests' runtime is single-threaded: the proxy's tasks run here).
pub fn capture_logs() -> (Arc<Mutex<Vec<u8>>>, tracing::subscriber::DefaultGuard) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let writer = Captured(lines.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    (lines, tracing::subscriber::set_default(subscriber))
}

#[derive(Clone)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The lines captured so far.
pub fn logged(lines: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&lines.lock().unwrap()).into_owned()
}
