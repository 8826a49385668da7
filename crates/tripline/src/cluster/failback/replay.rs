//! Reading a queue file back: replaying records into the index, moving a
//! corrupt tail aside, and reading the dead letters.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::config::{CorruptTail, FailbackError};
use super::queue::{DEAD, LOG, Pending, io};
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
    let aside = dir.join(format!("{LOG}.corrupt-{at}"));
    let mut f = File::create(&aside).map_err(io("create", &aside))?;
    f.write_all(&buf[at..]).map_err(io("write", &aside))?;
    f.sync_all().map_err(io("flush", &aside))?;
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
