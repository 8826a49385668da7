//! Running the proxy on threads: tokio's multi-thread runtime, or one
//! current-thread runtime per core, each accepting on a listener of its
//! own bound with `SO_REUSEPORT` (the kernel spreads new connections over
//! them).
//!
//! Per core, a connection and its requests stay on the thread that
//! accepted it: no work stealing, no cross-thread wake-ups on the data
//! path. Everything that protects a call — route breakers, clusters,
//! budgets, metrics, upstream pools — is still one shared instance, so
//! the protection sees all the traffic whatever the thread. The price: a
//! thread that gets more busy connections than another cannot hand them
//! over. The first runtime also serves the admin listener and refreshes DNS.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tripline::clock::EventLoopClock;

mod address_lock;

use crate::proxy::Proxy;
use crate::proxy::start::Drained;

/// How the proxy spreads its work over threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threading {
    /// tokio's multi-thread runtime with `threads` workers (`None`: one per
    /// core) that steal work from each other: best when connections are
    /// few and uneven.
    MultiThread {
        /// Worker threads; `None`: one per core.
        threads: Option<usize>,
    },
    /// `threads` current-thread runtimes, each on its own thread with its
    /// own `SO_REUSEPORT` listeners: no work stealing on the data path,
    /// best with many connections.
    PerCore {
        /// Runtimes (and threads); at least one.
        threads: usize,
    },
}

/// Where a runtime's listeners come from.
pub(crate) enum Binding {
    /// The only runtime: bind the configured addresses.
    Alone,
    /// One of several per-core runtimes sharing the ports.
    Shared {
        /// The first binds the configured addresses (port 0 picks one),
        /// and serves the admin listener and DNS refreshes.
        first: bool,
        /// The addresses the first one bound, for the others.
        addrs: Option<Vec<SocketAddr>>,
    },
}

impl Binding {
    /// Whether this runtime serves what exists once (admin, DNS refresh).
    pub(crate) fn is_first(&self) -> bool {
        match self {
            Binding::Alone => true,
            Binding::Shared { first, .. } => *first,
        }
    }

    /// Binds listener `index`, configured as `address`; an error names
    /// the address.
    pub(crate) async fn bind(&self, index: usize, address: &str) -> io::Result<TcpListener> {
        let Binding::Shared { addrs, .. } = self else {
            return TcpListener::bind(address)
                .await
                .map_err(|e| address_error(address, e));
        };
        bind_shared(addrs.as_ref().and_then(|a| a.get(index)), address)
            .map_err(|e| address_error(address, e))
    }
}

/// A per-core runtime's `SO_REUSEPORT` listener: at `bound` (what the
/// first runtime bound, port 0 resolved), else at `address`.
fn bind_shared(bound: Option<&SocketAddr>, address: &str) -> io::Result<TcpListener> {
    let addr = match bound {
        Some(addr) => *addr,
        None => address
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
    };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// `e`, naming `address`: "127.0.0.1:8080 is already in use by another
/// process" for a port taken, "127.0.0.1:8080: …" otherwise.
pub(crate) fn address_error(address: &str, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::AddrInUse {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{address} is already in use by another process"),
        )
    } else {
        io::Error::new(e.kind(), format!("{address}: {e}"))
    }
}

/// What a serving thread reports once its listeners are bound.
type Bound = io::Result<(Vec<SocketAddr>, Option<SocketAddr>)>;

