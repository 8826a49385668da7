//! `tripline config` against a real etcd (Debian package `etcd-server`):
//! `push` refuses an invalid document before etcd sees it, `status` shows
//! each instance's applied version, and `rollback` pushes an earlier
//! revision's document again, which a running instance applies.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "../../tripline-config/tests/support/etcd_server.rs"]
mod etcd_server;
#[path = "support/run.rs"]
mod support;

use std::time::Duration;

use etcd_server::Etcd;
use support::{Dir, tripline};
use tripline_config::etcd::document_at;
use tripline_config::{Applier, EtcdOptions, EtcdSource};

const PREFIX: &str = "/tripline/cli";

fn breaker(minimum_calls: u32) -> String {
    format!("[[breaker]]\nname = \"payments\"\nminimum_calls = {minimum_calls}\n")
}

/// A runtime, a real etcd on it and a temp dir for the documents.
fn started() -> (tokio::runtime::Runtime, Etcd, Dir) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(Etcd::start());
    (runtime, etcd, Dir::new())
}

/// `tripline config --etcd <etcd> --prefix PREFIX <args>`.
fn config_cli(etcd: &Etcd, args: &[&str]) -> support::Output {
    let endpoint = etcd.endpoint();
    let mut all = vec!["config", "--etcd", &endpoint, "--prefix", PREFIX];
    all.extend_from_slice(args);
    tripline(all)
}

/// Polls `check` every 50 ms for at most 10 s.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tripline::clock::block_thread_for(Duration::from_millis(50));
    }
    panic!("{what}: not within 10 s");
}

