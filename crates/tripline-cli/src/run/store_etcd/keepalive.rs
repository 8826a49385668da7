//! Renewing a probe's etcd lease while its command runs.
//!
//! A thread of its own with its own client: the run's thread is blocked
//! waiting for the command. It renews every third of the TTL, so two
//! renewals may fail (etcd restarting) before the lease lapses.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use tripline_config::etcd::Gateway;

/// The renewing thread; [`KeepAlive::stop`] ends it.
pub(crate) struct KeepAlive {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl KeepAlive {
    /// Starts renewing `lease`; `None` if no thread could be started (the
    /// lease then lapses after its TTL, and the probe with it).
    pub(crate) fn start(endpoint: &str, lease: i64, ttl: Duration) -> Option<KeepAlive> {
        let (stop, stopped) = mpsc::channel::<()>();
        let endpoint = endpoint.to_owned();
        let every = ttl / 3;
        let thread = std::thread::Builder::new()
            .name("etcd-keepalive".into())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                let gateway = Gateway::new(endpoint, every);
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    let _ = runtime.block_on(gateway.lease_keepalive(lease));
                }
            })
            .ok()?;
        Some(KeepAlive { stop, thread })
    }

    /// Stops renewing (and waits for the thread).
    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}
