//! `tripline demo --live` through the real binary: a short run exits 0 in
//! bounded time, prints the dashboard URL, an endpoint breaker tripping
//! and later closing again, and the dashboard answers while it runs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The whole run must end within this (the demo itself takes 6 s).
const BOUND: Duration = Duration::from_secs(15);

/// `GET /` of `host:port` over a plain socket: the status line and the
/// headers, lowercased.
fn get_root(authority: &str) -> String {
    let mut stream = TcpStream::connect(authority).expect("connect to the dashboard");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    write!(
        stream,
        "GET / HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let head = answer.split("\r\n\r\n").next().unwrap_or_default();
    head.to_ascii_lowercase()
}

/// Now, on the wall clock: the demo is a real process on real time, so
/// its bound can only be measured in real time.
#[allow(clippy::disallowed_methods)] // bounding a real process needs real time
fn now() -> Instant {
    Instant::now()
}

/// Waits for `child` to exit, killing it (and failing) past `bound`.
#[allow(clippy::disallowed_methods)] // polling a real process needs real time
fn exit_within(child: &mut Child, bound: Duration, what: &str) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("poll tripline") {
            return status;
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn live_demo_trips_recovers_and_serves_the_dashboard() {
    let started = now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(["demo", "--live", "--duration", "6s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tripline");
    let stdout = child.stdout.take().expect("stdout");
    let (lines, streamed) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });

    let mut seen = Vec::new();
    let mut dashboard_head = None;
    while let Ok(line) = streamed.recv_timeout(BOUND.saturating_sub(started.elapsed())) {
        if dashboard_head.is_none()
            && let Some(url) = line.strip_prefix("dashboard: ")
        {
            let authority = url
                .strip_prefix("http://")
                .and_then(|rest| rest.strip_suffix('/'))
                .unwrap_or_else(|| panic!("dashboard URL {url:?} is not http://HOST:PORT/"));
            dashboard_head = Some(get_root(authority));
        }
        seen.push(line);
    }
    let waited = exit_within(
        &mut child,
        BOUND.saturating_sub(started.elapsed()),
        "tripline demo --live --duration 6s",
    );
    reader.join().expect("stdout reader");
    let text = seen.join("\n");
    assert!(waited.success(), "exit {waited:?}:\n{text}");

    let head = dashboard_head.unwrap_or_else(|| panic!("no dashboard URL printed:\n{text}"));
    assert!(
        head.starts_with("http/1.1 200"),
        "dashboard answered {head}"
    );
    assert!(
        head.contains("content-type: text/html"),
        "dashboard answered {head}"
    );

    let tripped = seen
        .iter()
        .position(|l| l.contains("closed → open"))
        .unwrap_or_else(|| panic!("no breaker tripped:\n{text}"));
    assert!(
        seen[tripped + 1..].iter().any(|l| l.contains("→ closed")),
        "no breaker closed again after the trip:\n{text}"
    );
    assert!(text.contains("requests: "), "no summary:\n{text}");
    assert!(
        text.contains("refused by the proxy: "),
        "no summary:\n{text}"
    );
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
}

#[test]
fn ctrl_c_stops_the_live_demo_cleanly_with_its_summary() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(["demo", "--live", "--duration", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tripline");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    // The dashboard line comes once the signal handlers are installed.
    while !line.starts_with("dashboard: ") {
        line.clear();
        let read = stdout.read_line(&mut line).expect("read stdout");
        assert!(read > 0, "tripline ended before printing the dashboard URL");
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -INT failed");
    let waited = exit_within(&mut child, Duration::from_secs(8), "after Ctrl-C");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read stdout");
    assert!(waited.success(), "exit {waited:?}:\n{rest}");
    assert!(
        rest.contains("interrupted: stopping the load, draining the proxy"),
        "{rest}"
    );
    assert!(rest.contains("proxy drained"), "{rest}");
    assert!(rest.contains("requests: "), "{rest}");
}
