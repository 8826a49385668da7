//! The binary's log lines: what the library and the proxy report through
//! `tracing` reaches stderr, as text or JSON, at the level asked for.

#[path = "support/run.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{Dir, tripline};

/// Every wait on the proxy is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

/// Kills the proxy when the test ends, passed or not.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// One HTTP/1.1 request; the status line of the answer.
fn get(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the proxy");
    stream.set_read_timeout(Some(BOUND)).expect("timeout");
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")
        .expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

/// A proxy with one route whose breaker trips on two failed calls, in
/// front of a port nothing listens on.
fn tripping_proxy(dir: &Dir) -> std::path::PathBuf {
    let dead = closed_port();
    dir.write(
        "proxy.toml",
        &format!(
            r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
breaker = {{ name = "api", window = {{ kind = "count", size = 2 }}, minimum_calls = 2, failure_rate_threshold = 0.5, open_duration = "60s", half_open = {{ policy = "consecutive", successes = 1 }} }}

[clusters.backend]
endpoints = ["127.0.0.1:{dead}"]
"#
        ),
    )
}

/// A started proxy: the process, its listener's address, the rest of its
/// stdout, and its stderr lines as they come.
struct Started {
    proxy: Running,
    addr: String,
    stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
    stderr: mpsc::Receiver<String>,
}

fn start(config: &std::path::Path) -> Started {
    let child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args([
            "--log-format",
            "json",
            "proxy",
            "--threads",
            "1",
            "--config",
        ])
        .arg(config)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the proxy");
    let mut proxy = Running(child);
    let mut stdout = BufReader::new(proxy.0.stdout.take().expect("stdout")).lines();
    let first = stdout.next().expect("a line").expect("stdout");
    let addr = first
        .strip_prefix("tripline proxy: listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    let (lines_tx, lines) = mpsc::channel();
    let stderr = proxy.0.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    Started {
        proxy,
        addr,
        stdout,
        stderr: lines,
    }
}

#[test]
fn a_proxy_with_log_format_json_writes_the_breaker_trip_as_a_json_line_on_stderr() {
    let dir = Dir::new();
    let Started {
        proxy: _proxy,
        addr,
        stdout: _stdout,
        stderr: lines,
    } = start(&tripping_proxy(&dir));

    // Two refused connections trip the route breaker (2 of 2 failed).
    for _ in 0..2 {
        let status = get(&addr);
        assert!(status.starts_with("HTTP/1.1 50"), "{status}");
    }
    // Each line within BOUND, and the trip among the first hundred.
    let mut seen = Vec::new();
    let transition = loop {
        assert!(seen.len() < 100, "no trip among {seen:#?}");
        let line = lines
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("no trip logged on stderr; saw {seen:#?}"));
        let value: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a stderr line that is not JSON ({e}): {line}"));
        if value["fields"]["message"] == "circuit breaker transition" {
            break value;
        }
        seen.push(line);
    };
    assert_eq!(transition["level"], "INFO", "{transition}");
    assert_eq!(transition["target"], "tripline::breaker", "{transition}");
    assert_eq!(transition["fields"]["to"], "open", "{transition}");
    assert!(transition["timestamp"].is_string(), "{transition}");
}

/// Sends `signal` to the proxy.
fn signal(proxy: &Running, signal: &str) {
    let sent = Command::new("kill")
        .args([signal, &proxy.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
}

#[test]
fn a_proxy_whose_stdout_reader_goes_away_keeps_serving_reloading_and_drains_cleanly() {
    let dir = Dir::new();
    let config = tripping_proxy(&dir);
    let Started {
        mut proxy,
        addr,
        stdout,
        stderr,
    } = start(&config);
    // The reader of the start-up lines (a log collector, `| head -1`)
    // goes away; the proxy still has lines to print: on every reload, and
    // when it drains.
    drop(stdout);
    for _ in 0..2 {
        signal(&proxy, "-HUP");
        let status = get(&addr);
        assert!(status.starts_with("HTTP/1.1 50"), "{status}");
    }
    // The second reload happened (its thread did not die on the first
    // line it could not print): a bad file now is refused on stderr.
    std::fs::write(&config, "[[routes]]\nname = 1\n").expect("write");
    signal(&proxy, "-HUP");
    let refused = stderr
        .iter()
        .take(100)
        .find(|l| l.contains("reload refused") || l.contains("panicked"));
    assert!(
        refused
            .as_deref()
            .is_some_and(|l| l.contains("reload refused")),
        "{refused:?}"
    );
    signal(&proxy, "-TERM");
    let (done_tx, done) = mpsc::channel();
    let mut child = std::mem::replace(&mut proxy.0, Command::new("true").spawn().expect("true"));
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait());
    });
    let exit = done
        .recv_timeout(BOUND)
        .expect("the proxy exits after SIGTERM")
        .expect("wait");
    let panics: Vec<String> = stderr
        .try_iter()
        .filter(|l| l.contains("panicked"))
        .collect();
    assert!(exit.success() && panics.is_empty(), "{exit:?} {panics:#?}");
}

#[test]
fn an_invalid_log_level_is_refused_naming_the_flag() {
    let out = tripline(["--log-level", "info,=[", "demo", "--duration", "1s"]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--log-level"), "{}", out.stderr);
}

#[test]
fn demo_help_documents_duration_as_the_readme_does() {
    let out = tripline(["demo", "--help"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let help = out.text();
    assert!(help.contains("--duration <DURATION>"), "{help}");
    assert!(!help.contains("--seconds <"), "{help}");
    // The older name still works.
    let out = tripline(["demo", "--seconds", "2"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.text().contains("20 calls"), "{}", out.text());
}

#[test]
fn the_live_demo_does_not_repeat_its_own_lines_as_log_lines() {
    let out = tripline(["demo", "--live", "--duration", "6s"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    // The demo prints the ejections itself; at the default level the
    // outlier detector's WARN lines stay out of its output.
    assert!(out.text().contains("ejected by"), "{}", out.text());
    assert!(!out.stderr.contains(" WARN "), "{}", out.stderr);
}
