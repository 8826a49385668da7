//! `tripline proxy` through the real binary, driven by `curl` (Debian
//! package `curl`): traffic passes, a failing upstream trips the route
//! breaker and curl sees the explained refusal, SIGTERM drains and exits
//! 0. And `tripline check` on proxy configs, TOML and YAML.

#[path = "support/run.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use support::{Dir, tripline};

/// Every wait on the child is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

/// An upstream on a thread answering every request with `status`.
fn upstream(status: Arc<AtomicU16>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let status = status.load(Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello"
                );
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    addr
}

/// Whether these tests follow `line`: the CLI's own lines, not the
/// start-up lines after the listeners' (the admin URLs, the breakers
/// built: `proxy_start.rs` tests those) nor the `tracing` log's.
fn is_followed(line: &str) -> bool {
    line.starts_with("tripline proxy: ")
        && !line.contains(" at http://")
        && !line.contains("): trips at")
}

/// Kills the proxy if a test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn curl(url: &str) -> String {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "5", url])
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_lowercase()
}

fn require_curl() {
    let found = Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "curl is missing: install the Debian package `curl` (apt-get install -y curl)"
    );
}

#[test]
fn curl_through_the_proxy_sees_traffic_then_an_explained_refusal_and_sigterm_drains() {
    require_curl();
    let status = Arc::new(AtomicU16::new(200));
    let backend = upstream(status.clone());
    let dir = Dir::new();
    let config = dir.write(
        "proxy.toml",
        &format!(
            r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
breaker = {{ window = {{ kind = "count", size = 4 }}, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "60s" }}

[clusters.backend]
endpoints = ["{backend}"]
breaker = {{ window = {{ kind = "count", size = 100 }}, minimum_calls = 100 }}
"#
        ),
    );
    let child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args([
            "proxy",
            "--config",
            config.to_str().expect("path"),
            "--threads",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the proxy");
    let mut child = Running(child);
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.0.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if is_followed(&line) {
                let _ = lines_tx.send(line);
            }
        }
    });
    let first = lines
        .recv_timeout(BOUND)
        .expect("the proxy says where it listens");
    let addr = first
        .strip_prefix("tripline proxy: listening on ")
        .expect(&first)
        .to_owned();
    let url = format!("http://{addr}/orders");

    let ok = curl(&url);
    assert!(
        ok.starts_with("http/1.1 200") && ok.ends_with("hello"),
        "{ok}"
    );

    status.store(500, Ordering::SeqCst);
    // The window holds the success and three failures: 75 % of 4 calls trips.
    for _ in 0..3 {
        let failed = curl(&url);
        assert!(failed.starts_with("http/1.1 500"), "{failed}");
    }
    let refused = curl(&url);
    assert!(refused.starts_with("http/1.1 503"), "{refused}");
    for header in [
        "x-tripline-rejected: circuit_open",
        "x-tripline-flag: co",
        "x-tripline-breaker: api",
        "retry-after: 60",
        "cache-control: no-store",
    ] {
        assert!(refused.contains(header), "{header} in {refused}");
    }
    assert!(
        refused.contains(r#""rejected":"circuit_open""#),
        "{refused}"
    );

    let pid = child.0.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let (done_tx, done) = mpsc::channel();
    let mut proc = std::mem::replace(&mut child.0, Command::new("true").spawn().expect("true"));
    std::thread::spawn(move || {
        let _ = done_tx.send(proc.wait());
    });
    let exit = done
        .recv_timeout(BOUND)
        .expect("the proxy exits after SIGTERM")
        .expect("wait");
    assert!(exit.success(), "{exit:?}");
    assert_eq!(
        lines.recv_timeout(BOUND).as_deref(),
        Ok("tripline proxy: drained")
    );
}

