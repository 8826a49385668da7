//! `tripline run` with its breaker in a real etcd (Debian package
//! `etcd-server`) shared by three "hosts" (three state dirs): failures on
//! one trip it for all, the probes are counted fleet-wide, a killed probe
//! is freed by its lease's expiry, and etcd going away mid-run loses no
//! outcome a run reported. The breaker's time is `TRIPLINE_NOW`; real time
//! only bounds waits on real processes and etcd's lease expiry.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "../../tripline-config/tests/support/etcd_server.rs"]
mod etcd_server;
#[path = "run_common/mod.rs"]
mod run_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use etcd_server::Etcd;
use run_common::{T0, wait_until};

const CONFIG: &str = r#"
window = { kind = "count", size = 6 }
minimum_calls = 6
failure_rate_threshold = 0.5
open_duration = "30s"
half_open = { policy = "permits", calls = 2, failure_rate_threshold = 0.3 }

[store]
probe_ttl = "8s"
"#;

/// A test root: `p.toml`, the marker files, and one state dir per host.
struct Fleet {
    root: tempfile::TempDir,
    store: String,
}

impl Fleet {
    fn new(store: String) -> Fleet {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("p.toml"), CONFIG).unwrap();
        Fleet { root, store }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// `tripline run --breaker p` on `host` at `T0 + at`, the store from
    /// `TRIPLINE_STORE`.
    fn cmd(&self, host: &str, at: u64, extra: &[&str], script: &str) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tripline"));
        c.arg("run")
            .args(["--state-dir", host, "--config", "p.toml", "--textfile", "."])
            .args(extra)
            .args(["--breaker", "p", "--", "sh", "-c", script])
            .env("TRIPLINE_STORE", &self.store)
            .env("TRIPLINE_NOW", (T0 + at).to_string())
            .current_dir(self.root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    fn spawn(&self, host: &str, at: u64, script: &str) -> Child {
        self.cmd(host, at, &[], script).spawn().unwrap()
    }

    fn run(&self, host: &str, at: u64, extra: &[&str], script: &str) -> Output {
        self.cmd(host, at, extra, script).output().unwrap()
    }

    fn status(&self, host: &str, at: u64) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_tripline"))
            .args([
                "run",
                "--state-dir",
                host,
                "--config",
                "p.toml",
                "--status",
                "p",
            ])
            .env("TRIPLINE_STORE", &self.store)
            .env("TRIPLINE_NOW", (T0 + at).to_string())
            .current_dir(self.root.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    }

    /// `tripline run --reset p` or `--force-open p` on `host`.
    fn operator(&self, host: &str, op: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_tripline"))
            .args(["run", "--state-dir", host, "--config", "p.toml", op, "p"])
            .env("TRIPLINE_STORE", &self.store)
            .env("TRIPLINE_NOW", (T0 + 43).to_string())
            .current_dir(self.root.path())
            .output()
            .unwrap()
    }

    fn lines(&self, name: &str) -> usize {
        std::fs::read_to_string(self.path(name)).map_or(0, |t| t.lines().count())
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn finish(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

/// "runs: N succeeded, …" → N.
fn succeeded(status: &str) -> u64 {
    let line = status.lines().find(|l| l.starts_with("runs: ")).unwrap();
    line["runs: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
#[allow(clippy::disallowed_methods)] // real time bounds etcd's lease expiry
fn three_hosts_share_one_breaker_through_etcd() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut etcd = runtime.block_on(Etcd::start());
    let store = format!("{}/fleet", etcd.endpoint().replace("http://", "etcd://"));
    let fleet = Fleet::new(store);
    let hosts = ["a", "b", "c"];

    // Host A: six failing runs at once trip the shared breaker.
    let trips: Vec<Child> = (0..6)
        .map(|_| fleet.spawn("a", 0, "echo x >> ran-a; exit 1"))
        .collect();
    for out in finish(trips) {
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    }
    assert_eq!(fleet.lines("ran-a"), 6);
    let status = fleet.status("b", 1);
    assert!(
        status.contains("is open") || status.contains(": open"),
        "{status}"
    );

    // Hosts B and C never saw a failure, yet are refused without running.
    let refused: Vec<Child> = (0..12)
        .map(|i| fleet.spawn(hosts[1 + i % 2], 1, "echo x >> ran-bc"))
        .collect();
    for out in finish(refused) {
        assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    }
    assert_eq!(fleet.lines("ran-bc"), 0);

    // After the open duration: twelve runs on the three hosts at once,
    // exactly two probes (the policy's calls) run fleet-wide.
    let hang = "echo $$ >> probes; while [ ! -e go ]; do sleep 0.02; done";
    let mut round: Vec<Child> = (0..12)
        .map(|i| fleet.spawn(hosts[i % 3], 31, hang))
        .collect();
    let mut done: Vec<Output> = Vec::new();
    wait_until("ten refusals and two probes", || {
        let mut i = 0;
        while i < round.len() {
            if round[i].try_wait().unwrap().is_some() {
                done.push(round.remove(i).wait_with_output().unwrap());
            } else {
                i += 1;
            }
        }
        done.len() == 10 && fleet.lines("probes") == 2
    });
    for out in &done {
        assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    }
    assert_eq!(fleet.lines("probes"), 2);

    // One probe is killed (SIGKILL: no goodbye); the other succeeds.
    let mut killed = round.remove(0);
    killed.kill().unwrap();
    killed.wait().unwrap();
    std::fs::write(fleet.path("go"), "").unwrap();
    let survivor = round.remove(0).wait_with_output().unwrap();
    assert_eq!(
        survivor.status.code(),
        Some(0),
        "{}",
        text(&survivor.stderr)
    );
    // Its lease still holds the slot: a run elsewhere is refused...
    let held = fleet.run("c", 31, &[], "echo x >> ran-held");
    assert_eq!(held.status.code(), Some(75), "{}", text(&held.stderr));
    assert_eq!(fleet.lines("ran-held"), 0);
    // ... until etcd expires the lease (8 s TTL: long enough that the
    // refusal above, a new process on a busy machine, comes before it
    // ends): then a run on another
    // host takes the freed slot, and its success closes the breaker.
    let killed_at = std::time::Instant::now();
    let mut admitted = None;
    wait_until("the killed probe's lease to expire", || {
        let out = fleet.run("c", 32, &[], "exit 0");
        let code = out.status.code();
        assert!(matches!(code, Some(0 | 75)), "{}", text(&out.stderr));
        admitted = Some(killed_at.elapsed());
        code == Some(0)
    });
    println!(
        "killed probe freed by lease expiry after {:?}",
        admitted.unwrap()
    );
    let status = fleet.status("a", 32);
    assert!(status.contains(": closed"), "{status}");
    assert!(status.contains("1 abandoned probe"), "{status}");
    assert!(status.contains("store: etcd://"), "{status}");

    // etcd killed mid-run: ten closed runs at once, etcd killed while they
    // finish. Every run that reported its outcome (no warning) is in the
    // store after the restart, and the state still reads.
    let before = succeeded(&fleet.status("b", 40));
    let mut churn: Vec<Child> = (0..10)
        .map(|i| fleet.spawn(hosts[i % 3], 40, "exit 0"))
        .collect();
    wait_until("three runs to finish", || {
        churn
            .iter_mut()
            .filter_map(|c| c.try_wait().unwrap())
            .count()
            >= 3
    });
    etcd.kill();
    let outs = finish(churn);
    let reported = outs
        .iter()
        .filter(|o| {
            assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
            !text(&o.stderr).contains("store unreachable")
        })
        .count() as u64;

    // While etcd is down: the default runs the command and warns once;
    // `refuse` exits 69 without running it.
    let down = fleet.run("a", 41, &[], "echo x >> ran-down");
    assert_eq!(down.status.code(), Some(0));
    assert_eq!(
        text(&down.stderr).matches("warning").count(),
        1,
        "{}",
        text(&down.stderr)
    );
    assert_eq!(fleet.lines("ran-down"), 1);
    let metrics = std::fs::read_to_string(fleet.path("p.prom")).unwrap();
    assert!(
        metrics.contains("tripline_run_store_errors_total{breaker=\"p\"}"),
        "{metrics}"
    );
    let refused = fleet.run(
        "a",
        41,
        &["--on-store-error", "refuse"],
        "echo x >> ran-down",
    );
    assert_eq!(refused.status.code(), Some(69), "{}", text(&refused.stderr));
    assert_eq!(fleet.lines("ran-down"), 1);

    runtime.block_on(etcd.restart());
    let status = fleet.status("c", 42);
    assert!(status.contains(": closed"), "{status}");
    let after = succeeded(&status);
    println!(
        "runs during the kill: {reported} of 10 reported; store counts {}",
        after - before
    );
    assert!(
        after >= before + reported,
        "{before} + {reported} > {after}"
    );
    assert!(after <= before + 10, "{after}");

    // An operator on one host acts on the fleet's breaker.
    assert_eq!(fleet.operator("b", "--force-open").status.code(), Some(0));
    let forced = fleet.run("c", 43, &[], "echo x >> ran-forced");
    assert_eq!(forced.status.code(), Some(75), "{}", text(&forced.stderr));
    assert!(
        text(&forced.stderr).contains("forced open"),
        "{}",
        text(&forced.stderr)
    );
    assert_eq!(fleet.lines("ran-forced"), 0);
    assert_eq!(fleet.operator("a", "--reset").status.code(), Some(0));
    let reset = fleet.run("c", 43, &[], "echo x >> ran-forced");
    assert_eq!(reset.status.code(), Some(0), "{}", text(&reset.stderr));
    assert_eq!(fleet.lines("ran-forced"), 1);
}

#[test]
fn a_prefix_holding_something_else_is_refused_and_left_alone() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(Etcd::start());
    let gateway = etcd.gateway();
    runtime
        .block_on(gateway.put(b"/other/run/p/state", b"not a breaker", 0))
        .unwrap();
    let fleet = Fleet::new(format!(
        "{}/other",
        etcd.endpoint().replace("http://", "etcd://")
    ));
    let out = fleet.run("a", 0, &[], "echo x >> ran");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("TRIPLINE_STORE"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("wrong prefix"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(fleet.lines("ran"), 0);
    let (kvs, _) = runtime
        .block_on(gateway.range(b"/other/run/p/state", false, 0))
        .unwrap();
    assert_eq!(kvs[0].value, b"not a breaker");
}

#[test]
fn bad_store_settings_are_refused_naming_where_they_came_from() {
    let fleet = Fleet::new(String::new());
    let check = |extra: &[&str], env: Option<&str>, config: Option<&str>, want: &[&str]| {
        if let Some(c) = config {
            std::fs::write(fleet.path("p.toml"), c).unwrap();
        }
        let mut cmd = fleet.cmd("a", 0, extra, "echo x >> ran");
        cmd.env_remove("TRIPLINE_STORE");
        if let Some(e) = env {
            cmd.env("TRIPLINE_STORE", e);
        }
        let out = cmd.output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        for w in want {
            assert!(err.contains(w), "{w:?} not in {err}");
        }
        assert_eq!(fleet.lines("ran"), 0);
        assert!(!Path::new(&fleet.path("a/p.json")).exists());
    };
    check(
        &["--store", "http://127.0.0.1:2379/ci"],
        None,
        None,
        &["--store", "etcd://"],
    );
    check(
        &["--store", "etcd://127.0.0.1:2379"],
        None,
        None,
        &["--store", "prefix"],
    );
    check(
        &[],
        Some("etcd://127.0.0.1:2379/"),
        None,
        &["TRIPLINE_STORE", "prefix"],
    );
    let no_prefix = format!("{CONFIG}url = \"etcd://127.0.0.1:2379\"\n");
    check(&[], None, Some(&no_prefix), &["[store] url", "prefix"]);
    let unknown = format!("{CONFIG}endpoint = \"x\"\n");
    check(&[], None, Some(&unknown), &["[store]", "endpoint"]);
    let short = CONFIG.replace("\"8s\"", "\"1s\"");
    check(&[], None, Some(&short), &["[store] probe_ttl"]);
}

#[test]
fn flag_beats_environment_beats_file_and_refuse_exits_69() {
    // Nothing listens on the flag's port; the environment's and the file's
    // URLs are malformed and would be refused as bad input if they won.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let fleet = Fleet::new("garbage".into());
    let config = format!("{CONFIG}url = \"also garbage\"\non_store_error = \"refuse\"\n");
    std::fs::write(fleet.path("p.toml"), config).unwrap();
    let flag = format!("etcd://127.0.0.1:{port}/ci");
    let out = fleet.run("a", 0, &["--store", &flag], "echo x >> ran");
    assert_eq!(out.status.code(), Some(69), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("refuse"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(fleet.lines("ran"), 0);
    // The flag's `run` beats the file's `refuse`.
    let out = fleet.run(
        "a",
        0,
        &["--store", &flag, "--on-store-error", "run"],
        "echo x >> ran",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(fleet.lines("ran"), 1);
    // Without the flag, the environment's URL beats the file's: it is the
    // one refused, by its name.
    let out = fleet.run("a", 0, &[], "echo x >> ran");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("TRIPLINE_STORE \"garbage\""),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(fleet.lines("ran"), 1);
}

#[test]
fn the_books_store_sample_is_a_config_run_takes() {
    // The `run` chapter's TOML sample with a `[store]` table, as printed:
    // read whole (exit 69: its etcd host is not there), never refused as
    // bad input (exit 2).
    let book = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/src/run.md"
    ))
    .unwrap();
    let start = book.find("```toml\n").unwrap() + "```toml\n".len();
    let sample = &book[start..start + book[start..].find("```").unwrap()];
    assert!(sample.contains("[store]"), "{sample}");
    let local = "etcd://127.0.0.1:1/ci";
    let sample = sample.replace("etcd://etcd.internal:2379/ci", local);
    let fleet = Fleet::new(String::new());
    std::fs::write(fleet.path("p.toml"), sample).unwrap();
    let mut cmd = fleet.cmd("a", 0, &[], "echo x >> ran");
    cmd.env_remove("TRIPLINE_STORE");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(local), "{}", text(&out.stderr));
    assert_eq!(fleet.lines("ran"), 1);
}

/// One JSON POST to etcd's gateway over a plain socket (the auth calls the
/// test needs are not in the client).
fn post(endpoint: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let authority = endpoint.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn an_etcd_that_demands_auth_is_bad_input_naming_the_store() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = runtime.block_on(Etcd::start());
    let e = etcd.endpoint();
    for (path, body) in [
        ("/v3/auth/role/add", r#"{"name":"root"}"#),
        ("/v3/auth/user/add", r#"{"name":"root","password":"pw"}"#),
        ("/v3/auth/user/grant", r#"{"user":"root","role":"root"}"#),
        ("/v3/auth/enable", "{}"),
    ] {
        assert!(post(&e, path, body).starts_with("HTTP/1.1 200"), "{path}");
    }
    let fleet = Fleet::new(format!("{}/ci", e.replace("http://", "etcd://")));
    // Refused as bad input (exit 2), not taken for an outage: running the
    // command unguarded would hide a misconfigured store for good.
    let out = fleet.run("a", 0, &[], "echo x >> ran");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("TRIPLINE_STORE") && err.contains("user name is empty"),
        "{err}"
    );
    assert_eq!(fleet.lines("ran"), 0);
}
