//! Prometheus visibility: `--textfile` writes `<name>.prom` for
//! node_exporter; `--pushgateway` PUTs the same text to a (local, real
//! HTTP) server that records the request.

mod run_common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use run_common::{Env, T0, args, sh};

#[test]
fn textfile_holds_state_gauges_and_run_counters() {
    let env = Env::new();
    std::fs::create_dir(env.path("prom")).expect("dir");
    for _ in 0..5 {
        env.run(
            T0,
            &args(&["--breaker", "api", "--textfile", "prom"], &sh("exit 1")),
        );
    }
    let text = std::fs::read_to_string(env.path("prom/api.prom")).expect("written");
    assert!(
        text.contains("tripline_run_total{breaker=\"api\",outcome=\"failure\"} 5"),
        "{text}"
    );
    assert!(
        text.contains("tripline_run_transitions_total{breaker=\"api\"} 1"),
        "{text}"
    );
    assert!(text.contains("tripline_breaker_state"), "{text}");
    // Only .prom files: no temp file left behind.
    let names: Vec<_> = std::fs::read_dir(env.path("prom"))
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("api.prom")]);
}

#[test]
fn pushgateway_receives_a_put_with_the_metrics() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let seen: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let record = seen.clone();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let record = record.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let record = record.clone();
                    async move {
                        let method = req.method().to_string();
                        let path = req.uri().path().to_owned();
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        record.lock().expect("lock").push((
                            method,
                            path,
                            String::from_utf8_lossy(&body).into_owned(),
                        ));
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, svc)
                    .await;
            });
        }
    });
    let env = Env::new();
    let url = format!("http://{addr}");
    let out = env.run(
        T0,
        &args(
            &["--breaker", "push-me", "--pushgateway", &url],
            &sh("exit 0"),
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", run_common::stderr(&out));
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1);
    let (method, path, body) = &seen[0];
    assert_eq!(method, "PUT");
    assert_eq!(path, "/metrics/job/tripline_run/breaker/push-me");
    assert!(
        body.contains("tripline_run_total{breaker=\"push-me\",outcome=\"success\"} 1"),
        "{body}"
    );
}
