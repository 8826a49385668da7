//! In-process upstreams for drills run in CI: healthy HTTP/1.1 servers on
//! 127.0.0.1 answering 200 after a fixed latency. Faults come from the
//! proxy's injection, so the upstreams themselves stay simple and honest.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// Running upstreams; dropping this stops them.
pub(crate) struct Upstreams {
    _tasks: JoinSet<()>,
}

impl Upstreams {
    /// Starts one server per `(name, latency)`; their bound addresses by name.
    pub(crate) async fn start(
        specs: impl IntoIterator<Item = (String, Duration)>,
    ) -> std::io::Result<(Upstreams, Vec<(String, SocketAddr)>)> {
        let mut tasks = JoinSet::new();
        let mut addrs = Vec::new();
        for (name, latency) in specs {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            addrs.push((name, listener.local_addr()?));
            tasks.spawn(serve(listener, latency));
        }
        Ok((Upstreams { _tasks: tasks }, addrs))
    }
}

async fn serve(listener: TcpListener, latency: Duration) {
    // Connections are detached tasks: they end with the runtime or when
    // the proxy closes them.
    while let Ok((stream, _)) = listener.accept().await {
        let service = service_fn(move |_req: Request<Incoming>| async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok\n"))))
        });
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
