//! A tiny HTTP/1.1 client for the tests (hyper's), and free ports.
#![allow(dead_code)] // each test binary uses a part

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The answer to one request: status, headers, body as text.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

/// Sends `method path` to `addr` with an optional `Accept` header.
pub async fn request(addr: SocketAddr, method: Method, path: &str, accept: Option<&str>) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .expect("response");
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8(bytes.to_vec()).expect("utf-8 body"),
    }
}

/// `GET path`.
pub async fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, Method::GET, path, None).await
}

/// A port nobody listens on right now (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
