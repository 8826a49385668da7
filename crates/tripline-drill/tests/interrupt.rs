//! Ctrl-C in the middle of a fault phase: the drill switches its fault
//! off on the proxy before it returns, and says it was interrupted.
//!
//! Alone in its test binary: it sends SIGINT to its own process, which
//! the drill's handler takes (no other test shares the process).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/front.rs"]
mod front;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tripline_drill::{Drill, DrillError};
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

use front::{full, serve};

async fn faults(admin: std::net::SocketAddr) -> serde_json::Value {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let res = client
        .get(format!("http://{admin}/api/faults").parse().unwrap())
        .await
        .unwrap();
    serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_clears_the_drills_faults_before_it_returns() {
    let upstream = serve(|_req| async { Response::new(full("ok")) }).await;
    let config = ProxyConfig::from_toml(&format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n[admin]\naddress = \"127.0.0.1:0\"\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\nbreaker = {{ minimum_calls = 5 }}\n[clusters.backend]\nendpoints = [\"{upstream}\"]\n"
    ))
    .unwrap();
    let proxy = Proxy::try_new(config).unwrap();
    let running = proxy.start().await.unwrap();
    let admin = running.admin_addr().unwrap();
    let drill = Drill::from_toml(
        "interrupted.toml",
        &format!(
            "[target]\nadmin = \"http://{admin}\"\nurl = \"http://{}\"\n[load]\nrate = 20.0\nduration = \"60s\"\n[[phase]]\nfrom = \"0.5s\"\nto = \"50s\"\nroute = \"api\"\ndelay = {{ duration = \"10ms\" }}\n[expect]\nfalse_trips = 0\n",
            running.local_addrs()[0]
        ),
        Path::new("."),
    )
    .unwrap();
    let drilling = tokio::spawn(async move { tripline_drill::run(&drill).await });

    // Wait (bounded) until the fault is on; its TTL is the phase plus 2 s.
    let on = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let listed = faults(admin).await;
            if let Some(f) = listed["faults"].as_array().and_then(|f| f.first()) {
                return f.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the phase's fault is switched on");
    let remaining = on["remaining_ms"].as_u64().unwrap();
    assert!(remaining > 45_000 && remaining <= 51_500, "{on}");

    // SIGINT until the drill notices: one sent between two of its waits
    // would find no listener.
    let result = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            std::process::Command::new("kill")
                .args(["-INT", &std::process::id().to_string()])
                .status()
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            if drilling.is_finished() {
                return drilling.await.unwrap();
            }
        }
    })
    .await
    .expect("the drill stops on Ctrl-C, long before its 60 s");
    assert!(matches!(result, Err(DrillError::Interrupted)), "{result:?}");
    assert_eq!(faults(admin).await["faults"], serde_json::json!([]));
    running.shutdown().await;
}
