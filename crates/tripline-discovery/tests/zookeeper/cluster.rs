//! The contract with the proxy: a published set applied to a tripline
//! cluster keeps the state of the providers that stay.

use tripline::State;
use tripline::cluster::Cluster;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_that_stay_keep_their_breaker_when_the_set_is_applied() {
    bounded(async {
        let zk = ZooKeeper::start().await;
        let reg = registrar(&zk).await;
        let a = url("tri", "127.0.0.1:50051", &[("weight", "300")]);
        let b = url("tri", "127.0.0.1:50052", &[]);
        register(&reg, &a).await;
        register(&reg, &b).await;
        let running = spawn(&discovery(&zk, None)).expect("a valid section");
        let mut providers = running.providers();
        let first = wait_for(&mut providers, "a and b", |s| s.providers().len() == 2).await;
        let cluster = Cluster::builder()
            .name("orders")
            .endpoints(first.endpoint_configs())
            .build()
            .expect("a cluster of the first set");
        cluster
            .endpoint("127.0.0.1:50051")
            .expect("a is an endpoint")
            .breaker()
            .force_open();

        unregister(&reg, &b).await;
        register(&reg, &url("tri", "127.0.0.1:50053", &[("weight", "20")])).await;
        let next = wait_for(&mut providers, "b gone and c in", |s| {
            s.get("127.0.0.1:50052").is_none() && s.get("127.0.0.1:50053").is_some()
        })
        .await;
        cluster
            .set_endpoints(next.endpoint_configs())
            .expect("the set applies");

        let a = cluster.endpoint("127.0.0.1:50051").expect("a stays");
        assert_eq!(a.breaker().state(), State::ForcedOpen, "a kept its breaker");
        assert_eq!(a.weight(), 300);
        let c = cluster.endpoint("127.0.0.1:50053").expect("c joined");
        assert_eq!(c.breaker().state(), State::Closed, "c starts fresh");
        assert_eq!(c.weight(), 20);
        assert!(cluster.endpoint("127.0.0.1:50052").is_none(), "b left");
    })
    .await;
}