#[test]
fn check_accepts_a_proxy_config_and_names_file_and_field_when_it_is_wrong() {
    let dir = Dir::new();
    let good = dir.write(
        "proxy.toml",
        r#"
[[listeners]]
address = "127.0.0.1:8080"
[[routes]]
name = "api"
cluster = "backend"
breaker = { window = { kind = "count", size = 10 }, minimum_calls = 20 }
[clusters.backend]
endpoints = ["127.0.0.1:9000"]
"#,
    );
    let out = tripline(["check", good.to_str().expect("path")]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    assert!(
        text.contains("valid proxy config (1 listener, 1 route, 1 cluster, 2 warnings)"),
        "{text}"
    );
    // The route sets no timeout: the default guards it, and check says so.
    assert!(
        text.contains("proxy.toml:4: routes[0].timeout: route api sets no overall timeout: the default of 15s applies"),
        "{text}"
    );
    assert!(
        text.contains("warning: `routes[0].breaker.minimum_calls`"),
        "{text}"
    );

    let bad = dir.write(
        "bad.toml",
        &std::fs::read_to_string(&good)
            .expect("read")
            .replace("\"backend\"\nbreaker", "\"nope\"\nbreaker"),
    );
    let out = tripline(["check", bad.to_str().expect("path")]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr
            .contains("bad.toml:6: routes[0].cluster: names no cluster"),
        "{}",
        out.stderr
    );
}

#[test]
fn sighup_reloads_the_file_and_an_invalid_file_changes_nothing() {
    require_curl();
    let first = upstream(Arc::new(AtomicU16::new(200)));
    let second = upstream(Arc::new(AtomicU16::new(202)));
    let dir = Dir::new();
    let text = |extra: &str| {
        format!(
            "[[listeners]]\naddress = \"127.0.0.1:0\"\n{extra}\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"{first}\"]\n"
        )
    };
    let config = dir.write("proxy.toml", &text(""));
    let child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(["proxy", "--config", config.to_str().expect("path")])
        .args(["--threads", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the proxy");
    let mut child = Running(child);
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.0.stdout.take().expect("stdout");
    let stderr = child.0.stderr.take().expect("stderr");
    for out in [Box::new(stdout) as Box<dyn Read + Send>, Box::new(stderr)] {
        let lines_tx = lines_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if is_followed(&line) {
                    let _ = lines_tx.send(line);
                }
            }
        });
    }
    let listening = lines
        .recv_timeout(BOUND)
        .expect("the proxy says where it listens");
    let addr = listening
        .strip_prefix("tripline proxy: listening on ")
        .expect(&listening)
        .to_owned();
    assert!(curl(&format!("http://{addr}/moved")).starts_with("http/1.1 200"));
    let hangup = |pid: u32| {
        let sent = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    };

    let moved = format!(
        "\n[[routes]]\nname = \"moved\"\ncluster = \"other\"\nmatch = {{ path_prefix = \"/moved\" }}\n\n[clusters.other]\nendpoints = [\"{second}\"]\n"
    );
    dir.write("proxy.toml", &text(&moved));
    hangup(child.0.id());
    let said = lines.recv_timeout(BOUND).expect("the reload is reported");
    assert!(said.starts_with("tripline proxy: reloaded"), "{said}");
    assert!(curl(&format!("http://{addr}/moved")).starts_with("http/1.1 202"));

    dir.write("proxy.toml", &text(&moved).replace("/moved", "moved"));
    hangup(child.0.id());
    let said = lines.recv_timeout(BOUND).expect("the refusal is reported");
    assert!(
        said.contains("reload refused, the last good config stays")
            && said.contains("proxy.toml:")
            && said.contains("routes[0].match.path_prefix"),
        "{said}"
    );
    assert!(curl(&format!("http://{addr}/moved")).starts_with("http/1.1 202"));
}

