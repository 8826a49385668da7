//! An upstream the soak can make healthy, slow, failing or resetting, and
//! kill and restart on the same port.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the upstream does with each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    Healthy = 0,
    /// Answers 200 after 30 ms.
    Slow = 1,
    /// Answers 503.
    Failing = 2,
    /// Drops the connection without answering.
    Resetting = 3,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Healthy, Mode::Slow, Mode::Failing, Mode::Resetting];
}

/// The failback payloads an upstream answered 200, shared by the soak's
/// upstreams: what "delivered" means at the receiving end.
pub type Received = Arc<Mutex<HashSet<Vec<u8>>>>;

/// The path the soak's failback queue delivers to.
pub const FAILBACK_PATH: &str = "/soak/failback";

pub struct Upstream {
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    received: Received,
    /// Bumped on kill: every connection task watching it drops its socket.
    generation: watch::Sender<u64>,
    accept: Option<JoinHandle<()>>,
}

impl Upstream {
    /// An upstream that adds the failback payloads it answers 200 to `received`.
    pub async fn start(received: Received) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut up = Upstream {
            addr,
            mode: Arc::new(AtomicU8::new(Mode::Healthy as u8)),
            received,
            generation: watch::channel(0).0,
            accept: None,
        };
        up.serve(listener);
        up
    }

    pub fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    pub fn is_up(&self) -> bool {
        self.accept.is_some()
    }

    /// Stops accepting and cuts every open connection, as a crash would.
    pub fn kill(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
        self.generation.send_modify(|g| *g += 1);
    }

    /// Listens again on the same address.
    pub async fn restart(&mut self) {
        if self.accept.is_some() {
            return;
        }
        // The port was ours a moment ago; a bind can still race a lingering
        // socket, so retry a few times.
        for _ in 0..50 {
            if let Ok(listener) = TcpListener::bind(self.addr).await {
                self.serve(listener);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("cannot listen on {} again", self.addr);
    }

    fn serve(&mut self, listener: TcpListener) {
        let mode = self.mode.clone();
        let received = self.received.clone();
        let generation = self.generation.clone();
        self.accept = Some(tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let mode = mode.clone();
                let received = received.clone();
                let mut killed = generation.subscribe();
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let mode = mode.load(Ordering::SeqCst);
                    let received = received.clone();
                    let failback = req.uri().path() == FAILBACK_PATH;
                    async move {
                        let body = req.into_body().collect().await.map(|b| b.to_bytes());
                        let status = match mode {
                            m if m == Mode::Slow as u8 => {
                                tokio::time::sleep(Duration::from_millis(30)).await;
                                200
                            }
                            m if m == Mode::Failing as u8 => 503,
                            m if m == Mode::Resetting as u8 => return Err("reset"),
                            _ => 200,
                        };
                        if let (true, 200, Ok(body)) = (failback, status, body) {
                            received.lock().unwrap().insert(body.to_vec());
                        }
                        let mut response =
                            hyper::Response::new(Full::new(Bytes::from_static(b"ok")));
                        *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                        Ok(response)
                    }
                });
                tokio::spawn(async move {
                    let conn =
                        http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {}
                        _ = killed.changed() => {}
                    }
                });
            }
        }));
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.kill();
    }
}
