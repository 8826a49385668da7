//! The seeded random fault schedule: one event per step, drawn from
//! killing or restarting an upstream, changing how it answers, reloading
//! the config, forcing the route breaker open (reset at the next step)
//! and injecting a fault with a TTL through the admin API.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tripline_proxy::Proxy;

use crate::upstream::{Mode, Upstream};

/// How many of each event the schedule ran.
#[derive(Debug, Default)]
pub struct Events {
    pub kills: u32,
    pub restarts: u32,
    pub mode_changes: u32,
    pub reloads: u32,
    pub forced_open: u32,
    pub admin_faults: u32,
}

impl fmt::Display for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "events: {} kills, {} restarts, {} mode changes, {} reloads, {} forced opens, {} admin faults",
            self.kills,
            self.restarts,
            self.mode_changes,
            self.reloads,
            self.forced_open,
            self.admin_faults
        )
    }
}

pub struct Schedule {
    rng: u64,
    admin: SocketAddr,
    forced: bool,
    attempts: u32,
    events: Events,
}

impl Schedule {
    pub fn new(seed: u64, admin: SocketAddr) -> Schedule {
        Schedule {
            rng: seed | 1,
            admin,
            forced: false,
            attempts: 2,
            events: Events::default(),
        }
    }

    /// xorshift64: reproducible from the seed, nothing to install.
    fn next(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n
    }

    pub async fn step(&mut self, proxy: &Proxy, upstreams: &mut [Upstream; 2]) {
        let breaker = proxy.route_breaker("api").unwrap();
        if self.forced {
            breaker.reset();
            self.forced = false;
            return;
        }
        let which = self.next(2) as usize;
        match self.next(10) {
            0 | 1 => {
                let up = &mut upstreams[which];
                if up.is_up() {
                    up.kill();
                    self.events.kills += 1;
                } else {
                    up.restart().await;
                    self.events.restarts += 1;
                }
            }
            2..=4 => {
                upstreams[which].set_mode(Mode::ALL[self.next(4) as usize]);
                self.events.mode_changes += 1;
            }
            5 => {
                self.attempts = if self.attempts == 2 { 3 } else { 2 };
                let config = crate::config(&upstreams[0], &upstreams[1], self.attempts);
                proxy.reload(config).unwrap();
                self.events.reloads += 1;
            }
            6 => {
                breaker.force_open();
                self.forced = true;
                self.events.forced_open += 1;
            }
            7 => {
                let body =
                    r#"{"route": "api", "abort": {"status": 503, "percent": 50}, "ttl": "1s"}"#;
                let status = admin(self.admin, "POST", "/api/faults", body).await;
                assert_eq!(status, 201, "the admin API takes the fault");
                self.events.admin_faults += 1;
            }
            _ => {
                // A healthy step: faults must also end on their own.
                upstreams[which].set_mode(Mode::Healthy);
            }
        }
    }

    /// Ends every fault: upstreams up and healthy, no forced state, no
    /// injected fault. Returns what the schedule did.
    pub async fn heal(mut self, proxy: &Proxy, upstreams: &mut [Upstream; 2]) -> Events {
        for up in upstreams.iter_mut() {
            up.restart().await;
            up.set_mode(Mode::Healthy);
        }
        if self.forced {
            proxy.route_breaker("api").unwrap().reset();
            self.forced = false;
        }
        assert_eq!(admin(self.admin, "DELETE", "/api/faults", "").await, 200);
        self.events
    }
}

/// A request to the admin listener; its status.
async fn admin(addr: SocketAddr, method: &str, path: &str, body: &str) -> u16 {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(req))
        .await
        .expect("the admin API answers")
        .unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}
