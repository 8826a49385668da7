//! Listening, serving connections, and draining on shutdown.
//!
//! Each accepted connection is served on its own task by hyper: HTTP/1.1,
//! or HTTP/2 when the client opens with the HTTP/2 preface (h2c with prior
//! knowledge, or HTTP/2 picked by ALPN on a TLS listener), with
//! `TCP_NODELAY` set and a bound on how long the client may take to send a
//! request's headers (the listener's `header_read_timeout`). An idle
//! HTTP/1 keep-alive connection is parked on its bare socket, holding no
//! HTTP buffers, until the client sends again or the listener's
//! `keep_alive_timeout` passes (see [`connection`]). On shutdown the
//! listeners stop accepting, parked connections close at once, every other
//! connection is asked to finish its request in flight and then close
//! (keep-alive ends), and the proxy waits for them — up to the drain
//! timeout, after which the remaining connections are dropped.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::config::{ListenerSection, ProxySection};
use crate::data::Ctx;
use crate::data::forward::Downstream;
use crate::http::drain::accept_until_drain;
use crate::upstream::tls::ClientCert;

mod connection;
mod h1_fast;
mod h2_resets;
mod linger;
mod refuse;

use connection::Settings;

/// Serves the listener configured as `section` (bound already), through
/// `ctx`, until the drain starts: each connection on its own task, which
/// holds a clone of `alive` until it ends (the drain waits for them all).
pub(crate) async fn serve_listener(
    listener: TcpListener,
    section: &ListenerSection,
    proxy: &ProxySection,
    inner: Arc<Ctx>,
    tls: Option<TlsAcceptor>,
    stop: watch::Receiver<u8>,
    alive: mpsc::Sender<()>,
) {
    let settings = Arc::new(Settings::new(section, proxy));
    let listener_tls = section.tls.clone().map(Arc::new);
    accept_until_drain(listener, stop, "accept failed", |stream, peer, stop| {
        let _ = stream.set_nodelay(true);
        let (inner, settings, alive) = (inner.clone(), settings.clone(), alive.clone());
        let listener_tls = listener_tls.clone();
        match &tls {
            None => drop(tokio::spawn(async move {
                let _alive = alive;
                let downstream = Downstream::new(peer, false);
                connection::serve(stream, downstream, inner, settings, stop).await;
            })),
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _alive = alive;
                    let limit = settings.header_read_timeout;
                    if let Some(stream) =
                        crate::upstream::tls::handshake(&acceptor, stream, limit).await
                    {
                        // Who the client is, when the listener tells it on.
                        let cert = listener_tls.as_deref().and_then(|tls| {
                            let peer_certs = stream.get_ref().1.peer_certificates();
                            ClientCert::of(tls, peer_certs.and_then(|c| c.first()))
                        });
                        let downstream = Downstream::new(peer, true).with_client_cert(cert);
                        connection::serve(stream, downstream, inner, settings, stop).await;
                    }
                });
            }
        }
    })
    .await;
}
