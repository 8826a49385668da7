//! A real ZooKeeper server for the tests: Debian's jars, started with
//! `java -cp … ZooKeeperServerMain <port> <datadir> <tickTime>` on a free
//! loopback port with a temp data dir, stopped when dropped. A server that
//! cannot start fails the test with the package to install.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

/// Debian's `zookeeper` package's jars, and what the server needs of
/// theirs (Debian's `libzookeeper-java` lists them).
const JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
    "netty-handler.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-transport.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "commons-io.jar",
];

/// A running standalone server.
pub struct ZooKeeper {
    pub port: u16,
    data: tempfile::TempDir,
    child: Option<Child>,
}

impl ZooKeeper {
    /// Starts a server on a free port (tick 200 ms: sessions of 0.4–4 s).
    pub async fn start() -> ZooKeeper {
        let mut zk = ZooKeeper::stopped();
        zk.restart().await;
        zk
    }

    /// A free port and a data dir, the server not started yet.
    pub fn stopped() -> ZooKeeper {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let data = tempfile::tempdir().expect("a temp data dir");
        ZooKeeper {
            port,
            data,
            child: None,
        }
    }

    /// `127.0.0.1:port`, as a connect string.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server (as a crash would) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data (the sessions it
    /// knew survive, as after a real restart), or with its data wiped
    /// (every session expired, every node gone).
    pub async fn restart_with(&mut self, wipe: bool) {
        self.kill();
        if wipe {
            let dir = self.data.path().to_owned();
            std::fs::remove_dir_all(&dir).expect("wipe the data dir");
            std::fs::create_dir_all(&dir).expect("recreate the data dir");
        }
        self.restart().await;
    }

    async fn restart(&mut self) {
        let lib = PathBuf::from("/usr/share/java");
        if !lib.join("zookeeper.jar").exists() {
            panic!(
                "ZooKeeper is not installed: /usr/share/java/zookeeper.jar is missing \
                 (install the Debian package `zookeeper`: scripts/install-deps)"
            );
        }
        let classpath: Vec<String> = JARS
            .iter()
            .map(|j| lib.join(j).display().to_string())
            .collect();
        let child = Command::new("java")
            .arg("-Dzookeeper.admin.enableServer=false")
            .arg("-Dzookeeper.4lw.commands.whitelist=srvr")
            .arg("-cp")
            .arg(classpath.join(":"))
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(self.port.to_string())
            .arg(self.data.path())
            .arg("200")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run java for ZooKeeper ({e}): install a JRE and the Debian package `zookeeper`"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if self.answers() {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("ZooKeeper exited at start ({status}) on port {}", self.port);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("ZooKeeper did not answer on {} within 15 s", self.address());
    }

    /// Whether the server says it is serving (`srvr` → `Mode: standalone`).
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut answer = String::new();
        s.write_all(b"srvr").is_ok()
            && s.read_to_string(&mut answer).is_ok()
            && answer.contains("Mode: standalone")
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        self.kill();
    }
}
