//! One check of one endpoint: a TCP connect, an HTTP GET, or the standard
//! gRPC health call over h2c. Each is a fresh connection, never one of the
//! request path's pooled ones: a check must see what a new connection
//! would, and must not take a slot a request could use.

use std::sync::Arc;

use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::{CheckKind, GrpcCheck, HttpCheck};

/// The most of an HTTP answer read to find its status line.
const HEAD_LIMIT: usize = 8 * 1024;

/// What a check needs besides the endpoint: its kind, and the cluster's
/// TLS client (HTTP checks of a TLS cluster go over TLS).
pub(crate) struct Probe {
    pub(crate) kind: CheckKind,
    pub(crate) tls: Option<(Arc<rustls::ClientConfig>, Option<String>)>,
    /// The cluster speaks h2c: an HTTP check is an HTTP/2 GET too (an
    /// HTTP/2-only service would refuse HTTP/1.1).
    pub(crate) h2c: bool,
}

impl Probe {
    /// Checks `address` once: `Ok` with what passed, or `Err` with why it
    /// failed, in words for the log and `/api/outliers`. The caller bounds
    /// it with the check's timeout.
    pub(crate) async fn check(&self, address: &str) -> Result<String, String> {
        let stream = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect: {}", short(&e)))?;
        let _ = stream.set_nodelay(true);
        match &self.kind {
            CheckKind::Tcp => Ok("connected".to_owned()),
            CheckKind::Http(http) => match &self.tls {
                None if self.h2c => h2c_get(stream, address, http).await,
                None => http_get(stream, address, http).await,
                Some((config, server_name)) => {
                    let host = server_name
                        .clone()
                        .unwrap_or_else(|| host_of(address).to_owned());
                    let name =
                        ServerName::try_from(host).map_err(|e| format!("TLS server name: {e}"))?;
                    let tls = tokio_rustls::TlsConnector::from(config.clone())
                        .connect(name, stream)
                        .await
                        .map_err(|e| format!("TLS handshake: {e}"))?;
                    http_get(tls, address, http).await
                }
            },
            CheckKind::Grpc(grpc) => grpc_check(stream, address, grpc).await,
        }
    }
}

/// An I/O error in a few words ("connection refused").
fn short(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        std::io::ErrorKind::ConnectionReset => "connection reset".to_owned(),
        _ => e.to_string(),
    }
}

/// The host part of `host:port` (brackets of an IPv6 address removed).
fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// `GET path` with `connection: close`; passes when the status line's
/// code is in `expect`. Only the head is read: a health page's body says
/// nothing the status does not.
async fn http_get<S>(mut stream: S, address: &str, http: &HttpCheck) -> Result<String, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let request = format!(
        "GET {} HTTP/1.1\r\nhost: {address}\r\nuser-agent: tripline-health-check\r\nconnection: close\r\n\r\n",
        http.path
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {}", short(&e)))?;
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    let line_end = loop {
        if let Some(i) = head.iter().position(|b| *b == b'\n') {
            break i;
        }
        if head.len() > HEAD_LIMIT {
            return Err("no status line in the answer".to_owned());
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("read: {}", short(&e)))?;
        if n == 0 {
            return Err("closed before answering".to_owned());
        }
        head.extend_from_slice(&chunk[..n]);
    };
    let line = String::from_utf8_lossy(&head[..line_end]);
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("unreadable status line {:?}", line.trim_end()))?;
    expected(status, http)
}

/// The sending half of a check's HTTP/2 connection.
type H2Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// Passes when `status` is one the check expects.
fn expected(status: u16, http: &HttpCheck) -> Result<String, String> {
    if http.expect.contains(&status) {
        Ok(format!("status {status}"))
    } else {
        Err(format!("status {status}, expected {:?}", http.expect))
    }
}

/// An HTTP/2 connection over `stream` (prior knowledge), driven by a task
/// that lives only as long as the check: dropping a task's handle does not
/// stop it, so the guard returned aborts it on the way out.
async fn h2c_handshake(stream: TcpStream) -> Result<(H2Sender, AbortOnDrop), String> {
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|e| format!("h2 handshake: {e}"))?;
    let driver = tokio::spawn(connection);
    Ok((sender, AbortOnDrop(driver.abort_handle())))
}

