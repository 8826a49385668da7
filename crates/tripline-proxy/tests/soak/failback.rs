//! A durable failback queue (the library's `Failback`) delivering through
//! the proxy during the soak: a producer submits an entry every 100 ms, a
//! worker runs the due deliveries, and whatever the fault schedule breaks
//! must still arrive — every entry delivered to an upstream that answered
//! 200, none refused, none given up, none left pending once healed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tripline::ManualClock;
use tripline::cluster::{
    Cluster, EndpointConfig, Failback, FailbackConfig, FailbackStats, FsyncPolicy,
};
use tripline::retry::RetryBackoff;

use crate::upstream::{FAILBACK_PATH, Received};

/// The producer and the delivery worker, on threads of their own (a
/// delivery is a blocking HTTP call through the proxy).
pub struct FailbackLoad {
    failback: Failback<String>,
    stop_producing: Arc<AtomicBool>,
    stop_delivering: Arc<AtomicBool>,
    producer: JoinHandle<Vec<Vec<u8>>>,
    worker: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

/// What the failback queue did over the run.
pub struct FailbackTotals {
    pub submitted: usize,
    pub stats: FailbackStats,
    pub pending: usize,
    /// Submitted entries no upstream answered 200.
    pub missing: usize,
}

impl std::fmt::Display for FailbackTotals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.stats;
        write!(
            f,
            "failback: {} submitted ({} delivered at once, {} queued, {} refused), \
             {} delivered later after {} failed retries, {} given up, {} pending, {} missing",
            self.submitted,
            s.delivered_first,
            s.queued,
            s.refused,
            s.delivered_later,
            s.retries_failed,
            s.gave_up,
            self.pending,
            self.missing
        )
    }
}

impl FailbackLoad {
    /// Starts submitting entries for `proxy`, on `clock` (the soak's
    /// clock, which follows real time).
    pub fn start(proxy: SocketAddr, clock: &ManualClock) -> FailbackLoad {
        let dir = tempfile::tempdir().unwrap();
        let cluster = Cluster::builder()
            .endpoint(EndpointConfig::new("proxy", proxy.to_string()))
            .clock(clock.clone())
            .build()
            .unwrap();
        let config = FailbackConfig {
            dir: dir.path().into(),
            // Never give up within a soak: the schedule heals every fault
            // within seconds, so a given-up entry is a failure to find.
            max_retries: 10_000,
            max_age: Duration::from_secs(24 * 3600),
            backoff: RetryBackoff::Exponential {
                initial: Duration::from_millis(200),
                multiplier: 2.0,
                max: Duration::from_secs(2),
            },
            fsync: FsyncPolicy::Never,
            poll_interval: Duration::from_millis(100),
            ..Default::default()
        };
        let failback = Failback::builder(cluster, config)
            .clock(clock.clone())
            .deliver(move |_, payload: &[u8]| post(proxy, payload))
            .open()
            .unwrap();
        let stop_producing = Arc::new(AtomicBool::new(false));
        let stop_delivering = Arc::new(AtomicBool::new(false));
        let producer = {
            let (failback, stop) = (failback.clone(), stop_producing.clone());
            std::thread::spawn(move || {
                let mut submitted = Vec::new();
                for n in 0u64.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let payload = format!("entry-{n}").into_bytes();
                    // A refusal is counted in the stats and asserted on.
                    if failback.submit(&payload).is_ok() {
                        submitted.push(payload);
                    }
                    pause(Duration::from_millis(100));
                }
                submitted
            })
        };
        let worker = {
            let (failback, stop) = (failback.clone(), stop_delivering.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    failback.run_due();
                    pause(Duration::from_millis(50));
                }
            })
        };
        FailbackLoad {
            failback,
            stop_producing,
            stop_delivering,
            producer,
            worker,
            _dir: dir,
        }
    }

    /// Stops submitting, delivers what is still queued (bounded by
    /// `within`; call it once the faults have healed), and compares the
    /// submitted entries with what the upstreams `received`.
    pub async fn finish(self, within: Duration, received: &Received) -> FailbackTotals {
        let FailbackLoad {
            failback,
            stop_producing,
            stop_delivering,
            producer,
            worker,
            _dir,
        } = self;
        // The producer ends first so nothing is submitted once the drain
        // began; the worker keeps delivering until the queue is empty.
        stop_producing.store(true, Ordering::SeqCst);
        let submitted = tokio::task::spawn_blocking(move || producer.join().unwrap())
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + within;
        while failback.pending() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop_delivering.store(true, Ordering::SeqCst);
        tokio::task::spawn_blocking(move || worker.join().unwrap())
            .await
            .unwrap();
        let received = received.lock().unwrap();
        let missing = submitted.iter().filter(|p| !received.contains(*p)).count();
        FailbackTotals {
            submitted: submitted.len(),
            stats: failback.stats(),
            pending: failback.pending(),
            missing,
        }
    }
}

/// One delivery: `POST /soak/failback` through the proxy, delivered only
/// on a 200 (a refusal, a fault, a reset or a timeout is a failure the
/// queue retries).
fn post(proxy: SocketAddr, payload: &[u8]) -> Result<(), String> {
    let timeout = Duration::from_secs(2);
    let mut stream = TcpStream::connect_timeout(&proxy, timeout).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST {FAILBACK_PATH} HTTP/1.1\r\nhost: soak\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        payload.len()
    );
    stream
        .write_all(head.as_bytes())
        .map_err(|e| e.to_string())?;
    stream.write_all(payload).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    match answer.starts_with(b"HTTP/1.1 200 ") {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&answer[..answer.len().min(40)]).into_owned()),
    }
}

/// Paces the producer and the worker in real time: the soak is a real
/// proxy under real load for a fixed real duration, and these threads
/// block on sockets anyway (no runtime to yield to).
#[allow(clippy::disallowed_methods)]
fn pause(d: Duration) {
    std::thread::sleep(d);
}
