//! Reading the log back: replaying records into the index, and moving a
//! corrupt tail — or any unreadable bytes — aside.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::Path;

use super::config::{CorruptTail, FailbackError};
use super::files::{io, set_aside};
use super::queue::{LOG, Pending};
use super::record::Record;

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
            pending.insert(id, Pending::new(accepted_at, next_due, payload, 0));
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
