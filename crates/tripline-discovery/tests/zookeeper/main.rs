//! The watcher against a real ZooKeeper server (Debian's), with providers
//! registered as Dubbo registers them: ephemeral children named by their
//! percent-encoded URLs. Every wait is bounded; each test under 20 s.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tripline_discovery::{ProviderSet, ProviderUrl, Session, Status, ZooKeeperDiscovery, spawn};
use zookeeper_client as zk;

mod cluster;
mod server;
mod watching;

use server::ZooKeeper;

const PATH: &str = "/dubbo/com.example.OrderService/providers";

/// Runs a test body within 60 s: only to name a hung test, as every wait
/// inside has its own bound. (Two tests at once may each start a JVM
/// twice, and each start may take 15 s on a busy machine.)
async fn bounded(body: impl Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("the test took over 60 s");
}

/// A provider URL as Dubbo writes it.
fn url(protocol: &str, address: &str, params: &[(&str, &str)]) -> ProviderUrl {
    let (host, port) = address.rsplit_once(':').expect("host:port");
    let mut all: BTreeMap<String, String> = [
        ("application", "orders"),
        ("interface", "com.example.OrderService"),
        ("side", "provider"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    all.extend(
        params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    ProviderUrl {
        protocol: protocol.to_owned(),
        host: host.to_owned(),
        port: port.parse().expect("a port"),
        interface: "com.example.OrderService".to_owned(),
        params: all,
    }
}

/// A client registering providers, as a Dubbo provider's registry does.
async fn registrar(zk: &ZooKeeper) -> zk::Client {
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(2))
        .connect(&zk.address())
        .await
        .expect("the registrar connects");
    client
        .mkdir(
            PATH,
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .expect("the providers folder");
    client
}

/// Registers `child` (a name as is) as an ephemeral node.
async fn register_child(client: &zk::Client, child: &str) {
    let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    client
        .create(&format!("{PATH}/{child}"), b"", &options)
        .await
        .expect("register a provider");
}

async fn register(client: &zk::Client, url: &ProviderUrl) {
    register_child(client, &url.to_child()).await;
}

async fn unregister(client: &zk::Client, url: &ProviderUrl) {
    client
        .delete(&format!("{PATH}/{}", url.to_child()), None)
        .await
        .expect("unregister a provider");
}

fn discovery(zk: &ZooKeeper, grace: Option<Duration>) -> ZooKeeperDiscovery {
    let mut d = ZooKeeperDiscovery::new(zk.address(), PATH);
    d.grace = grace;
    d.session_timeout = Duration::from_secs(2);
    d
}

/// Waits (at most 10 s) until `rx`'s value passes `ok`; returns it.
async fn wait_for<T: Clone + std::fmt::Debug>(
    rx: &mut watch::Receiver<T>,
    what: &str,
    ok: impl Fn(&T) -> bool,
) -> T {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        rx.wait_for(|v| ok(v)).await.map(|v| v.clone())
    })
    .await;
    let found = match waited {
        Ok(Ok(v)) => Some(v),
        Ok(Err(_)) => panic!("the watcher ended while waiting for {what}"),
        Err(_) => None,
    };
    found.unwrap_or_else(|| panic!("no {what} within 10 s; last: {:?}", *rx.borrow()))
}

fn addresses(set: &ProviderSet) -> Vec<&str> {
    set.providers().iter().map(|p| p.address.as_str()).collect()
}

/// The elapsed time since `start`, in milliseconds, for the figures.
fn ms(start: Instant) -> u128 {
    start.elapsed().as_millis()
}

fn connected(s: &Status) -> bool {
    s.session == Session::Connected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_providers_appear_with_their_weights_and_bad_children_are_skipped() {
    bounded(async {
        let zk = ZooKeeper::start().await;
        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50051", &[("weight", "200")])).await;
        register(&reg, &url("tri", "127.0.0.1:50052", &[])).await;
        register(
            &reg,
            &url("tri", "127.0.0.1:50053", &[("enabled", "false")]),
        )
        .await;
        register(
            &reg,
            &url("tri", "127.0.0.1:50054", &[("disabled", "true")]),
        )
        .await;
        register(&reg, &url("dubbo", "127.0.0.1:20880", &[])).await;
        register_child(&reg, "not%ZZa%20url").await;
        register_child(&reg, "tri%3A%2F%2Fno-port%2Fx").await;

        let started = Instant::now();
        let running = spawn(&discovery(&zk, None)).expect("a valid section");
        let mut providers = running.providers();
        let set = wait_for(&mut providers, "the two providers", |s| {
            s.providers().len() == 2
        })
        .await;
        println!("first set published {} ms after spawn", ms(started));
        assert_eq!(addresses(&set), ["127.0.0.1:50051", "127.0.0.1:50052"]);
        let weights: Vec<u32> = set.endpoint_configs().iter().map(|e| e.weight).collect();
        assert_eq!(weights, [200, 100], "Dubbo's default weight is 100");

        let status = running.status().borrow().clone();
        assert!(connected(&status), "{status:?}");
        assert_eq!(status.skipped, 2, "{status:?}");
        assert_eq!(status.disabled, 2, "{status:?}");
        assert_eq!(status.other_protocols, [("dubbo".to_owned(), 1)]);
    })
    .await;
}
