//! The proxy on one current-thread runtime per thread, sharing its ports
//! with SO_REUSEPORT: every runtime serves, they share the route's
//! breaker, and the signal drains them all.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use tripline::clock::EventLoopClock;
use tripline_proxy::config::ProxyConfig;
use tripline_proxy::{Drained, Proxy, Threading};

use crate::support::*;

/// The proxy served by `Proxy::run_until` on per-core runtimes, on a
/// thread of its own, as `tripline proxy` serves it.
struct PerCore {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<std::io::Result<Drained>>,
}

impl PerCore {
    /// Serves `proxy` on `threads` runtimes: its first listener's address.
    fn serve(proxy: &Proxy, threads: usize) -> (SocketAddr, PerCore) {
        let (addrs_tx, addrs) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = proxy.clone();
        let thread = std::thread::spawn(move || {
            serving.run_until(
                Threading::PerCore { threads },
                |addrs, _| addrs_tx.send(addrs.to_vec()).unwrap(),
                async move {
                    let _ = stopped.await;
                },
            )
        });
        let addr = addrs.recv_timeout(BOUND).expect("the proxy binds")[0];
        (addr, PerCore { stop, thread })
    }

    /// Signals the proxy and waits for its drain.
    async fn stop(self) -> Drained {
        self.stop.send(()).unwrap();
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join().unwrap())
            .await
            .unwrap()
            .unwrap()
    }
}

#[tokio::test]
async fn per_core_runtimes_share_the_port_and_the_protection_then_drain() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = config(
        &[upstream.addr],
        "breaker = { window = { kind = \"count\", size = 1000 }, minimum_calls = 1000 }",
        "",
    );
    let proxy = Proxy::try_new(ProxyConfig::from_toml(&text).unwrap()).unwrap();
    let (addr, serving) = PerCore::serve(&proxy, 2);
    // Separate connections: the kernel spreads them over both listeners.
    for _ in 0..20 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    assert_eq!(upstream.hits(), 20);
    // One breaker saw every call, whichever runtime served it.
    let calls = proxy.route_breaker("api").unwrap().metrics().calls;
    assert_eq!(calls.successful, 20, "{calls:?}");
    assert!(serving.stop().await.complete);
}

/// `tripline proxy` serves on an `EventLoopClock`, which its runtimes
/// refresh: an open breaker must see its open duration pass. (The wait is
/// real, a second: the clock under test follows the real clock, and the
/// refusal must come before the open duration passes even on a machine
/// busy enough to stall a request for tens of milliseconds.)
#[tokio::test]
async fn on_the_runtime_refreshed_clock_an_open_breaker_lets_a_probe_through_once_its_time_is_up() {
    let answered = std::sync::atomic::AtomicUsize::new(0);
    let upstream = Upstream::start(move |_| {
        match answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0..3 => respond(500, "down"),
            _ => respond(200, "back"),
        }
    })
    .await;
    let text = config(
        &[upstream.addr],
        "breaker = { window = { kind = \"count\", size = 10 }, minimum_calls = 3, \
         failure_rate_threshold = 0.5, open_duration = \"1s\" }",
        "",
    );
    let proxy = Proxy::builder(ProxyConfig::from_toml(&text).unwrap())
        .clock(EventLoopClock)
        .build()
        .unwrap();
    let (addr, serving) = PerCore::serve(&proxy, 1);
    for _ in 0..3 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    let refused = get(addr, "/").await;
    assert_eq!(
        refused.status, 503,
        "three failures of three open the breaker"
    );
    assert_eq!(refused.header("x-tripline-rejected"), Some("circuit_open"));

    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let probe = get(addr, "/").await;
    assert_eq!(
        probe.status, 200,
        "the open duration passed on the proxy's clock"
    );
    assert_eq!(upstream.hits(), 4);
    serving.stop().await;
}
