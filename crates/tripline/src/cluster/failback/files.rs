//! File-system steps shared by the log and the dead-letter file: naming
//! the failed operation, flushing a directory, replacing a file all at
//! once, and setting unreadable bytes aside.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::config::FailbackError;

/// Maps an OS error to [`FailbackError::Io`], naming what was being done
/// (`op`) to which file, so the error tells an operator what to fix.
pub(crate) fn io<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> FailbackError + 'a {
    move |source| FailbackError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Flushes `dir` itself, so that files created or renamed in it keep their
/// names after a machine crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), FailbackError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("flush directory", dir))
}

/// Replaces the file `path` in `dir` with `bytes`, all or nothing: they
/// are written to `<path>.tmp`, flushed, renamed over `path`, and the
/// directory is flushed, so a crash leaves the old file or the new one.
pub(crate) fn replace(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), FailbackError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp).map_err(io("create", &tmp))?;
    f.write_all(bytes).map_err(io("write", &tmp))?;
    f.sync_all().map_err(io("flush", &tmp))?;
    fs::rename(&tmp, path).map_err(io("replace", path))?;
    sync_dir(dir)
}

/// Writes `bytes`, found unreadable at offset `at` of the file `name`, to
/// a new file `<name>.corrupt-<at>` in `dir` — or, when that exists (an
/// earlier corruption at the same offset), `<name>.corrupt-<at>.<n>` with
/// the first free `n` from 1 — flushed, directory included, and returns
/// its path. An existing file is never opened for writing (`create_new`),
/// so quarantined bytes are never overwritten, even by a racing process.
pub(crate) fn set_aside(
    dir: &Path,
    name: &str,
    at: usize,
    bytes: &[u8],
) -> Result<PathBuf, FailbackError> {
    let mut n = 0u64;
    let (aside, mut f) = loop {
        let aside = match n {
            0 => dir.join(format!("{name}.corrupt-{at}")),
            n => dir.join(format!("{name}.corrupt-{at}.{n}")),
        };
        match OpenOptions::new().write(true).create_new(true).open(&aside) {
            Ok(f) => break (aside, f),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(io("create", &aside)(e)),
        }
    };
    f.write_all(bytes).map_err(io("write", &aside))?;
    f.sync_all().map_err(io("flush", &aside))?;
    // The new name must survive a machine crash too: the caller is about
    // to cut the bytes out of the original file.
    sync_dir(dir)?;
    Ok(aside)
}
