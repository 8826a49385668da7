//! `tripline config force-open | disable | clear` and `status --breakers`
//! against a real etcd (Debian package `etcd-server`) and five running
//! appliers: overrides reach them, bad ones are refused naming the field
//! with nothing written, and the fleet's breakers are summed per state.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "../../tripline-config/tests/support/etcd_server.rs"]
mod etcd_server;
#[path = "support/run.rs"]
mod support;

use std::time::Duration;

use etcd_server::Etcd;
use support::{Dir, tripline};
use tripline::{CircuitBreaker, CircuitBreakerConfig, State};
use tripline_config::etcd::document_at;
use tripline_config::{Applier, AuditAction, EtcdOptions, EtcdSource};

const PREFIX: &str = "/tripline/fleet-cli";

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

fn instance(id: &str) -> Applier {
    let payments = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            name: "payments".into(),
            ..Default::default()
        })
        .build()
        .unwrap();
    Applier::builder().instance_id(id).manage(payments).build()
}

#[test]
fn fleet_overrides_are_written_with_validation_and_the_fleet_view_sums_the_breakers() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(Etcd::start());
    let endpoint = etcd.endpoint();
    let gateway = etcd.gateway();
    let dir = Dir::new();
    let cli = |args: &[&str]| {
        let mut all = vec!["config", "--etcd", &endpoint, "--prefix", PREFIX];
        all.extend_from_slice(args);
        tripline(all)
    };
    let fleet: Vec<Applier> = (1..=5).map(|i| instance(&format!("edge-{i}"))).collect();
    let _sources: Vec<EtcdSource> = fleet
        .iter()
        .map(|a| {
            let mut options = EtcdOptions::new(&endpoint, PREFIX);
            options.status_interval = Duration::from_millis(100);
            let _guard = runtime.enter();
            EtcdSource::spawn(a.clone(), options)
        })
        .collect();
    eventually("five instances report payments", || {
        cli(&["status", "--breakers"])
            .text()
            .contains("payments: closed on all 5 instances")
    });

    // Bad input: refused naming the field, nothing written.
    let out = cli(&["force-open", "nope", "--for", "10m", "--reason", "x"]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("`override[0].breaker`"),
        "{}",
        out.stderr
    );
    let out = cli(&[
        "force-open",
        "payments",
        "--until",
        "2020-01-01T00:00:00Z",
        "--reason",
        "x",
    ]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`override[0].until`"), "{}", out.stderr);
    let out = cli(&["force-open", "payments", "--for", "0s", "--reason", "x"]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    let past = dir.write(
        "past.toml",
        "[[override]]\nbreaker = \"payments\"\nstate = \"disabled\"\nuntil = \"2020-01-01T00:00:00Z\"\nreason = \"x\"\n",
    );
    let out = cli(&["push", past.to_str().unwrap()]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`override[0].until`"), "{}", out.stderr);
    assert_eq!(
        runtime.block_on(document_at(&gateway, PREFIX, 0)).unwrap(),
        None,
        "nothing written"
    );

    let out = cli(&[
        "force-open",
        "payments",
        "--for",
        "10m",
        "--reason",
        "bank maintenance",
        "--author",
        "alice",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.text().contains("payments forced_open until"),
        "{}",
        out.text()
    );
    for a in &fleet {
        eventually("held forced open", || {
            a.breaker("payments").unwrap().state() == State::ForcedOpen
        });
        let started = a
            .audit()
            .into_iter()
            .find(|r| matches!(r.action, AuditAction::OverrideStarted { .. }))
            .unwrap();
        assert_eq!(started.author.as_deref(), Some("alice"));
        assert_eq!(started.comment.as_deref(), Some("bank maintenance"));
    }
    // One instance's own operator holds it otherwise: the view says so.
    fleet[1]
        .hold_locally("payments", tripline_config::OverrideState::Disabled)
        .unwrap();
    eventually("the fleet view", || {
        let text = cli(&["status", "--breakers"]).text();
        text.contains(
            "payments: forced_open on 4 of 5 instances (edge-1, edge-3, edge-4, edge-5) for ",
        ) && text.contains("payments: disabled on 1 of 5 instances (edge-2) for ")
    });

    let out = cli(&["clear", "payments"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    for a in [&fleet[0], &fleet[2], &fleet[3], &fleet[4]] {
        eventually("released", || {
            a.breaker("payments").unwrap().state() == State::Closed
        });
    }
    assert_eq!(
        fleet[1].breaker("payments").unwrap().state(),
        State::Disabled,
        "the local override holds until its own reset"
    );
    let out = cli(&["clear", "payments"]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("no fleet override holds"),
        "{}",
        out.stderr
    );
}

/// A keyed family is known by name to the tools: `config force-open` on
/// it is written (not refused as unknown), and holds every breaker of the
/// family on every instance, new keys included, until `config clear`.
#[test]
fn a_family_the_fleet_reports_can_be_forced_open_whole() {
    use tripline::registry::{BreakerRegistry, RegistryConfig};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(Etcd::start());
    let endpoint = etcd.endpoint();
    let cli = |args: &[&str]| {
        let mut all = vec![
            "config",
            "--etcd",
            &endpoint,
            "--prefix",
            "/tripline/families",
        ];
        all.extend_from_slice(args);
        tripline(all)
    };
    let tenants: Vec<BreakerRegistry<String>> = (0..2)
        .map(|_| {
            BreakerRegistry::try_new(RegistryConfig {
                breaker: CircuitBreakerConfig {
                    name: "tenants".into(),
                    ..Default::default()
                },
                ..Default::default()
            })
            .unwrap()
        })
        .collect();
    let fleet: Vec<Applier> = tenants
        .iter()
        .enumerate()
        .map(|(i, r)| {
            Applier::builder()
                .instance_id(format!("edge-{i}"))
                .manage_family(r.clone())
                .build()
        })
        .collect();
    let _sources: Vec<EtcdSource> = fleet
        .iter()
        .map(|a| {
            let mut options = EtcdOptions::new(&endpoint, "/tripline/families");
            options.status_interval = Duration::from_millis(100);
            let _guard = runtime.enter();
            EtcdSource::spawn(a.clone(), options)
        })
        .collect();
    eventually("two instances report", || {
        cli(&["status"]).text().contains("edge-1")
    });
    let acme = tenants[0].get(&"acme".to_owned()).unwrap();
    let out = cli(&[
        "force-open",
        "tenants",
        "--for",
        "10m",
        "--reason",
        "tenant db failover",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    for r in &tenants {
        eventually("the family held", || {
            r.family_hold() == Some(State::ForcedOpen)
        });
    }
    eventually("the fleet view shows the hold", || {
        cli(&["status", "--breakers"])
            .text()
            .contains("tenants: forced_open on 2 of 2 instances (edge-0, edge-1) for ")
    });
    assert_eq!(acme.state(), State::ForcedOpen);
    let newcomer = tenants[1].get(&"newcomer".to_owned()).unwrap();
    assert_eq!(newcomer.state(), State::ForcedOpen);
    let out = cli(&["clear", "tenants"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    for r in &tenants {
        eventually("the family released", || r.family_hold().is_none());
    }
    eventually("the fleet view shows it automatic", || {
        cli(&["status", "--breakers"])
            .text()
            .contains("tenants: automatic on all 2 instances")
    });
    assert_eq!(
        (acme.state(), newcomer.state()),
        (State::Closed, State::Closed)
    );
}

const PROFILES: &str = r#"
[[breaker]]
name = "payments"
minimum_calls = 4

[[profile]]
name = "evening-peak"
when = { days = ["mon", "tue", "wed", "thu", "fri"], from = "18:00", to = "22:00", tz = "+08:00" }

[[profile.breaker]]
name = "payments"
slow_call_duration = "2s"
slow_call_rate_threshold = 0.9
"#;

#[test]
fn config_check_says_which_profile_holds_at_a_time_and_push_refuses_overlaps() {
    let dir = Dir::new();
    let doc = dir.write("profiles.toml", PROFILES);
    let path = doc.to_str().unwrap();
    // Monday 2026-12-07 11:00 UTC is 19:00 at +08:00: the peak.
    let out = tripline(["config", "check", path, "--at", "2026-12-07T11:00:00Z"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    assert!(
        text.contains("at 2026-12-07T11:00:00Z: profile \"evening-peak\" holds"),
        "{text}"
    );
    assert!(
        text.contains("payments.slow_call_rate_threshold: 1.0 → 0.9"),
        "{text}"
    );
    let out = tripline(["config", "check", path, "--at", "2026-12-07T15:00:00Z"]);
    assert!(out.text().contains("no profile holds"), "{}", out.text());
    // `tripline check` recognises the document and takes --at too.
    let out = tripline(["check", path, "--at", "2026-12-07T11:00:00Z"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.text().contains("profile \"evening-peak\" holds"),
        "{}",
        out.text()
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(Etcd::start());
    let overlapping = dir.write(
        "overlap.toml",
        &format!(
            "{PROFILES}\n[[profile]]\nname = \"friday-late\"\nwhen = {{ days = [\"fri\"], from = \"21:00\", to = \"23:00\", tz = \"+08:00\" }}\n"
        ),
    );
    let endpoint = etcd.endpoint();
    let out = tripline([
        "config",
        "--etcd",
        &endpoint,
        "--prefix",
        PREFIX,
        "push",
        overlapping.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("profile \"friday-late\": `when` overlaps profile \"evening-peak\""),
        "{}",
        out.stderr
    );
    assert_eq!(
        runtime
            .block_on(document_at(&etcd.gateway(), PREFIX, 0))
            .unwrap(),
        None,
        "nothing written"
    );
}
