//! The upstream of the proxy benchmark (`benches/proxy/run.sh`): a minimal
//! hyper HTTP/1.1 server answering every request with a small fixed body,
//! so the measurement is the proxy's cost and not the upstream's.
//!
//! `cargo run --release -p tripline-benches --features proxy --example proxy-upstream -- 127.0.0.1:18080 [threads]`

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The answer: small, so loopback bandwidth never limits.
const BODY: &[u8] = b"hello from the upstream\n";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:18080".to_owned());
    let threads = args.next().map(|t| t.parse()).transpose()?.unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(&addr).await?;
        println!("upstream: listening on {}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|_req| async {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(BODY))))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
