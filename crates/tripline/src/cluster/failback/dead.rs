//! The dead-letter file `failback.dead`: entries given up, appended and
//! flushed one at a time; read back past any unreadable stretch; repaired
//! when the queue is opened.
//!
//! Its format is the log's (magic bytes, then records), holding entry
//! records only. It is only ever appended to, so a crash in the middle of
//! an append leaves a torn record at its end — or a torn magic, when the
//! crash hit the file's first append. Earlier versions kept appending
//! behind such a tear, so an unreadable stretch may also lie between
//! readable records.
//!
//! Invariant: every whole, checksummed entry record in the file is a dead
//! letter and stays readable, whatever lies before it. Reading skips an
//! unreadable stretch up to the next whole entry; opening the queue moves
//! each stretch aside (`failback.dead.corrupt-<offset>`, never
//! overwriting) and rewrites the file with the whole entries only, so new
//! dead letters are never appended behind garbage.
//!
//! A torn dead letter loses nothing acknowledged: an entry is marked given
//! up in the log only after its dead letter is flushed, so the entry of a
//! torn one is still pending after the restart and is given up again.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::ops::Range;
use std::path::Path;

use super::config::{CorruptTail, FailbackError};
use super::files::{io, replace, set_aside};
use super::queue::{DEAD, Pending};
use super::record::{self, MAGIC, Record};

/// Appends the dead letter of entry `id` to the file in `dir`, flushed.
pub(crate) fn bury(dir: &Path, id: u64, p: &Pending) -> Result<(), FailbackError> {
    let path = dir.join(DEAD);
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io("open dead letters", &path))?;
    let len = f.metadata().map_err(io("inspect", &path))?.len();
    let mut buf = Vec::new();
    if len == 0 {
        buf.extend_from_slice(MAGIC);
    }
    record::encode(&p.entry(id), &mut buf);
    let appended = f
        .write_all(&buf)
        .map_err(io("write dead letter", &path))
        .and_then(|()| f.sync_data().map_err(io("flush dead letter", &path)));
    // Take back whatever part of the record reached the file, so the next
    // dead letter is not appended behind it. Should that fail too, readers
    // skip the torn record and the next open moves it aside.
    if appended.is_err() && f.set_len(len).is_err() {
        tracing::warn!(target: "tripline::cluster", path = %path.display(),
            "failback: a failed dead letter could not be taken back");
    }
    appended
}

/// The dead letters of the file in `dir`, oldest first, skipping any
/// unreadable stretch.
pub(crate) fn read(dir: &Path) -> Result<Vec<Vec<u8>>, FailbackError> {
    let path = dir.join(DEAD);
    let Some(buf) = contents(&path)? else {
        return Ok(Vec::new());
    };
    let scan = Scan::of(&buf).ok_or(FailbackError::NotAQueue { path })?;
    Ok(scan.letters.iter().map(|(_, p)| p.to_vec()).collect())
}

/// Makes the file in `dir` whole again: moves each unreadable stretch
/// aside, then replaces the file with its magic bytes and its whole
/// entries, unchanged and in order. Returns the stretches moved aside.
/// Refuses (untouched) a file that is not a dead-letter file.
pub(crate) fn repair(dir: &Path) -> Result<Vec<CorruptTail>, FailbackError> {
    let path = dir.join(DEAD);
    let Some(buf) = contents(&path)? else {
        return Ok(Vec::new());
    };
    let scan = Scan::of(&buf).ok_or_else(|| FailbackError::NotAQueue { path: path.clone() })?;
    let torn_magic = scan.start < MAGIC.len() && !buf.is_empty();
    if !torn_magic && scan.stretches.is_empty() {
        return Ok(Vec::new());
    }
    let mut moved = Vec::new();
    for (range, reason) in scan.stretches {
        // Aside (and flushed) before the rewrite drops them from the file.
        let quarantined = set_aside(dir, DEAD, range.start, &buf[range.clone()])?;
        tracing::error!(target: "tripline::cluster", path = %path.display(),
            offset = range.start, bytes = range.len(), reason,
            "failback dead letters: unreadable stretch quarantined");
        moved.push(CorruptTail {
            offset: range.start as u64,
            len: range.len() as u64,
            reason,
            quarantined,
        });
    }
    let mut whole = MAGIC.to_vec();
    for (range, _) in scan.letters {
        whole.extend_from_slice(&buf[range]);
    }
    replace(dir, &path, &whole)?;
    Ok(moved)
}

