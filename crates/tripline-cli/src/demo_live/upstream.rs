//! The two in-process upstreams of `tripline demo --live`: plain hyper
//! servers whose behaviour the script switches at run time.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// What an upstream does with each request; switched by the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Behaviour {
    /// 200 at once.
    Healthy = 0,
    /// 503 at once: a service that is up but failing every request, the
    /// way a dead dependency behind it looks from the proxy.
    Down = 1,
    /// 200 after [`SLOW_ANSWER`]: above the breakers' slow-call duration.
    Slow = 2,
}

/// How long a slow upstream takes. Above the demo's slow-call duration
/// (150 ms) and well below its per-try timeout (1 s), so slow calls are
/// judged slow, not failed.
pub(crate) const SLOW_ANSWER: Duration = Duration::from_millis(300);

/// A running upstream: its address and the switch of its behaviour.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    behaviour: Arc<AtomicU8>,
}

impl Upstream {
    /// Binds 127.0.0.1:0 and serves until the runtime ends.
    pub(crate) async fn start(label: &'static str) -> std::io::Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let behaviour = Arc::new(AtomicU8::new(Behaviour::Healthy as u8));
        let switch = behaviour.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let switch = switch.clone();
                let service = service_fn(move |_req| {
                    let now = switch.load(Ordering::Relaxed);
                    answer(label, now)
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
            }
        });
        Ok(Upstream { addr, behaviour })
    }

    /// Switches what the upstream does with the next requests.
    pub(crate) fn set(&self, behaviour: Behaviour) {
        self.behaviour.store(behaviour as u8, Ordering::Relaxed);
    }
}

async fn answer(label: &'static str, behaviour: u8) -> Result<Response<Full<Bytes>>, Infallible> {
    let status = if behaviour == Behaviour::Down as u8 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        if behaviour == Behaviour::Slow as u8 {
            tokio::time::sleep(SLOW_ANSWER).await;
        }
        StatusCode::OK
    };
    let mut response = Response::new(Full::new(Bytes::from(format!("upstream {label}\n"))));
    *response.status_mut() = status;
    Ok(response)
}
