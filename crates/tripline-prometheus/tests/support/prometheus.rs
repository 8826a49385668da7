//! A real Prometheus server (Debian package `prometheus`) on a free
//! loopback port with a temporary data directory, scraping one target
//! every second and evaluating rules every second; killed on drop.

use std::fs::File;
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::Value;

use crate::bin;
use crate::client;

pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query parameter.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Prometheus {
    /// Starts Prometheus scraping `target` with the rule files `rules`.
    pub fn start(target: SocketAddr, rules: &[std::path::PathBuf]) -> Prometheus {
        let binary = bin::binary("prometheus");
        let dir = tempfile::tempdir().expect("temp dir");
        let rule_files: String = rules
            .iter()
            .map(|r| format!("  - {}\n", r.display()))
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n{rule_files}\
             scrape_configs:\n  - job_name: tripline\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("config");
        let port = client::free_port();
        let log = File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(binary)
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Prometheus {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        }
    }

    /// What the server logged, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET path` on the API, as JSON; `None` until the server answers.
    pub async fn api(&self, path: &str) -> Option<Value> {
        tokio::net::TcpStream::connect(self.addr).await.ok()?;
        let a = client::get(self.addr, path).await;
        serde_json::from_str(&a.body).ok()
    }

    /// The result vector of an instant query.
    pub async fn query(&self, q: &str) -> Vec<Value> {
        let v = self.api(&format!("/api/v1/query?query={}", enc(q))).await;
        v.and_then(|v| v["data"]["result"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The one value of an instant query, if it has exactly one series.
    pub async fn value(&self, q: &str) -> Option<f64> {
        match self.query(q).await.as_slice() {
            [one] => one["value"][1].as_str()?.parse().ok(),
            _ => None,
        }
    }

    /// Prometheus' own time, Unix seconds (`time()`).
    pub async fn now(&self) -> f64 {
        let v = self
            .api(&format!("/api/v1/query?query={}", enc("time()")))
            .await;
        v.and_then(|v| v["data"]["result"][1].as_str()?.parse().ok())
            .expect("time() answers")
    }

    /// The stored samples of one series between `start` and `end` (Unix
    /// seconds), in order.
    pub async fn samples(&self, q: &str, start: f64, end: f64) -> Vec<f64> {
        // A range selector at `end` returns the stored samples themselves,
        // every scrape's, however the scrapes were spaced (a range query
        // would return one value per step, and could step over a sample).
        let seconds = (end - start).ceil().max(1.0);
        let path = format!(
            "/api/v1/query?query={}&time={end}",
            enc(&format!("{q}[{seconds}s]"))
        );
        let v = self.api(&path).await.unwrap_or_default();
        v["data"]["result"][0]["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p[1].as_str()?.parse().ok())
            .collect()
    }

    /// Polls `check` every 200 ms until it says yes; fails after
    /// `timeout` with the server's log.
    pub async fn until(&self, what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !check().await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what}; prometheus log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
