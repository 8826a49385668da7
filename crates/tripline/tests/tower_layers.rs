//! What each tower layer does, on paused tokio time.
#![cfg(all(feature = "tower", feature = "tokio"))]
// Test helpers outside #[test] fns too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::hedge::{Hedge, HedgeConfig, HedgeDelay};
use tripline::pipeline::PolicyError;
use tripline::retry::{Retry, RetryBackoff, RetryConfig, RetryDecision, RetryRefusal};
use tripline::timeout::{DEADLINE_HEADER, Deadline, TokioTimer};
use tripline::tower::{
    BoxError, BudgetExhausted, DeadlineExceeded, DeadlineLayer, HedgeLayer, RetryLayer,
    http_retryable, policy_error,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn retry(budget: Option<RetryBudget>) -> Retry {
    let mut b = Retry::builder()
        .config(RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::Constant { delay: ms(10) },
            ..Default::default()
        })
        .clock(TokioTimer.clock())
        .timer(Arc::new(TokioTimer));
    if let Some(budget) = budget {
        b = b.budget(budget);
    }
    b.build().expect("valid config")
}

fn failing(
    calls: Arc<AtomicU32>,
) -> impl Service<http::Request<()>, Response = u16, Error = BoxError, Future: Send>
+ Clone
+ Send
+ 'static {
    tower::service_fn(move |_: http::Request<()>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err::<u16, BoxError>("503".into()) }
    })
}

#[tokio::test(start_paused = true)]
async fn retry_layer_backs_off_and_reports_budget_exhaustion() {
    let budget = RetryBudget::with_clock(
        RetryBudgetConfig {
            ratio: 0.5,
            min_retries_per_second: 0.0,
            ..Default::default()
        },
        TokioTimer.clock(),
    )
    .unwrap();
    let r = retry(Some(budget.clone()));
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = RetryLayer::new(r.clone()).layer(failing(calls.clone()));
    let start = tokio::time::Instant::now();
    // 1 request earns 0.5 retry: none granted; the error says why.
    let e = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap_err();
    let exhausted = e
        .downcast_ref::<BudgetExhausted>()
        .expect("budget exhausted");
    assert_eq!(exhausted.attempts, 1);
    assert_eq!(exhausted.last.to_string(), "503");
    // The second request makes 1 retry affordable.
    let _ = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        start.elapsed(),
        ms(10),
        "one backoff; a refusal waits for nothing"
    );
    assert_eq!(r.stats().refused(RetryRefusal::Budget), 2);
    assert!(matches!(
        policy_error(e),
        PolicyError::BudgetExhausted { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn retry_layer_never_repeats_a_post_without_an_idempotency_key() {
    let r = retry(None);
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = RetryLayer::new(r.clone())
        .idempotency(http_retryable::<()>)
        .layer(failing(calls.clone()));
    let post = http::Request::post("/charge").body(()).unwrap();
    let _ = svc.ready().await.unwrap().call(post).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 1);
    assert_eq!(r.stats().refused(RetryRefusal::NonIdempotent), 1);
    let keyed = http::Request::post("/charge")
        .header("idempotency-key", "c-1")
        .body(())
        .unwrap();
    let _ = svc.ready().await.unwrap().call(keyed).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 3);
    let get = http::Request::get("/balance").body(()).unwrap();
    let _ = svc.ready().await.unwrap().call(get).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_layer_obeys_pushback() {
    let r = retry(None);
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = RetryLayer::new(r)
        .retry_on(|res: &Result<u16, BoxError>| match res {
            Err(e) if e.to_string() == "503" => RetryDecision::from_retry_after("3"),
            _ => RetryDecision::Done,
        })
        .layer(failing(calls.clone()));
    let start = tokio::time::Instant::now();
    let _ = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await;
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(6),
        "Retry-After: 3 twice"
    );
}

#[tokio::test(start_paused = true)]
async fn deadline_layer_forwards_the_remaining_budget_and_counts_malformed_headers() {
    let layer = DeadlineLayer::new(TokioTimer.clock(), Some(Arc::new(TokioTimer)))
        .floor(ms(10))
        .default_budget(ms(800));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let clock = TokioTimer.clock();
    let mut svc = layer
        .clone()
        .layer(tower::service_fn(move |req: http::Request<()>| {
            let header = req
                .headers()
                .get(DEADLINE_HEADER)
                .map(|v| v.to_str().unwrap().to_owned());
            let ctx = Deadline::current().map(|d| d.remaining(&clock));
            s2.lock().unwrap().push((header, ctx));
            async {
                tokio::time::sleep(ms(50)).await;
                Ok::<_, BoxError>(())
            }
        }));
    let req = |h: Option<(&str, &str)>| {
        let mut b = http::Request::get("/");
        if let Some((k, v)) = h {
            b = b.header(k, v);
        }
        b.body(()).unwrap()
    };
    svc.ready()
        .await
        .unwrap()
        .call(req(Some(("tripline-timeout-ms", "300"))))
        .await
        .unwrap();
    svc.ready()
        .await
        .unwrap()
        .call(req(Some(("tripline-timeout-ms", "3e2"))))
        .await
        .unwrap();
    svc.ready().await.unwrap().call(req(None)).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], (Some("300".into()), Some(ms(300))));
    assert_eq!(
        seen[1],
        (Some("800".into()), Some(ms(800))),
        "malformed: as absent"
    );
    assert_eq!(seen[2].0.as_deref(), Some("800"));
    assert_eq!(layer.malformed_headers(), 1);

    // Too little left: refused without calling.
    let e = svc
        .ready()
        .await
        .unwrap()
        .call(req(Some(("grpc-timeout", "5m"))))
        .await
        .unwrap_err();
    assert_eq!(
        *e.downcast_ref::<DeadlineExceeded>().unwrap(),
        DeadlineExceeded {
            remaining: ms(5),
            floor: ms(10)
        }
    );
    // A call outliving its deadline is abandoned.
    let e = svc
        .ready()
        .await
        .unwrap()
        .call(req(Some(("grpc-timeout", "20m"))))
        .await
        .unwrap_err();
    assert!(e.is::<DeadlineExceeded>());
    assert_eq!(layer.refused(), 1);
}

