//! The durable queue: the append-only log on disk and its in-memory index.
//!
//! Opening replays the log: entries are indexed, attempt records update
//! them, done records remove them. The log is then compacted — rewritten
//! with only the pending entries, to a temporary file that is flushed and
//! renamed over the log — so it never grows past what is pending plus the
//! records written since; it is compacted again whenever it exceeds twice
//! the pending entries' size plus 64 KiB. Opening also repairs the
//! dead-letter file (see `dead.rs`).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{FailbackError, FsyncPolicy, OpenReport};
use super::dead;
use super::files::{io, replace};
use super::record::{self, DoneStatus, MAGIC, Record};
use super::replay::{apply, quarantine};

pub(crate) const LOG: &str = "failback.log";
pub(crate) const DEAD: &str = "failback.dead";
const SLACK: u64 = 64 << 10;

/// One pending entry.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    pub(crate) accepted_at: u64,
    pub(crate) attempts: u32,
    pub(crate) next_due: u64,
    pub(crate) payload: Arc<[u8]>,
    /// Being delivered right now (not due for anyone else).
    pub(crate) in_flight: bool,
    /// The last backoff wait, nanoseconds (not persisted: 0 after a restart).
    pub(crate) wait: u64,
}

impl Pending {
    /// An entry accepted at `accepted_at`, first due at `next_due`, not
    /// yet tried; `wait` is the backoff it waited so far.
    pub(crate) fn new(accepted_at: u64, next_due: u64, payload: &[u8], wait: u64) -> Pending {
        Pending {
            accepted_at,
            attempts: 0,
            next_due,
            payload: Arc::from(payload),
            in_flight: false,
            wait,
        }
    }

    /// The log record that writes this entry as entry `id`.
    pub(crate) fn entry(&self, id: u64) -> Record<'_> {
        Record::Entry {
            id,
            accepted_at: self.accepted_at,
            next_due: self.next_due,
            payload: &self.payload,
        }
    }
}

pub(crate) struct Queue {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    /// The log's length: where the next record goes.
    len: u64,
    pub(crate) pending: BTreeMap<u64, Pending>,
    /// Payload bytes pending.
    pub(crate) bytes: u64,
    next_id: u64,
    fsync: FsyncPolicy,
    poisoned: bool,
    scratch: Vec<u8>,
}

