//! A real etcd (Debian package `etcd-server`) on free 127.0.0.1 ports with
//! a temporary data dir, restartable on the same dir.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // shared by several tests; they fail loudly

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tripline_config::etcd::Gateway;

/// A running etcd, killed when dropped.
pub struct Etcd {
    child: Option<Child>,
    /// Holds the data dir and the server's log.
    pub dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
}

/// Two free ports, told apart: both listeners are held while the second
/// is picked (a port released and picked again may well come back).
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").unwrap();
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().unwrap().port();
    (port(&a), port(&b))
}

impl Etcd {
    /// Starts etcd and waits (at most 20 s) until its gateway answers.
    pub async fn start() -> Etcd {
        let (client_port, peer_port) = free_ports();
        let mut etcd = Etcd {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            client_port,
            peer_port,
        };
        etcd.launch().await;
        etcd
    }

    /// The client URL (gateway included).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// A gateway client of this server.
    pub fn gateway(&self) -> Gateway {
        Gateway::new(self.endpoint(), Duration::from_secs(5))
    }

    /// Kills the server (SIGKILL: no graceful goodbye to watchers).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and data dir.
    pub async fn restart(&mut self) {
        self.kill();
        self.launch().await;
    }

    async fn launch(&mut self) {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let data: PathBuf = self.dir.path().join("data");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .unwrap();
        let child = Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(&data)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .arg("--initial-cluster")
            .arg(format!("test={peer}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `etcd` ({e}): install the Debian package etcd-server")
            });
        self.child = Some(child);
        let gateway = self.gateway();
        for _ in 0..200 {
            if gateway.range(b"/probe", false, 0).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        panic!("etcd did not answer within 20 s; its log:\n{log}");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}