impl Proxy {
    /// Builds the runtime(s) `threading` asks for, binds every listener,
    /// calls `started` with the bound addresses and the admin address,
    /// serves until `signal` completes, then drains every runtime.
    ///
    /// For a process that is only the proxy (`tripline proxy`); a program
    /// that has its own runtime uses [`start`](Proxy::start).
    pub fn run_until(
        &self,
        threading: Threading,
        started: impl FnOnce(&[SocketAddr], Option<SocketAddr>),
        signal: impl Future<Output = ()>,
    ) -> io::Result<Drained> {
        match threading {
            Threading::MultiThread { threads } => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                if let Some(n) = threads {
                    builder.worker_threads(n.max(1));
                }
                self.refresh_clock_from(&mut builder);
                builder.enable_all().build()?.block_on(async {
                    self.spawn_clock_refresh();
                    let running = self.start().await?;
                    started(running.local_addrs(), running.admin_addr());
                    Ok(running.run_until(signal).await)
                })
            }
            Threading::PerCore { threads } => self.run_per_core(threads.max(1), started, signal),
        }
    }

    /// [`run_until`](Proxy::run_until) SIGTERM or Ctrl-C.
    pub fn run_until_signal(
        &self,
        threading: Threading,
        started: impl FnOnce(&[SocketAddr], Option<SocketAddr>),
    ) -> io::Result<Drained> {
        self.run_until(threading, started, crate::http::drain::shutdown_signal())
    }

    /// On an [`EventLoopClock`], makes the runtime's threads refresh it
    /// each time they wake, and say when they wait (so that the refreshing
    /// task lets an idle runtime sleep).
    fn refresh_clock_from(&self, builder: &mut tokio::runtime::Builder) {
        if self.inner.control.clock.is_event_loop() {
            EventLoopClock::hook_runtime(builder);
        }
    }

    /// On an [`EventLoopClock`], refreshes it every millisecond on the
    /// current runtime while it is too busy to wait for events. (A thread
    /// reads the real clock until its loop first refreshes the tick.)
    fn spawn_clock_refresh(&self) {
        if self.inner.control.clock.is_event_loop() {
            tokio::spawn(EventLoopClock::refresh_every_tick());
        }
    }

    fn run_per_core(
        &self,
        threads: usize,
        started: impl FnOnce(&[SocketAddr], Option<SocketAddr>),
        signal: impl Future<Output = ()>,
    ) -> io::Result<Drained> {
        // Held until the drain ends: one proxy per listener address.
        let _held = crate::proxy::runtime::address_lock::lock_all(
            self.inner
                .config
                .listeners
                .iter()
                .map(|l| l.address.as_str()),
        )?;
        let (stop, stopped) = watch::channel(false);
        let (ready, bound) = std::sync::mpsc::channel::<Bound>();
        let mut handles = Vec::with_capacity(threads);
        let mut first: Option<(Vec<SocketAddr>, Option<SocketAddr>)> = None;
        let mut failure = None;
        for i in 0..threads {
            let binding = Binding::Shared {
                first: i == 0,
                addrs: first.as_ref().map(|(addrs, _)| addrs.clone()),
            };
            let (proxy, ready, stopped) = (self.clone(), ready.clone(), stopped.clone());
            let handle = std::thread::Builder::new()
                .name(format!("tripline-proxy-{i}"))
                .spawn(move || serve_on_this_thread(&proxy, &binding, &ready, stopped))?;
            handles.push(handle);
            match bound.recv() {
                Ok(Ok(addrs)) => {
                    first.get_or_insert(addrs);
                }
                Ok(Err(e)) => {
                    failure = Some(e);
                    break;
                }
                Err(_) => {
                    failure = Some(io::Error::other("a serving thread ended while binding"));
                    break;
                }
            }
        }
        if failure.is_none()
            && let Some((addrs, admin)) = &first
        {
            started(addrs, *admin);
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(signal);
        }
        let _ = stop.send(true);
        let mut complete = true;
        for handle in handles {
            complete &= handle.join().map(|d| d.complete).unwrap_or(false);
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(Drained { complete }),
        }
    }
}

/// One per-core runtime: binds, reports, serves until `stopped`, drains.
fn serve_on_this_thread(
    proxy: &Proxy,
    binding: &Binding,
    ready: &std::sync::mpsc::Sender<Bound>,
    mut stopped: watch::Receiver<bool>,
) -> Drained {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    proxy.refresh_clock_from(&mut builder);
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Drained { complete: true };
        }
    };
    runtime.block_on(async {
        proxy.spawn_clock_refresh();
        let running = match proxy.start_with(binding).await {
            Ok(running) => running,
            Err(e) => {
                let _ = ready.send(Err(e));
                return Drained { complete: true };
            }
        };
        let _ = ready.send(Ok((running.local_addrs().to_vec(), running.admin_addr())));
        let _ = stopped.wait_for(|s| *s).await;
        running.shutdown().await
    })
}
