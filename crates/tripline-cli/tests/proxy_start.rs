//! What `tripline proxy` says when it starts, through the real binary:
//! every listener, the admin URLs and every breaker built; a listener
//! address another proxy serves is refused, naming the address. And
//! `tripline check --explain`, which lists the breakers a config builds
//! with their parameters in force.

#[path = "support/run.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{Dir, tripline};

/// Every wait on a child is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

/// Kills the proxy if a test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A proxy config listening on `listen`, with an admin listener, a route
/// breaker and a cluster of one endpoint (nothing listens there: no test
/// here sends traffic).
fn config(dir: &Dir, listen: &str) -> std::path::PathBuf {
    dir.write(
        "proxy.toml",
        &format!(
            r#"
[[listeners]]
address = "{listen}"

[[routes]]
name = "api"
cluster = "backend"
breaker = {{ window = {{ kind = "count", size = 4 }}, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s" }}

[clusters.backend]
endpoints = ["127.0.0.1:9"]

[admin]
address = "127.0.0.1:0"
"#
        ),
    )
}

/// Starts `tripline proxy` on `config` with `extra` arguments, and the
/// lines it prints on stdout.
fn start(config: &std::path::Path, extra: &[&str]) -> (Running, mpsc::Receiver<String>) {
    let child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(["proxy", "--config", config.to_str().expect("path")])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the proxy");
    let mut child = Running(child);
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.0.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    (child, lines)
}

/// The lines printed until the last breaker's, which ends the start-up.
fn start_up_lines(lines: &mpsc::Receiver<String>) -> Vec<String> {
    let mut seen = Vec::new();
    while !seen
        .last()
        .is_some_and(|l: &String| l.contains("endpoint breakers"))
    {
        let line = lines
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("the start-up lines end; so far: {seen:#?}"));
        seen.push(line);
    }
    seen
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[test]
fn start_up_lists_listeners_admin_urls_and_every_breaker_built() {
    let dir = Dir::new();
    let config = config(&dir, "127.0.0.1:0");
    let (_proxy, lines) = start(&config, &["--threads", "1"]);
    let seen = start_up_lines(&lines);
    let text = seen.join("\n");
    assert!(
        seen[0].starts_with("tripline proxy: listening on 127.0.0.1:"),
        "{text}"
    );
    for expected in [
        "tripline proxy: admin API at http://127.0.0.1:",
        "tripline proxy: dashboard at http://127.0.0.1:",
        "tripline proxy: metrics at http://127.0.0.1:",
        "tripline proxy: route breaker api (route api): trips at 50 % failures of at least 4 calls in a count window of 4, open 10s",
        "tripline proxy: endpoint breakers backend (cluster backend, 1 endpoint(s)): trips at",
    ] {
        assert!(text.contains(expected), "{expected:?} in\n{text}");
    }
}

#[test]
fn a_second_proxy_on_the_same_address_exits_naming_it() {
    let dir = Dir::new();
    let address = format!("127.0.0.1:{}", free_port());
    let config = config(&dir, &address);
    let (_first, lines) = start(&config, &["--threads", "2"]);
    let seen = start_up_lines(&lines);
    assert_eq!(seen[0], format!("tripline proxy: listening on {address}"));

    // Per core (SO_REUSEPORT, which the kernel would let a second process
    // share) and on one multi-thread runtime alike.
    for runtime in ["per-core", "multi-thread"] {
        let (mut second, _lines) = start(&config, &["--threads", "2", "--runtime", runtime]);
        // Its stderr ends when it exits; a proxy that shares the address
        // keeps it open.
        let mut stderr_pipe = second.0.stderr.take().expect("stderr");
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr_pipe, &mut text);
            let _ = done_tx.send(text);
        });
        let stderr = done.recv_timeout(BOUND).unwrap_or_else(|_| {
            panic!("{runtime}: the second proxy is still running: it shares {address}")
        });
        let status = second.0.wait().expect("wait");
        assert!(!status.success(), "{runtime}: {status:?}");
        assert!(
            stderr.contains(&format!("{address} is already in use by another process")),
            "{runtime}: {stderr}"
        );
    }
}

#[test]
fn check_explain_lists_every_breaker_with_its_parameters_in_force() {
    let dir = Dir::new();
    let config = dir.write(
        "proxy.toml",
        r#"
[[listeners]]
address = "127.0.0.1:8080"

[[routes]]
name = "api"
cluster = "backend"
breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s" }

[[routes]]
name = "tenants"
cluster = "backend"
breaker_key = { header = "x-tenant" }
breaker = { minimum_calls = 10 }

[clusters.backend]
endpoints = ["127.0.0.1:9000", "127.0.0.1:9001"]
"#,
    );
    let out = tripline(["check", "--explain", config.to_str().expect("path")]);
    let text = out.text();
    assert_eq!(out.status, 0, "{text}{}", out.stderr);
    for expected in [
        "route breaker api (route api): trips at 50 % failures of at least 4 calls in a count window of 4, open 10s\n",
        "  minimum_calls = 4\n",
        "  failure_rate_threshold = 0.5\n",
        "keyed breakers tenants (route tenants, 0 key(s) so far): trips at",
        "  minimum_calls = 10\n",
        "endpoint breakers backend (cluster backend, 2 endpoint(s)): trips at",
        "valid proxy config",
    ] {
        assert!(text.contains(expected), "{expected:?} in\n{text}");
    }
    // Defaults filled in: the endpoint breakers' whole config is shown
    // though the file gives them none.
    let endpoint = text
        .split("endpoint breakers backend")
        .nth(1)
        .expect("the endpoint breakers");
    for key in [
        "window = ",
        "minimum_calls = ",
        "open_duration = ",
        "half_open = ",
    ] {
        assert!(
            endpoint.contains(&format!("\n  {key}")),
            "{key} in\n{endpoint}"
        );
    }
}
