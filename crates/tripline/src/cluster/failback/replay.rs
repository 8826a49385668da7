//! Reading a queue file back: replaying records into the index, moving a
//! corrupt tail aside, and reading the dead letters.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{CorruptTail, FailbackError};
use super::queue::{DEAD, LOG, Pending, io, sync_dir};
use super::record::{self, MAGIC, Record};

/// Applies one replayed record to the index.
pub(crate) fn apply(pending: &mut BTreeMap<u64, Pending>, next_id: &mut u64, r: Record<'_>) {
    match r {
        Record::Entry {
            id,
            accepted_at,
            next_due,
            payload,
        } => {
            *next_id = (*next_id).max(id + 1);
            pending.insert(
                id,
                Pending {
                    accepted_at,
                    attempts: 0,
                    next_due,
                    payload: Arc::from(payload),
                    in_flight: false,
                    wait: 0,
                },
            );
        }
        Record::Attempted {
            id,
            attempts,
            next_due,
        } => {
            if let Some(p) = pending.get_mut(&id) {
                p.attempts = attempts;
                p.next_due = next_due;
            }
        }
        Record::Done { id, .. } => {
            pending.remove(&id);
        }
    }
}

/// Moves the corrupt tail `buf[at..]` aside and truncates the log at `at`.
pub(crate) fn quarantine(
    dir: &Path,
    path: &Path,
    buf: &[u8],
    at: usize,
    reason: &'static str,
) -> Result<CorruptTail, FailbackError> {
    // The tail is on disk under its own name before the log loses it.
    let aside = set_aside(dir, LOG, at, &buf[at..])?;
    let log = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io("open for truncation", path))?;
    log.set_len(at as u64).map_err(io("truncate", path))?;
    log.sync_all().map_err(io("flush", path))?;
    tracing::error!(target: "tripline::cluster", path = %path.display(), offset = at,
        bytes = buf.len() - at, reason, "failback queue: corrupt tail quarantined");
    Ok(CorruptTail {
        offset: at as u64,
        len: (buf.len() - at) as u64,
        reason,
        quarantined: aside,
    })
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

/// Reads the payloads of the dead-letter file in `dir` (for an operator).
pub(crate) fn dead_letters(dir: &Path) -> Result<Vec<Vec<u8>>, FailbackError> {
    let path = dir.join(DEAD);
    let buf = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("read", &path)(e)),
    };
    if !buf.starts_with(MAGIC) {
        return Err(FailbackError::NotAQueue { path });
    }
    let mut out = Vec::new();
    let mut at = MAGIC.len();
    while let Ok(Some((r, next))) = record::read(&buf, at) {
        if let Record::Entry { payload, .. } = r {
            out.push(payload.to_vec());
        }
        at = next;
    }
    Ok(out)
}