#[test]
fn check_accepts_a_yaml_proxy_config_and_names_file_line_and_field_when_it_is_wrong() {
    let dir = Dir::new();
    let text = "listeners:\n  - address: 127.0.0.1:8080\nroutes:\n  - name: api\n    cluster: backend\n    breaker:\n      window: { kind: count, size: 10 }\n      minimum_calls: 20\nclusters:\n  backend:\n    endpoints: [127.0.0.1:9000]\n";
    let good = dir.write("proxy.yaml", text);
    let out = tripline(["check", good.to_str().expect("path")]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let said = out.text();
    assert!(
        said.contains(
            "proxy.yaml: valid proxy config (1 listener, 1 route, 1 cluster, 2 warnings)"
        ),
        "{said}"
    );
    assert!(
        said.contains("warning: `routes[0].breaker.minimum_calls`"),
        "{said}"
    );

    for (name, bad, says) in [
        (
            "bad.yaml",
            text.replace("cluster: backend", "cluster: nope"),
            "bad.yaml:5: routes[0].cluster: names no cluster",
        ),
        (
            "bad.yml",
            text.replace("minimum_calls: 20", "minimum_calls: -1"),
            "bad.yml:8: routes[0].breaker.minimum_calls: invalid type",
        ),
        (
            "syntax.yaml",
            text.replace("    cluster: backend", "      cluster: backend"),
            "syntax.yaml:5: mapping values are not allowed",
        ),
    ] {
        let bad = dir.write(name, &bad);
        let out = tripline(["check", bad.to_str().expect("path")]);
        assert_eq!(out.status, 2, "{name}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{name}: nothing on stdout");
        assert!(out.stderr.contains(says), "{name}: {}", out.stderr);
    }
}

#[test]
fn check_builds_the_proxy_so_a_missing_tls_file_fails_as_the_start_would() {
    let dir = Dir::new();
    let missing = dir.path("missing.pem");
    let key = dir.write("key.pem", "not used: the certificate is read first");
    let config = dir.write(
        "proxy.toml",
        &format!(
            "[[listeners]]\naddress = \"127.0.0.1:0\"\ntls = {{ cert = {:?}, key = {:?} }}\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9000\"]\n",
            missing.display().to_string(),
            key.display().to_string()
        ),
    );
    let says = format!(
        "proxy.toml:3: listeners[0].tls.cert: cannot read {}",
        missing.display()
    );
    let out = tripline(["check", config.to_str().expect("path")]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "nothing on stdout");
    assert!(out.stderr.contains(&says), "{}", out.stderr);
    // The start refuses it with the same words, naming the file too.
    let out = tripline(["proxy", "--config", config.to_str().expect("path")]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains(&says), "{}", out.stderr);
}

#[test]
fn a_yaml_config_serves_and_a_bad_reload_names_file_line_and_field() {
    require_curl();
    let backend = upstream(Arc::new(AtomicU16::new(200)));
    let dir = Dir::new();
    let text = format!(
        "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: api\n    cluster: backend\n    match: {{ path_prefix: /api }}\nclusters:\n  backend:\n    endpoints: [\"{backend}\"]\n"
    );
    let config = dir.write("proxy.yaml", &text);
    let child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(["proxy", "--config", config.to_str().expect("path")])
        .args(["--threads", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the proxy");
    let mut child = Running(child);
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.0.stdout.take().expect("stdout");
    let stderr = child.0.stderr.take().expect("stderr");
    for out in [Box::new(stdout) as Box<dyn Read + Send>, Box::new(stderr)] {
        let lines_tx = lines_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if is_followed(&line) {
                    let _ = lines_tx.send(line);
                }
            }
        });
    }
    let listening = lines
        .recv_timeout(BOUND)
        .expect("the proxy says where it listens");
    let addr = listening
        .strip_prefix("tripline proxy: listening on ")
        .expect(&listening)
        .to_owned();
    let ok = curl(&format!("http://{addr}/api/orders"));
    assert!(
        ok.starts_with("http/1.1 200") && ok.ends_with("hello"),
        "{ok}"
    );

    dir.write(
        "proxy.yaml",
        &text.replace("path_prefix: /api", "path_prefix: api"),
    );
    let sent = Command::new("kill")
        .args(["-HUP", &child.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let said = lines.recv_timeout(BOUND).expect("the refusal is reported");
    assert!(
        said.contains("reload refused, the last good config stays")
            && said.contains("proxy.yaml:6: routes[0].match.path_prefix"),
        "{said}"
    );
    assert!(curl(&format!("http://{addr}/api/orders")).starts_with("http/1.1 200"));

    // What only the rebuild finds (here a CA file that is not there) names
    // the file and the line too.
    let missing = dir.path("missing-ca.pem");
    dir.write(
        "proxy.yaml",
        &format!(
            "{text}    tls: {{ ca: {:?} }}\n",
            missing.display().to_string()
        ),
    );
    let sent = Command::new("kill")
        .args(["-HUP", &child.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let said = lines.recv_timeout(BOUND).expect("the refusal is reported");
    assert!(
        said.contains("reload refused, the last good config stays")
            && said.contains(&format!(
                "proxy.yaml:10: clusters.backend.tls.ca: cannot read {}",
                missing.display()
            )),
        "{said}"
    );
    assert!(curl(&format!("http://{addr}/api/orders")).starts_with("http/1.1 200"));
}

#[test]
fn check_warns_about_every_route_without_a_timeout_a_breaker_or_a_sized_retry_budget() {
    let dir = Dir::new();
    let file = dir.write(
        "proxy.toml",
        r#"
[[listeners]]
address = "127.0.0.1:8080"

[[routes]]
name = "bare"
cluster = "backend"
retry = { attempts = 3 }

[[routes]]
name = "unlimited"
cluster = "backend"
timeout = "none"
breaker = { name = "unlimited" }

[[routes]]
name = "protected"
cluster = "backend"
timeout = { overall = "2s" }
breaker = { name = "protected" }
retry = { attempts = 2, budget = { ratio = 0.1, min_retries_per_second = 5 } }

[clusters.backend]
endpoints = ["127.0.0.1:9000"]
"#,
    );
    let out = tripline(["check", file.to_str().expect("path")]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    for expected in [
        "proxy.toml:5: routes[0].timeout: route bare sets no overall timeout",
        "proxy.toml:5: routes[0].breaker: route bare has no breaker of its own",
        "proxy.toml:8: routes[0].retry.budget: route bare retries on the default budget",
        "proxy.toml:13: routes[1].timeout: route unlimited has no time limit (\"none\")",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
    assert!(!text.contains("route protected"), "{text}");
    assert!(text.contains("4 warnings"), "{text}");
}
