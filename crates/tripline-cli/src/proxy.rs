//! `tripline proxy --config FILE`: runs the HTTP sidecar until SIGTERM or
//! Ctrl-C, then drains; SIGHUP re-reads the file and reloads it (an
//! invalid file changes nothing). Everything but argument parsing, the
//! runtime and the signals lives in `tripline-proxy`.

use std::path::{Path, PathBuf};

use clap::Args;
use tripline::clock::EventLoopClock;
use tripline_proxy::config::ConfigFile;
use tripline_proxy::{Proxy, Threading};

use crate::CliError;

/// Options of `tripline proxy`.
#[derive(Args, Debug)]
pub(crate) struct ProxyArgs {
    /// The proxy config (TOML, or YAML for `.yaml`/`.yml`): listeners,
    /// routes, clusters.
    #[arg(long, short)]
    config: PathBuf,
    /// Threads serving connections (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// `per-core`: one single-threaded runtime per thread, each with its
    /// own SO_REUSEPORT listener (measured ~1.4x the throughput per CPU
    /// second, see benches/README.md; an idle one sleeps); `multi-thread`:
    /// one work-stealing runtime, for few, uneven connections (idle, it
    /// sleeps too).
    #[arg(long, value_enum, default_value_t = RuntimeKind::PerCore)]
    runtime: RuntimeKind,
}

/// The runtimes `--runtime` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RuntimeKind {
    /// One tokio multi-thread (work-stealing) runtime.
    MultiThread,
    /// A current-thread runtime per thread, SO_REUSEPORT listeners.
    PerCore,
}

/// Writes one line on stdout, like `println!`, but never panics: a proxy
/// whose stdout reader went away (a closed pipe, a log collector that
/// died) keeps serving. The line is lost then; the decisions themselves
/// are also on stderr through `tracing`.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

pub(crate) fn run(args: &ProxyArgs) -> Result<(), CliError> {
    let source = ConfigFile::read(&args.config).map_err(|e| CliError::input(e.to_string()))?;
    let config = source.parse().map_err(|e| CliError::input(e.to_string()))?;
    // The runtimes refresh the breakers' clock as they wake: no ticker
    // thread preempting the serving threads a thousand times a second.
    let proxy = Proxy::builder(config)
        .clock(EventLoopClock)
        .build()
        .map_err(|e| CliError::input(source.place(e).to_string()))?;
    let threading = match args.runtime {
        RuntimeKind::MultiThread => Threading::MultiThread {
            threads: args.threads,
        },
        RuntimeKind::PerCore => Threading::PerCore {
            threads: args
                .threads
                .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
                .unwrap_or(1),
        },
    };
    watch_hangups(proxy.clone(), args.config.clone());
    let drained = proxy
        .run_until_signal(threading, |addrs, admin| {
            // What runs, where: every listener, the admin side's URLs, and
            // every breaker built (those the file does not name too).
            for addr in addrs {
                say!("tripline proxy: listening on {addr}");
            }
            if let Some(addr) = admin {
                say!("tripline proxy: admin API at http://{addr}/api/");
                say!("tripline proxy: dashboard at http://{addr}/");
                say!("tripline proxy: metrics at http://{addr}/metrics");
            }
            for built in proxy.breakers_built() {
                say!("tripline proxy: {}", built.summary());
            }
        })
        .map_err(|e| CliError::other(format!("cannot serve: {e}")))?;
    if drained.complete {
        say!("tripline proxy: drained");
    } else {
        say!("tripline proxy: drain timeout passed, remaining connections closed");
    }
    Ok(())
}

/// Watches SIGHUP on a thread of its own (the proxy's runtimes are the
/// library's), and returns once it is watched: a SIGHUP from then on
/// reloads rather than kills (its default action).
fn watch_hangups(proxy: Proxy, path: PathBuf) {
    let (watching, watched) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("tripline-sighup".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let runtime = match runtime {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("tripline proxy: cannot watch SIGHUP, reloads are off: {e}");
                    let _ = watching.send(());
                    return;
                }
            };
            runtime.block_on(async {
                let hangups = hangups();
                let _ = watching.send(());
                reload_on_hangup(hangups, proxy, path).await;
            });
        });
    match spawned {
        Ok(_) => {
            let _ = watched.recv();
        }
        Err(e) => eprintln!("tripline proxy: cannot watch SIGHUP, reloads are off: {e}"),
    }
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<()>;

/// Starts watching SIGHUP (`None`, said on stderr, if it cannot be).
#[cfg(unix)]
fn hangups() -> Hangups {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::hangup())
        .inspect_err(|e| eprintln!("tripline proxy: cannot watch SIGHUP, reloads are off: {e}"))
        .ok()
}

#[cfg(not(unix))]
fn hangups() -> Hangups {
    None
}

/// Reloads the config file at `path` on every SIGHUP, saying what
/// happened: on stdout when it applied (and which changed sections wait
/// for a restart), on stderr when it was refused.
async fn reload_on_hangup(hangups: Hangups, proxy: Proxy, path: PathBuf) {
    #[cfg(unix)]
    if let Some(mut hangups) = hangups {
        while hangups.recv().await.is_some() {
            reload(&proxy, &path);
        }
    }
    #[cfg(not(unix))]
    let _ = (hangups, proxy, path);
}

fn reload(proxy: &Proxy, path: &Path) {
    // What only the rebuild finds (a TLS file gone since the start) names
    // the file and line too, as a parse error does.
    let reloaded = ConfigFile::read(path).and_then(|source| {
        let config = source.parse()?;
        proxy.reload(config).map_err(|e| source.place(e))
    });
    match reloaded {
        Ok(report) => {
            say!("tripline proxy: reloaded {}", path.display());
            for section in &report.restart_required {
                say!("tripline proxy: [{section}] changed: takes effect on restart");
            }
        }
        Err(e) => {
            eprintln!("tripline proxy: reload refused, the last good config stays: {e}");
        }
    }
}
