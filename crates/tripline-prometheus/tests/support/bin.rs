//! Finding the real Prometheus binaries. A test that needs one fails when
//! it is missing, naming the Debian package to install: it never passes
//! without having run.

use std::path::{Path, PathBuf};

/// The path of `name` on `PATH`, or a panic naming the Debian package.
pub fn binary(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not installed: install the Debian package `prometheus` \
                 (apt-get install prometheus; .ci/run does this)"
            )
        })
}

/// The repository's root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate lives in crates/<name>")
        .to_path_buf()
}
