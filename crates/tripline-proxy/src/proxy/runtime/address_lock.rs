//! One listener address, one proxy.
//!
//! Per-core runtimes bind their listeners with `SO_REUSEPORT` so the
//! kernel spreads connections over the proxy's threads. The kernel lets
//! any process of the same user join such a port, so a second proxy
//! started on the same address would "listen" too and silently take a
//! share of the traffic, with breakers of its own that see only that
//! share. Before binding, the proxy takes an exclusive lock on a file
//! named after each listener address (in `$XDG_RUNTIME_DIR`, else the
//! temp dir) and holds it until its drain ends; an address whose lock is
//! held is refused: "127.0.0.1:8080 is already in use by another process".
//! The lock is the operating system's (`flock`): a proxy that dies
//! releases it, so a stale file never blocks a start.
//!
//! Port 0 (a fresh port from the kernel) cannot clash and is not locked;
//! neither is an address whose lock file cannot be opened (another user's
//! proxy: the kernel refuses `SO_REUSEPORT` across users anyway). The
//! multi-thread runtime binds without `SO_REUSEPORT`, so there the kernel
//! itself refuses a second bind.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Locks held for a proxy's listener addresses; dropping releases them.
#[derive(Debug)]
pub(crate) struct AddressLocks {
    _held: Vec<File>,
}

/// Locks every address of `addresses` that names a fixed port.
pub(crate) fn lock_all<'a>(addresses: impl Iterator<Item = &'a str>) -> io::Result<AddressLocks> {
    let mut held = Vec::new();
    for address in addresses {
        let Ok(addr) = address.parse::<SocketAddr>() else {
            continue; // the bind names what is wrong with it
        };
        if addr.port() == 0 {
            continue;
        }
        let path = lock_path(addr);
        let Ok(file) = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
        else {
            continue;
        };
        match file.try_lock() {
            Ok(()) => held.push(file),
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "{address} is already in use by another process (a tripline proxy holds {}): two proxies on one address would split its traffic between two sets of breakers",
                        path.display()
                    ),
                ));
            }
            Err(TryLockError::Error(_)) => {}
        }
    }
    Ok(AddressLocks { _held: held })
}

/// `$XDG_RUNTIME_DIR/tripline-listener-127.0.0.1_8080.lock`.
fn lock_path(addr: SocketAddr) -> PathBuf {
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let name = addr.to_string().replace([':', '[', ']'], "_");
    dir.join(format!("tripline-listener-{name}.lock"))
}
