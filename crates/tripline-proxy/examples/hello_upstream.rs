//! A minimal upstream for trying the proxy by hand or loading it with a
//! benchmark tool: answers every request with `hello` over HTTP/1.1 with
//! keep-alive.
//!
//! ```sh
//! cargo run --release -p tripline-proxy --example hello_upstream -- 127.0.0.1:9000
//! ```

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into());
    let listener = TcpListener::bind(&addr).await?;
    println!("hello_upstream: listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(|_req| async {
                Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"hello"))))
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
