//! `tripline proxy --config FILE`: runs the HTTP sidecar until SIGTERM or
//! Ctrl-C, then drains; SIGHUP re-reads the file and reloads it (an
//! invalid file changes nothing). Everything but argument parsing, the
//! runtime and the signals lives in `tripline-proxy`.

use std::path::{Path, PathBuf};

use clap::Args;
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

use crate::CliError;

/// Options of `tripline proxy`.
#[derive(Args, Debug)]
pub(crate) struct ProxyArgs {
    /// The proxy config (TOML): listeners, routes, clusters.
    #[arg(long, short)]
    config: PathBuf,
    /// Worker threads of the runtime (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

pub(crate) fn run(args: &ProxyArgs) -> Result<(), CliError> {
    let config = ProxyConfig::load(&args.config).map_err(|e| CliError::input(e.to_string()))?;
    let proxy = Proxy::try_new(config).map_err(|e| CliError::input(e.to_string()))?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        runtime.worker_threads(n.max(1));
    }
    let runtime = runtime
        .enable_all()
        .build()
        .map_err(|e| CliError::other(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        // Watched before the proxy says it listens: a SIGHUP from then on
        // reloads rather than kills (its default action).
        let hangups = hangups();
        let running = proxy
            .start()
            .await
            .map_err(|e| CliError::other(format!("cannot listen: {e}")))?;
        for addr in running.local_addrs() {
            println!("tripline proxy: listening on {addr}");
        }
        if let Some(addr) = running.admin_addr() {
            println!("tripline proxy: metrics at http://{addr}/metrics");
        }
        let reloads = tokio::spawn(reload_on_hangup(
            hangups,
            proxy.clone(),
            args.config.clone(),
        ));
        let drained = running.run_until_signal().await;
        reloads.abort();
        if drained.complete {
            println!("tripline proxy: drained");
        } else {
            println!("tripline proxy: drain timeout passed, remaining connections closed");
        }
        Ok(())
    })
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
    match ProxyConfig::load(path).and_then(|config| proxy.reload(config)) {
        Ok(report) => {
            println!("tripline proxy: reloaded {}", path.display());
            for section in &report.restart_required {
                println!("tripline proxy: [{section}] changed: takes effect on restart");
            }
        }
        Err(e) => {
            eprintln!("tripline proxy: reload refused, the last good config stays: {e}");
        }
    }
}