impl Queue {
    /// Opens (or creates) the queue in `dir` and replays it.
    pub(crate) fn open(
        dir: &Path,
        fsync: FsyncPolicy,
    ) -> Result<(Queue, OpenReport), FailbackError> {
        fs::create_dir_all(dir).map_err(io("create directory", dir))?;
        let path = dir.join(LOG);
        let mut buf = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut buf).map_err(io("read", &path))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("open", &path)(e)),
        }
        if !buf.is_empty() && !buf.starts_with(MAGIC) {
            return Err(FailbackError::NotAQueue { path });
        }
        let mut report = OpenReport::default();
        let mut pending = BTreeMap::new();
        let mut next_id = 1;
        let mut at = if buf.is_empty() {
            buf.len()
        } else {
            MAGIC.len()
        };
        loop {
            match record::read(&buf, at) {
                Ok(None) => break,
                Ok(Some((r, next))) => {
                    apply(&mut pending, &mut next_id, r);
                    at = next;
                }
                Err(reason) => {
                    report.corrupt = Some(quarantine(dir, &path, &buf, at, reason)?);
                    break;
                }
            }
        }
        report.corrupt_dead_letters = dead::repair(dir)?;
        let bytes = pending
            .values()
            .map(|p: &Pending| p.payload.len() as u64)
            .sum();
        report.recovered = pending.len();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io("open for writing", &path))?;
        let mut q = Queue {
            dir: dir.to_owned(),
            path,
            file,
            len: 0,
            pending,
            bytes,
            next_id,
            fsync,
            poisoned: false,
            scratch: Vec::new(),
        };
        q.compact()?;
        Ok((q, report))
    }

    /// The log file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts an entry: durable (per the fsync policy) when this returns.
    pub(crate) fn push(
        &mut self,
        payload: &[u8],
        accepted_at: u64,
        next_due: u64,
        max_entries: usize,
        max_bytes: u64,
    ) -> Result<u64, FailbackError> {
        let len = payload.len() as u64;
        if len > max_bytes || record::entry_size(payload.len()) > record::MAX_BODY {
            return Err(FailbackError::PayloadTooLarge {
                len,
                max_bytes: max_bytes.min(record::MAX_BODY as u64),
            });
        }
        if self.pending.len() >= max_entries {
            return Err(FailbackError::Full {
                bound: "max_entries",
                limit: max_entries as u64,
                current: self.pending.len() as u64,
            });
        }
        if self.bytes + len > max_bytes {
            return Err(FailbackError::Full {
                bound: "max_bytes",
                limit: max_bytes,
                current: self.bytes,
            });
        }
        let id = self.next_id;
        let r = Record::Entry {
            id,
            accepted_at,
            next_due,
            payload,
        };
        self.write(&r, self.fsync == FsyncPolicy::EveryEntry)?;
        self.next_id += 1;
        self.bytes += len;
        let wait = next_due.saturating_sub(accepted_at);
        let pending = Pending::new(accepted_at, next_due, payload, wait);
        self.pending.insert(id, pending);
        Ok(id)
    }

    /// Records a failed retry (not flushed: losing it only repeats a
    /// retry). The index is updated even if the write fails.
    pub(crate) fn attempted(
        &mut self,
        id: u64,
        attempts: u32,
        next_due: u64,
        wait: u64,
    ) -> Result<(), FailbackError> {
        if let Some(p) = self.pending.get_mut(&id) {
            p.attempts = attempts;
            p.next_due = next_due;
            p.wait = wait;
            p.in_flight = false;
        }
        self.write(
            &Record::Attempted {
                id,
                attempts,
                next_due,
            },
            false,
        )
    }

    /// Removes an entry for good. The done record is not flushed: losing it
    /// to a machine crash means one more delivery (at least once). The
    /// entry leaves the index even if the write fails (then a restart
    /// delivers it once more).
    pub(crate) fn done(&mut self, id: u64, status: DoneStatus) -> Result<(), FailbackError> {
        if let Some(p) = self.pending.remove(&id) {
            self.bytes -= p.payload.len() as u64;
        }
        self.write(&Record::Done { id, status }, false)?;
        if self.len > 2 * self.live_size() + SLACK {
            self.compact()?;
        }
        Ok(())
    }

    /// Releases an entry taken for delivery without a verdict.
    pub(crate) fn release(&mut self, id: u64) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.in_flight = false;
        }
    }

    /// Appends an entry given up to the dead-letter file, flushed.
    pub(crate) fn bury(&mut self, id: u64, p: &Pending) -> Result<(), FailbackError> {
        dead::bury(&self.dir, id, p)
    }

    fn live_size(&self) -> u64 {
        self.pending
            .values()
            .map(|p| record::entry_size(p.payload.len()) as u64)
            .sum::<u64>()
            + MAGIC.len() as u64
    }

    fn write(&mut self, r: &Record<'_>, sync: bool) -> Result<(), FailbackError> {
        if self.poisoned {
            return Err(FailbackError::Poisoned {
                path: self.path.clone(),
            });
        }
        self.scratch.clear();
        record::encode(r, &mut self.scratch);
        let wrote = self.file.write_all(&self.scratch);
        let synced = wrote.and_then(|()| if sync { self.file.sync_data() } else { Ok(()) });
        match synced {
            Ok(()) => {
                self.len += self.scratch.len() as u64;
                Ok(())
            }
            Err(e) => {
                // Take the partial record back, or stop writing: a record
                // after garbage would be unreadable.
                if self.file.set_len(self.len).is_err() {
                    self.poisoned = true;
                }
                Err(io("append to", &self.path)(e))
            }
        }
    }

    /// Rewrites the log with only the pending entries.
    pub(crate) fn compact(&mut self) -> Result<(), FailbackError> {
        let mut buf = MAGIC.to_vec();
        for (&id, p) in &self.pending {
            record::encode(&p.entry(id), &mut buf);
            if p.attempts > 0 {
                let a = Record::Attempted {
                    id,
                    attempts: p.attempts,
                    next_due: p.next_due,
                };
                record::encode(&a, &mut buf);
            }
        }
        replace(&self.dir, &self.path, &buf)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io("open for writing", &self.path))?;
        self.len = buf.len() as u64;
        self.poisoned = false;
        Ok(())
    }
}
