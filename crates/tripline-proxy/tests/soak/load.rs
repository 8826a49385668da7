//! A steady request rate through the proxy, counting every request and
//! every one left without a response.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{Mutex, Semaphore};
use tokio::task::JoinHandle;

/// Requests in flight at most; beyond it the generator waits (a request
/// bounded by the route's 1 s deadline frees its slot quickly).
pub const MAX_IN_FLIGHT: usize = 64;

/// How long a request may take before it counts as unanswered: far past
/// the route's 1 s overall timeout.
const ANSWER_BOUND: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    answered: AtomicU64,
    unanswered: AtomicU64,
    ok: AtomicU64,
}

/// The totals of a run.
#[derive(Debug)]
pub struct Totals {
    pub sent: u64,
    pub answered: u64,
    pub unanswered: u64,
    pub ok: u64,
    /// The first few requests without a response, and why.
    pub first_errors: Vec<String>,
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sent, {} answered ({} with 200), {} unanswered {:?}",
            self.sent, self.answered, self.ok, self.unanswered, self.first_errors
        )
    }
}

pub struct Load {
    counts: Arc<Counts>,
    errors: Arc<Mutex<Vec<String>>>,
    slots: Arc<Semaphore>,
    generator: JoinHandle<()>,
}

impl Load {
    pub fn start(proxy: SocketAddr, rate: u32) -> Load {
        let counts = Arc::new(Counts::default());
        let errors = Arc::new(Mutex::new(Vec::new()));
        let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(1))
            .build_http::<Full<Bytes>>();
        let (c, e, s) = (counts.clone(), errors.clone(), slots.clone());
        let generator = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let slot = s.clone().acquire_owned().await.unwrap();
                let (client, counts, errors) = (client.clone(), c.clone(), e.clone());
                counts.sent.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let req = http::Request::get(format!("http://{proxy}/soak"))
                        .body(Full::new(Bytes::new()))
                        .unwrap();
                    let answer = tokio::time::timeout(ANSWER_BOUND, async {
                        let response = client.request(req).await.map_err(|e| format!("{e:?}"))?;
                        let status = response.status();
                        response
                            .into_body()
                            .collect()
                            .await
                            .map_err(|e| format!("body: {e}"))?;
                        Ok::<_, String>(status)
                    })
                    .await;
                    match answer {
                        Ok(Ok(status)) => {
                            counts.answered.fetch_add(1, Ordering::SeqCst);
                            if status == http::StatusCode::OK {
                                counts.ok.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        Ok(Err(e)) => fail(&counts, &errors, e).await,
                        Err(_) => fail(&counts, &errors, "no answer within 10 s".into()).await,
                    }
                    drop(slot);
                });
            }
        });
        Load {
            counts,
            errors,
            slots,
            generator,
        }
    }

    /// Stops sending, waits for every request in flight, and returns the
    /// totals.
    pub async fn stop(self) -> Totals {
        self.generator.abort();
        let _ = self.generator.await;
        let all = self.slots.acquire_many(MAX_IN_FLIGHT as u32).await.unwrap();
        drop(all);
        let c = &self.counts;
        Totals {
            sent: c.sent.load(Ordering::SeqCst),
            answered: c.answered.load(Ordering::SeqCst),
            unanswered: c.unanswered.load(Ordering::SeqCst),
            ok: c.ok.load(Ordering::SeqCst),
            first_errors: self.errors.lock().await.clone(),
        }
    }
}

async fn fail(counts: &Counts, errors: &Mutex<Vec<String>>, error: String) {
    counts.unanswered.fetch_add(1, Ordering::SeqCst);
    let mut errors = errors.lock().await;
    if errors.len() < 5 {
        errors.push(error);
    }
}