#[tokio::test(start_paused = true)]
async fn hedge_layer_takes_the_first_answer_and_cancels_the_rest() {
    let hedge = Hedge::builder()
        .config(HedgeConfig {
            delay: HedgeDelay::Fixed { delay: ms(20) },
            max_hedges: 1,
            ..Default::default()
        })
        .timer(Arc::new(TokioTimer))
        .clock(TokioTimer.clock())
        .build()
        .unwrap();
    let started = Arc::new(AtomicU32::new(0));
    let finished = Arc::new(AtomicU32::new(0));
    let (s2, f2) = (started.clone(), finished.clone());
    let mut svc = HedgeLayer::new(hedge.clone()).layer(tower::service_fn(move |_: ()| {
        let n = s2.fetch_add(1, Ordering::SeqCst);
        let f = f2.clone();
        async move {
            tokio::time::sleep(ms(if n == 0 { 500 } else { 10 })).await;
            f.fetch_add(1, Ordering::SeqCst);
            Ok::<_, BoxError>(n)
        }
    }));
    let start = tokio::time::Instant::now();
    assert_eq!(svc.ready().await.unwrap().call(()).await.unwrap(), 1);
    assert_eq!(start.elapsed(), ms(30));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the slow first request was cancelled"
    );
    assert_eq!(hedge.stats().hedge_wins, 1);
}

#[tokio::test(start_paused = true)]
async fn a_breaker_layer_inside_a_retry_or_a_bulkhead_fails_loudly_unless_allowed() {
    use tripline::CircuitBreaker;
    use tripline::bulkhead::{Bulkhead, BulkheadConfig};
    use tripline::tower::{BulkheadLayer, CircuitBreakerLayer, MisorderedLayers, misordered_calls};
    let breaker = CircuitBreaker::builder()
        .clock(TokioTimer.clock())
        .build()
        .unwrap();
    let bulkhead = Bulkhead::try_new(BulkheadConfig::default()).unwrap();
    let ok = || tower::service_fn(|_: ()| async { Ok::<_, BoxError>(()) });

    // The right order for separate layers: breaker outside retry and bulkhead.
    let before = misordered_calls();
    let mut good = tower::ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .layer(RetryLayer::new(retry(None)))
        .layer(BulkheadLayer::new(bulkhead.clone(), None))
        .service(ok());
    good.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(misordered_calls(), before);

    // Retry outside the breaker, the order the pipeline runs its stages in:
    // every attempt would be counted. Refused, naming the right order.
    let mut bad = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(retry(None)))
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(ok());
    let err = bad.ready().await.unwrap().call(()).await.unwrap_err();
    let misordered = err
        .downcast_ref::<MisorderedLayers>()
        .unwrap_or_else(|| panic!("not MisorderedLayers: {err}"));
    assert_eq!(misordered.inside, "retry");
    assert!(err.to_string().contains("PipelineLayer"), "{err}");
    assert_eq!(misordered_calls(), before + 1);
    assert_eq!(
        breaker.metrics().calls.failed + breaker.metrics().calls.successful,
        1,
        "the refused call was not recorded (only the good stack's call was)"
    );

    // Bulkhead outside the breaker.
    let mut bad = tower::ServiceBuilder::new()
        .layer(BulkheadLayer::new(bulkhead.clone(), None))
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(ok());
    let err = bad.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(
        err.downcast_ref::<MisorderedLayers>().map(|m| m.inside),
        Some("bulkhead")
    );
    assert_eq!(misordered_calls(), before + 2);

    // The explicit opt-out lets the call through, still counted.
    let mut allowed = tower::ServiceBuilder::new()
        .layer(BulkheadLayer::new(bulkhead, None))
        .layer(CircuitBreakerLayer::new(breaker).allow_harmful_order())
        .service(ok());
    allowed.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(misordered_calls(), before + 3);
}

#[tokio::test(start_paused = true)]
async fn deadline_layer_tells_a_grpc_peer_in_grpc_timeout_and_others_only_in_its_own_header() {
    let layer = DeadlineLayer::new(TokioTimer.clock(), Some(Arc::new(TokioTimer)));
    let mut svc = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        Ok::<_, BoxError>((header("grpc-timeout"), header(DEADLINE_HEADER)))
    }));
    let mut call = async |name: &str, value: &str| {
        let req = http::Request::get("/")
            .header(name, value)
            .body(())
            .unwrap();
        svc.ready().await.unwrap().call(req).await.unwrap()
    };
    assert_eq!(
        call("grpc-timeout", "2S").await,
        (Some("2000000u".into()), Some("2000".into())),
        "a gRPC caller's deadline goes on in gRPC's own header"
    );
    assert_eq!(
        call("tripline-timeout-ms", "1500").await,
        (None, Some("1500".into()))
    );
}
