//! Following changes: joins, leaves after grace, a lost server, an expiry.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_provider_joins_and_a_removed_one_leaves_after_its_grace() {
    bounded(async {
        let zk = ZooKeeper::start().await;
        let reg = registrar(&zk).await;
        let a = url("tri", "127.0.0.1:50051", &[]);
        let b = url("tri", "127.0.0.1:50052", &[]);
        register(&reg, &a).await;
        register(&reg, &b).await;
        let grace = Duration::from_millis(1500);
        let running = spawn(&discovery(&zk, Some(grace))).expect("a valid section");
        let mut providers = running.providers();
        wait_for(&mut providers, "a and b", |s| s.providers().len() == 2).await;

        let c = url("tri", "127.0.0.1:50053", &[("weight", "50")]);
        let joined = Instant::now();
        register(&reg, &c).await;
        let set = wait_for(&mut providers, "c joining", |s| {
            s.get("127.0.0.1:50053").is_some()
        })
        .await;
        println!(
            "a join published {} ms after the znode was created",
            ms(joined)
        );
        assert_eq!(set.get("127.0.0.1:50053").map(|p| p.weight), Some(50));

        // The figure: znode created -> set published, over 20 joins.
        let mut latencies = Vec::new();
        for port in 50100..50120 {
            let address = format!("127.0.0.1:{port}");
            let created = Instant::now();
            register(&reg, &url("tri", &address, &[])).await;
            wait_for(&mut providers, "a join", |s| s.get(&address).is_some()).await;
            latencies.push(created.elapsed());
        }
        latencies.sort();
        println!(
            "znode created -> set published over 20 joins: median {:?}, max {:?}",
            latencies[10], latencies[19]
        );
        for port in 50100..50120 {
            unregister(&reg, &url("tri", &format!("127.0.0.1:{port}"), &[])).await;
        }
        wait_for(&mut providers, "the 20 gone", |s| s.providers().len() == 3).await;

        let left = Instant::now();
        unregister(&reg, &b).await;
        let set = wait_for(&mut providers, "b marked leaving", |s| {
            s.get("127.0.0.1:50052").is_some_and(|p| p.leaving)
        })
        .await;
        println!(
            "b marked leaving {} ms after its znode was deleted",
            ms(left)
        );
        assert_eq!(
            set.providers().len(),
            3,
            "b stays within its grace: {set:?}"
        );
        wait_for(&mut providers, "b leaving", |s| {
            s.get("127.0.0.1:50052").is_none()
        })
        .await;
        let after = left.elapsed();
        println!(
            "b left {} ms after its znode was deleted (grace 1500 ms)",
            after.as_millis()
        );
        assert!(
            after >= grace,
            "b left after {after:?}, before its grace of {grace:?}"
        );
        assert_eq!(
            addresses(&providers.borrow()),
            ["127.0.0.1:50051", "127.0.0.1:50053"]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_killed_keeps_the_last_set_and_a_restart_recovers() {
    bounded(async {
        let mut zk = ZooKeeper::start().await;
        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50051", &[])).await;
        let running = spawn(&discovery(&zk, None)).expect("a valid section");
        let mut providers = running.providers();
        let mut status = running.status();
        wait_for(&mut providers, "the provider", |s| s.providers().len() == 1).await;

        zk.kill();
        let killed = Instant::now();
        let lost = wait_for(&mut status, "a lost session", |s| !connected(s)).await;
        println!("loss reported {} ms after the kill", ms(killed));
        assert!(matches!(lost.session, Session::Lost { .. }), "{lost:?}");
        assert_eq!(
            addresses(&providers.borrow()),
            ["127.0.0.1:50051"],
            "the last set stays"
        );

        zk.restart_with(false).await;
        let restarted = Instant::now();
        wait_for(&mut status, "the session back", connected).await;
        println!("recovered {} ms after the restart", ms(restarted));
        drop(reg);
        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50052", &[])).await;
        wait_for(
            &mut providers,
            "a provider registered after the restart",
            |s| s.get("127.0.0.1:50052").is_some(),
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_keeps_the_providers_and_a_new_session_follows() {
    bounded(async {
        let mut zk = ZooKeeper::start().await;
        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50051", &[])).await;
        let running = spawn(&discovery(&zk, None)).expect("a valid section");
        let mut providers = running.providers();
        let mut status = running.status();
        wait_for(&mut providers, "the provider", |s| s.providers().len() == 1).await;

        // A server with its data wiped knows no session: ours expires.
        drop(reg);
        zk.restart_with(true).await;
        let expired = wait_for(&mut status, "an expired session", |s| {
            matches!(s.session, Session::Expired { .. })
        })
        .await;
        assert!(expired.last_error.is_some(), "{expired:?}");
        assert_eq!(
            addresses(&providers.borrow()),
            ["127.0.0.1:50051"],
            "the last set stays"
        );

        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50061", &[])).await;
        let set = wait_for(&mut providers, "the new session's providers", |s| {
            s.get("127.0.0.1:50061").is_some()
        })
        .await;
        assert_eq!(addresses(&set), ["127.0.0.1:50061"]);
        let status = status.borrow().clone();
        assert!(connected(&status) && status.reconnects >= 1, "{status:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_up_yet_is_reported_and_followed_once_it_answers() {
    bounded(async {
        let mut zk = ZooKeeper::stopped();
        let running = spawn(&discovery(&zk, None)).expect("a valid section");
        let mut status = running.status();
        let lost = wait_for(&mut status, "the failed connect reported", |s| {
            s.last_error.is_some()
        })
        .await;
        assert!(matches!(lost.session, Session::Lost { .. }), "{lost:?}");
        assert!(running.providers().borrow().is_empty());

        zk.restart_with(false).await;
        let up = Instant::now();
        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50051", &[])).await;
        let mut providers = running.providers();
        wait_for(&mut providers, "the provider", |s| s.providers().len() == 1).await;
        println!("followed {} ms after the server came up", ms(up));
        assert!(
            status.borrow().reconnects == 0,
            "the first session is not a reconnect"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_ends_when_nobody_listens() {
    bounded(async {
        let zk = ZooKeeper::start().await;
        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50051", &[])).await;
        let (discovery, watcher) =
            tripline_discovery::watcher(&discovery(&zk, None)).expect("a valid section");
        let task = tokio::spawn(watcher);
        let mut providers = discovery.providers();
        wait_for(&mut providers, "the provider", |s| s.providers().len() == 1).await;
        drop(providers);
        drop(discovery);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the watcher ends once its receivers are gone")
            .expect("the watcher does not panic");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_session_expires_it_and_the_set_stays() {
    bounded(async {
        let mut zk = ZooKeeper::start().await;
        let reg = registrar(&zk).await;
        register(&reg, &url("tri", "127.0.0.1:50051", &[])).await;
        let running = spawn(&discovery(&zk, None)).expect("a valid section");
        let mut providers = running.providers();
        let mut status = running.status();
        wait_for(&mut providers, "the provider", |s| s.providers().len() == 1).await;

        zk.kill();
        let killed = Instant::now();
        wait_for(&mut status, "a lost session", |s| !connected(s)).await;
        // No server for longer than the session's 2 s: the client gives
        // the session up, and the status says expired.
        let expired = wait_for(&mut status, "an expired session", |s| {
            matches!(s.session, Session::Expired { .. })
        })
        .await;
        println!(
            "expiry reported {} ms after the kill (session 2 s)",
            ms(killed)
        );
        let Session::Expired { since } = expired.session else {
            unreachable!()
        };
        assert!(
            since <= killed + Duration::from_millis(500),
            "since the loss, not the expiry"
        );
        assert_eq!(
            addresses(&providers.borrow()),
            ["127.0.0.1:50051"],
            "the last set stays"
        );

        zk.restart_with(false).await;
        let restarted = Instant::now();
        let back = wait_for(&mut status, "a new session", connected).await;
        println!("a new session read {} ms after the restart", ms(restarted));
        assert!(back.reconnects >= 1, "{back:?}");
        assert_eq!(addresses(&providers.borrow()), ["127.0.0.1:50051"]);
    })
    .await;
}