/// The file's bytes, or `None` if there is no file.
fn contents(path: &Path) -> Result<Option<Vec<u8>>, FailbackError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read", path)(e)),
    }
}

/// A dead-letter file taken apart: its whole entries and the unreadable
/// stretches between them, which together cover `start..` exactly.
struct Scan<'a> {
    /// Where the records begin: after the magic bytes, or after the torn
    /// magic of a crash in the file's first append.
    start: usize,
    /// Each whole entry's bytes and payload.
    letters: Vec<(Range<usize>, &'a [u8])>,
    /// Each unreadable stretch, and why its first byte could not be read.
    stretches: Vec<(Range<usize>, &'static str)>,
}

impl<'a> Scan<'a> {
    /// Takes `buf` apart, or `None` if it is not a dead-letter file.
    fn of(buf: &'a [u8]) -> Option<Scan<'a>> {
        let same = buf.iter().zip(MAGIC).take_while(|(a, b)| a == b).count();
        // A proper prefix of the magic is a torn first append: nothing
        // more, or (from earlier versions) whole entries right behind it,
        // whose first bytes may happen to continue the magic.
        let start = if same == MAGIC.len() || same == buf.len() {
            same
        } else {
            (1..=same).rev().find(|&k| entry_at(buf, k).is_some())?
        };
        let mut scan = Scan {
            start,
            letters: Vec::new(),
            stretches: Vec::new(),
        };
        let mut at = start;
        while at < buf.len() {
            if let Some((payload, next)) = entry_at(buf, at) {
                scan.letters.push((at..next, payload));
                at = next;
                continue;
            }
            let reason = match record::read(buf, at) {
                Err(reason) => reason,
                Ok(_) => "not a dead letter",
            };
            // Resynchronise on the next whole entry (a record whose
            // checksum matches by chance: about one offset in 2^32).
            let end = (at + 1..buf.len())
                .find(|&i| entry_at(buf, i).is_some())
                .unwrap_or(buf.len());
            scan.stretches.push((at..end, reason));
            at = end;
        }
        Some(scan)
    }
}

/// The payload of the whole entry record at `buf[at..]` and where the
/// next record begins, if one is there.
fn entry_at(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    match record::read(buf, at) {
        Ok(Some((Record::Entry { payload, .. }, next))) => Some((payload, next)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, payload: &[u8], out: &mut Vec<u8>) {
        let r = Record::Entry {
            id,
            accepted_at: 0,
            next_due: 0,
            payload,
        };
        record::encode(&r, out);
    }

    fn payloads<'a>(scan: &Scan<'a>) -> Vec<&'a [u8]> {
        scan.letters.iter().map(|(_, p)| *p).collect()
    }

    #[test]
    fn the_scan_skips_torn_records_and_a_torn_magic() {
        // Whole entries on both sides of a torn one.
        let mut buf = MAGIC.to_vec();
        entry(1, b"one", &mut buf);
        let torn_at = buf.len();
        let mut torn = Vec::new();
        entry(2, b"two", &mut torn);
        buf.extend_from_slice(&torn[..torn.len() / 2]);
        let after = buf.len();
        entry(3, b"six", &mut buf);
        let scan = Scan::of(&buf).unwrap();
        assert_eq!(payloads(&scan), [b"one", b"six"]);
        assert_eq!(scan.stretches.len(), 1);
        assert_eq!(scan.stretches[0].0, torn_at..after);

        // A torn magic, then entries an earlier version appended; the
        // first of them has a length whose low byte (0) continues the magic.
        let big = vec![7u8; 256 - 25];
        let mut buf = MAGIC[..5].to_vec();
        entry(1, &big, &mut buf);
        entry(2, b"two", &mut buf);
        assert_eq!(buf[5], MAGIC[5], "the length continues the magic");
        let scan = Scan::of(&buf).unwrap();
        assert_eq!((scan.start, payloads(&scan)), (5, vec![&big[..], b"two"]));
        assert!(scan.stretches.is_empty());

        // A torn magic alone, an empty file, and a foreign file.
        assert_eq!(Scan::of(&MAGIC[..3]).map(|s| s.start), Some(3));
        assert_eq!(Scan::of(b"").map(|s| s.start), Some(0));
        assert!(Scan::of(b"TLF notes").is_none());
    }
}
