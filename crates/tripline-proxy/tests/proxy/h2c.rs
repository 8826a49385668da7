//! HTTP/2 over cleartext (prior knowledge): a client speaking h2c to the
//! proxy, and a cluster whose endpoints speak only h2c.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::support::*;

/// An upstream that speaks only HTTP/2 and answers with the version and
/// `Host` it saw.
async fn h2c_upstream() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                let host = req
                    .headers()
                    .get("host")
                    .map(|h| h.to_str().unwrap().to_owned());
                let seen = format!("{:?} {}", req.version(), host.unwrap_or_default());
                Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from(seen))))
            });
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service);
            tokio::spawn(conn);
        }
    });
    addr
}

#[tokio::test]
async fn an_h2c_client_is_served_and_forwarded_over_http1() {
    let upstream = Upstream::start(|req| {
        let mut r = respond(200, "fine");
        let host = req.headers().get("host").cloned().unwrap();
        r.headers_mut().insert("x-seen-host", host);
        r
    })
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let h2: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let req = http::Request::get(format!("http://{addr}/"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(BOUND, h2.request(req))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-seen-host"],
        addr.to_string().as_str(),
        "the authority becomes Host"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "fine");
    running.shutdown().await;
}

#[tokio::test]
async fn an_h2c_cluster_is_spoken_to_in_http2() {
    let upstream = h2c_upstream().await;
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[upstream], "", "protocol = \"h2c\"")).await;
    let answer = send(addr, "GET", "/", &[("host", "orders.internal")]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, "HTTP/2.0 orders.internal");
    running.shutdown().await;
}