/// `GET path` over h2c (prior knowledge); passes when the status is in
/// `expect`.
async fn h2c_get(stream: TcpStream, address: &str, http: &HttpCheck) -> Result<String, String> {
    let (mut sender, _stop) = h2c_handshake(stream).await?;
    let request = hyper::Request::get(format!("http://{address}{}", http.path))
        .header("user-agent", "tripline-health-check")
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("request: {e}"))?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| format!("h2: {e}"))?;
    let status = answer.status().as_u16();
    expected(status, http)
}

/// `grpc.health.v1.Health/Check` with `{ service }` over h2c; passes when
/// the answer's status is SERVING (1).
async fn grpc_check(stream: TcpStream, address: &str, grpc: &GrpcCheck) -> Result<String, String> {
    let (mut sender, _stop) = h2c_handshake(stream).await?;
    let request = hyper::Request::post(format!("http://{address}/grpc.health.v1.Health/Check"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(grpc_request(&grpc.service))))
        .map_err(|e| format!("request: {e}"))?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| format!("h2: {e}"))?;
    if answer.status() != hyper::StatusCode::OK {
        return Err(format!("HTTP status {}", answer.status().as_u16()));
    }
    let collected = answer
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("h2 body: {e}"))?;
    let code = collected.trailers().and_then(|t| t.get("grpc-status"));
    if let Some(code) = code.filter(|c| c.as_bytes() != b"0") {
        return Err(format!(
            "grpc-status {}",
            String::from_utf8_lossy(code.as_bytes())
        ));
    }
    match serving_status(collected.to_bytes()) {
        Some(1) => Ok("SERVING".to_owned()),
        Some(s) => Err(format!("health status {s} (not SERVING)")),
        None => Err("unreadable health answer".to_owned()),
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A `HealthCheckRequest { service }` in one gRPC frame: field 1, length
/// delimited, the service name (empty: no field at all).
pub(crate) fn grpc_request(service: &str) -> Vec<u8> {
    let mut message = Vec::new();
    if !service.is_empty() {
        message.push(0x0a);
        put_varint(&mut message, service.len() as u64);
        message.extend_from_slice(service.as_bytes());
    }
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0); // not compressed
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(&message);
    frame
}

/// Appends `value` as a protobuf varint.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The `status` (field 1, varint) of a framed `HealthCheckResponse`; 0
/// (UNKNOWN) when the field is absent, as protobuf's default.
pub(crate) fn serving_status(mut frame: Bytes) -> Option<u64> {
    if frame.len() < 5 || frame[0] != 0 {
        return None;
    }
    frame.advance(1);
    let len = frame.get_u32() as usize;
    let message = frame.get(..len)?;
    let mut i = 0;
    while i < message.len() {
        let key = message[i];
        i += 1;
        let (value, used) = varint(&message[i..])?;
        i += used;
        match key {
            0x08 => return Some(value),
            k if k & 7 == 2 => i = i.checked_add(usize::try_from(value).ok()?)?,
            k if k & 7 == 0 => {}
            _ => return None,
        }
    }
    Some(0)
}

/// A varint at the start of `bytes` and how many bytes it took.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_health_request_is_the_service_name_in_field_one() {
        assert_eq!(grpc_request(""), [0, 0, 0, 0, 0]);
        assert_eq!(grpc_request("ab"), [0, 0, 0, 0, 4, 0x0a, 2, b'a', b'b']);
    }

    #[test]
    fn the_answer_status_is_read_and_defaults_to_unknown() {
        let serving = Bytes::from_static(&[0, 0, 0, 0, 2, 0x08, 1]);
        assert_eq!(serving_status(serving), Some(1));
        assert_eq!(
            serving_status(Bytes::from_static(&[0, 0, 0, 0, 0])),
            Some(0)
        );
        assert_eq!(serving_status(Bytes::from_static(&[0, 0])), None);
    }
}