#[test]
fn config_push_status_and_rollback_drive_a_running_instance() {
    let (runtime, etcd, dir) = started();
    let gateway = etcd.gateway();
    let cli = |args: &[&str]| config_cli(&etcd, args);

    // Refused before etcd sees it: status 2, the field named.
    let bad = dir.write("bad.toml", &breaker(0));
    let out = cli(&["push", bad.to_str().unwrap()]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`minimum_calls`"), "{}", out.stderr);
    assert_eq!(
        runtime.block_on(document_at(&gateway, PREFIX, 0)).unwrap(),
        None
    );

    let good = dir.write("good.toml", &breaker(10));
    let out = cli(&["push", good.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let first: i64 = out
        .text()
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();

    // A running instance applies it and reports under its status key.
    let applier = Applier::builder().instance_id("web-1").build();
    let mut options = EtcdOptions::new(etcd.endpoint(), PREFIX);
    options.status_interval = Duration::from_millis(100);
    let _source = {
        let _guard = runtime.enter();
        EtcdSource::spawn(applier.clone(), options)
    };
    eventually("web-1 reports version 1", || {
        let out = cli(&["status"]);
        out.status == 0 && out.text().contains("versions 1")
    });
    let table = cli(&["status"]).text();
    assert!(table.starts_with("INSTANCE"), "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        row,
        ["web-1", "1", &first.to_string(), "no", "-", "-"],
        "{table}"
    );
    assert!(
        table.contains("1 instance(s), 0 canary, versions 1"),
        "{table}"
    );

    let stricter = dir.write("stricter.toml", &breaker(30));
    assert_eq!(cli(&["push", stricter.to_str().unwrap()]).status, 0);
    eventually("30 applied", || {
        applier.breaker("payments").unwrap().config().minimum_calls == 30
    });

    let out = cli(&["rollback", "--revision", &first.to_string()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.text().contains(&format!("revision {first} again")),
        "{}",
        out.text()
    );
    eventually("rolled back to 10", || {
        applier.breaker("payments").unwrap().config().minimum_calls == 10
    });
    assert_eq!(applier.version(), 3);

    let out = cli(&["rollback", "--revision", "1"]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("did not exist at revision 1"),
        "{}",
        out.stderr
    );
}

#[test]
fn push_dry_run_prints_the_change_per_kind_of_instance_and_writes_nothing() {
    let (runtime, etcd, dir) = started();
    let gateway = etcd.gateway();
    let cli = |args: &[&str]| config_cli(&etcd, args);
    let first = dir.write("first.toml", &breaker(10));
    assert_eq!(cli(&["push", first.to_str().unwrap()]).status, 0);
    let before = runtime.block_on(document_at(&gateway, PREFIX, 0)).unwrap();
    // A live instance whose own payments breaker is not the library's
    // defaults: a 20-call window and a 0.3 cooldown threshold.
    let own = tripline::CircuitBreaker::builder()
        .config(tripline::CircuitBreakerConfig {
            name: "payments".into(),
            window: tripline::WindowConfig::Count { size: 20 },
            minimum_calls: 10,
            cooldown: Some(tripline::breaker::Cooldown {
                duration: Duration::from_secs(30),
                failure_rate_threshold: 0.3,
            }),
            ..Default::default()
        })
        .build()
        .unwrap();
    let applier = Applier::builder().instance_id("edge-1").manage(own).build();
    let mut options = EtcdOptions::new(etcd.endpoint(), PREFIX);
    options.status_interval = Duration::from_millis(100);
    let _source = {
        let _guard = runtime.enter();
        EtcdSource::spawn(applier.clone(), options)
    };
    eventually("edge-1 reports its kind", || {
        cli(&["status"]).text().contains("edge-1")
    });

    let one_field = dir.write(
        "one.toml",
        "[[breaker]]\nname = \"payments\"\nfailure_rate_threshold = 0.2\n",
    );
    let out = cli(&["push", "--dry-run", one_field.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    // Every instance: the named field changes; minimum_calls goes back to
    // the instance's own value; nothing else is touched.
    assert!(
        text.contains("payments.failure_rate_threshold: own → 0.2"),
        "{text}"
    );
    assert!(text.contains("payments.minimum_calls: 10 → own"), "{text}");
    // On the library's defaults: the effective values.
    assert!(
        text.contains("payments.failure_rate_threshold: 0.5 → 0.2"),
        "{text}"
    );
    assert!(text.contains("payments.minimum_calls: 10 → 20"), "{text}");
    assert!(!text.contains("window"), "{text}");
    assert!(text.contains("nothing written"), "{text}");
    // On the live kind: 0.2 is below its cooldown threshold.
    assert!(text.contains("(edge-1) — 1 instance(s):"), "{text}");
    assert!(
        text.contains(
            "would refuse the document: breaker \"payments\": `cooldown.failure_rate_threshold`"
        ),
        "{text}"
    );
    // A push that live kind would refuse is not written.
    let out = cli(&["push", one_field.to_str().unwrap()]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("(edge-1) would refuse it"),
        "{}",
        out.stderr
    );
    // 0.4 fits: the kind's effective change is that one field, its
    // window and minimum calls untouched.
    let fits = dir.write(
        "fits.toml",
        "[[breaker]]\nname = \"payments\"\nfailure_rate_threshold = 0.4\n",
    );
    let out = cli(&["push", "--dry-run", fits.to_str().unwrap()]);
    let text = out.text();
    let kind_part = text.split("(edge-1)").nth(1).unwrap();
    let kind_part = kind_part.split("on an instance without").next().unwrap();
    assert!(
        kind_part.contains("payments.failure_rate_threshold: 0.5 → 0.4"),
        "{text}"
    );
    assert!(
        !kind_part.contains("minimum_calls") && !kind_part.contains("window"),
        "{text}"
    );
    assert_eq!(
        runtime.block_on(document_at(&gateway, PREFIX, 0)).unwrap(),
        before
    );
}

#[test]
fn a_single_breaker_table_as_tune_writes_it_is_pushed_as_a_document() {
    let (runtime, etcd, dir) = started();
    let gateway = etcd.gateway();
    let table = dir.write(
        "breaker.toml",
        "name = \"api\"\nwindow = { kind = \"time\", length = \"10s\", buckets = 10 }\nminimum_calls = 10\nfailure_rate_threshold = 0.2\n",
    );
    let out = config_cli(&etcd, &["push", table.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}\n{}", out.text(), out.stderr);
    assert!(out.text().contains("one breaker table"), "{}", out.text());
    let pushed = runtime
        .block_on(document_at(&gateway, PREFIX, 0))
        .unwrap()
        .expect("a document in etcd");
    let pushed = String::from_utf8(pushed).unwrap();
    assert!(
        pushed.starts_with("[[breaker]]") && pushed.contains("name = \"api\""),
        "{pushed}"
    );
    // A bare table with an error is refused naming the field.
    let bad = dir.write("bad.toml", "name = \"api\"\nminimum_calls = 0\n");
    let out = config_cli(&etcd, &["push", bad.to_str().unwrap()]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`minimum_calls`"), "{}", out.stderr);
}
