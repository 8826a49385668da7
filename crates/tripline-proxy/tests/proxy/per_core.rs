//! The proxy on one current-thread runtime per thread, sharing its ports
//! with SO_REUSEPORT: every runtime serves, they share the route's
//! breaker, and the signal drains them all.

use std::sync::mpsc;

use tripline_proxy::config::ProxyConfig;
use tripline_proxy::{Proxy, Threading};

use crate::support::*;

#[tokio::test]
async fn per_core_runtimes_share_the_port_and_the_protection_then_drain() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = config(
        &[upstream.addr],
        "breaker = { window = { kind = \"count\", size = 1000 }, minimum_calls = 1000 }",
        "",
    );
    let proxy = Proxy::try_new(ProxyConfig::from_toml(&text).unwrap()).unwrap();
    let (addrs_tx, addrs) = mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = proxy.clone();
    let thread = std::thread::spawn(move || {
        serving.run_until(
            Threading::PerCore { threads: 2 },
            |addrs, _| addrs_tx.send(addrs.to_vec()).unwrap(),
            async move {
                let _ = stopped.await;
            },
        )
    });
    let addr = addrs.recv_timeout(BOUND).expect("the proxy binds")[0];
    // Separate connections: the kernel spreads them over both listeners.
    for _ in 0..20 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    assert_eq!(upstream.hits(), 20);
    // One breaker saw every call, whichever runtime served it.
    let calls = proxy.route_breaker("api").unwrap().metrics().calls;
    assert_eq!(calls.successful, 20, "{calls:?}");
    stop.send(()).unwrap();
    let drained = tokio::task::spawn_blocking(move || thread.join().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(drained.complete);
}
