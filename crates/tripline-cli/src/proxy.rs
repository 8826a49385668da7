//! `tripline proxy --config FILE`: runs the HTTP sidecar until SIGTERM or
//! Ctrl-C, then drains. Everything but argument parsing and the runtime
//! lives in `tripline-proxy`.

use std::path::PathBuf;

use clap::Args;
use tripline_proxy::config::ProxyConfig;
use tripline_proxy::{Proxy, Threading};

use crate::CliError;

/// Options of `tripline proxy`.
#[derive(Args, Debug)]
pub(crate) struct ProxyArgs {
    /// The proxy config (TOML): listeners, routes, clusters.
    #[arg(long, short)]
    config: PathBuf,
    /// Threads serving connections (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// `per-core`: one single-threaded runtime per thread, each with its
    /// own SO_REUSEPORT listener (measured ~1.4x the throughput per CPU
    /// second, see benches/README.md); `multi-thread`: one work-stealing
    /// runtime, for few, uneven connections.
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

pub(crate) fn run(args: &ProxyArgs) -> Result<(), CliError> {
    let config = ProxyConfig::load(&args.config).map_err(|e| CliError::input(e.to_string()))?;
    let proxy = Proxy::try_new(config).map_err(|e| CliError::input(e.to_string()))?;
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
    let drained = proxy
        .run_until_signal(threading, |addrs, admin| {
            for addr in addrs {
                println!("tripline proxy: listening on {addr}");
            }
            if let Some(addr) = admin {
                println!("tripline proxy: metrics at http://{addr}/metrics");
            }
        })
        .map_err(|e| CliError::other(format!("cannot serve: {e}")))?;
    if drained.complete {
        println!("tripline proxy: drained");
    } else {
        println!("tripline proxy: drain timeout passed, remaining connections closed");
    }
    Ok(())
}
