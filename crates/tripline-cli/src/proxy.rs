//! `tripline proxy --config FILE`: runs the HTTP sidecar until SIGTERM or
//! Ctrl-C, then drains. Everything but argument parsing and the runtime
//! lives in `tripline-proxy`.

use std::path::PathBuf;

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
        let drained = running.run_until_signal().await;
        if drained.complete {
            println!("tripline proxy: drained");
        } else {
            println!("tripline proxy: drain timeout passed, remaining connections closed");
        }
        Ok(())
    })
}
