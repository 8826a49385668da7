//! The failback log's records: length-prefixed, checksummed, append-only.
//!
//! ```text
//! file    := magic record*
//! magic   := "TLFBQ" 0x00 0x00 0x01            (8 bytes: format version 1)
//! record  := len:u32le crc:u32le body          (crc32 (IEEE) of body; len = |body|)
//! body    := 0x01 id:u64le accepted_at:u64le next_due:u64le payload   an accepted entry
//!          | 0x02 id:u64le attempts:u32le next_due:u64le             a failed retry
//!          | 0x03 id:u64le status:u8                                 done (1 delivered, 2 gave up)
//! ```
//!
//! Times are nanoseconds on the failback's clock. Reading stops at the
//! first record that is short, too long, fails its checksum or does not
//! parse: everything before it is the readable prefix, everything from it
//! on is the corrupt tail.

/// The file's first 8 bytes.
pub(crate) const MAGIC: &[u8; 8] = b"TLFBQ\x00\x00\x01";
/// `len` + `crc`.
const HEAD: usize = 8;
/// Largest body accepted on reading (a larger `len` is corruption).
pub(crate) const MAX_BODY: usize = 256 << 20;

const ENTRY: u8 = 1;
const ATTEMPTED: u8 = 2;
const DONE: u8 = 3;

/// How an entry left the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DoneStatus {
    Delivered = 1,
    GaveUp = 2,
}

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    Entry {
        id: u64,
        accepted_at: u64,
        next_due: u64,
        payload: &'a [u8],
    },
    Attempted {
        id: u64,
        attempts: u32,
        next_due: u64,
    },
    Done {
        id: u64,
        status: DoneStatus,
    },
}

/// Appends the encoding of `r` to `out`.
pub(crate) fn encode(r: &Record<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; HEAD]);
    match r {
        Record::Entry {
            id,
            accepted_at,
            next_due,
            payload,
        } => {
            out.push(ENTRY);
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&accepted_at.to_le_bytes());
            out.extend_from_slice(&next_due.to_le_bytes());
            out.extend_from_slice(payload);
        }
        Record::Attempted {
            id,
            attempts,
            next_due,
        } => {
            out.push(ATTEMPTED);
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&attempts.to_le_bytes());
            out.extend_from_slice(&next_due.to_le_bytes());
        }
        Record::Done { id, status } => {
            out.push(DONE);
            out.extend_from_slice(&id.to_le_bytes());
            out.push(*status as u8);
        }
    }
    let body = &out[start + HEAD..];
    let len = body.len() as u32;
    let crc = crc32fast::hash(body);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + HEAD].copy_from_slice(&crc.to_le_bytes());
}

/// The encoded size of an entry with a payload of `n` bytes.
pub(crate) const fn entry_size(n: usize) -> usize {
    HEAD + 25 + n
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
}

/// Reads the record at `buf[at..]`: `Ok(None)` at the end, `Ok(Some((record,
/// next)))`, or `Err(reason)` when the bytes from `at` on are corrupt.
pub(crate) fn read(buf: &[u8], at: usize) -> Result<Option<(Record<'_>, usize)>, &'static str> {
    if at == buf.len() {
        return Ok(None);
    }
    let (Some(len), Some(crc)) = (u32_at(buf, at), u32_at(buf, at + 4)) else {
        return Err("truncated record header");
    };
    let len = len as usize;
    if len == 0 || len > MAX_BODY {
        return Err("impossible record length");
    }
    let Some(body) = buf.get(at + HEAD..at + HEAD + len) else {
        return Err("truncated record");
    };
    if crc32fast::hash(body) != crc {
        return Err("checksum mismatch");
    }
    let record = match body[0] {
        // Ids count up from 1 and one queue can never hand out 2^64 of
        // them, so `u64::MAX` was never written by a queue: taking it
        // would overflow the next id (and reuse ids after it).
        ENTRY if len >= 25 && u64_at(body, 1) == Some(u64::MAX) => {
            return Err("impossible entry id");
        }
        ENTRY if len >= 25 => Record::Entry {
            id: u64_at(body, 1).ok_or("bad entry")?,
            accepted_at: u64_at(body, 9).ok_or("bad entry")?,
            next_due: u64_at(body, 17).ok_or("bad entry")?,
            payload: &body[25..],
        },
        ATTEMPTED if len == 21 => Record::Attempted {
            id: u64_at(body, 1).ok_or("bad attempt record")?,
            attempts: u32_at(body, 9).ok_or("bad attempt record")?,
            next_due: u64_at(body, 13).ok_or("bad attempt record")?,
        },
        DONE if len == 10 => Record::Done {
            id: u64_at(body, 1).ok_or("bad done record")?,
            status: match body[9] {
                1 => DoneStatus::Delivered,
                2 => DoneStatus::GaveUp,
                _ => return Err("unknown done status"),
            },
        },
        _ => return Err("unknown record kind"),
    };
    Ok(Some((record, at + HEAD + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_corruption_is_caught() {
        let mut buf = Vec::new();
        let records = [
            Record::Entry {
                id: 7,
                accepted_at: 1,
                next_due: 2,
                payload: b"hello",
            },
            Record::Attempted {
                id: 7,
                attempts: 3,
                next_due: 9,
            },
            Record::Done {
                id: 7,
                status: DoneStatus::GaveUp,
            },
        ];
        for r in &records {
            encode(r, &mut buf);
        }
        assert_eq!(entry_size(5), 38);
        let mut at = 0;
        for r in &records {
            let (got, next) = read(&buf, at).unwrap().unwrap();
            assert_eq!(&got, r);
            at = next;
        }
        assert_eq!(read(&buf, at), Ok(None));
        let mut bad = buf.clone();
        bad[12] ^= 0xFF;
        assert_eq!(read(&bad, 0), Err("checksum mismatch"));
        assert_eq!(read(&buf[..20], 0), Err("truncated record"));
        assert_eq!(read(&buf[..3], 0), Err("truncated record header"));
    }
}
