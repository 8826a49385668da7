//! Who holds a probe lease, precisely enough to tell that it died.
//!
//! A probe lease names its process so that a later run can free the slot
//! of a probe that was killed (`kill -9`, an OOM kill, a cancelled CI job)
//! at once instead of waiting out the lease. A pid alone is not enough:
//! pids are reused, and the same number means another process in another
//! pid namespace (a container sharing the state dir) or after a reboot
//! (a state dir on disk). So the owner is the pid plus
//!
//! * the process's start time (`/proc/PID/stat`, field 22, in clock ticks
//!   since boot): a reused pid has a later one;
//! * the boot id (`/proc/sys/kernel/random/boot_id`): start times and pids
//!   only mean something within one boot;
//! * the pid namespace (the inode of `/proc/self/ns/pid`): pids only mean
//!   something within one namespace.
//!
//! A lease is judged dead only when the reader shares the owner's boot and
//! pid namespace and the pid is gone, a zombie, or now another process
//! (its start time differs). Anything else — another namespace, another
//! boot id (a reboot, or another machine sharing the dir), no `/proc` — is
//! "unknown", and the lease ends by its expiry alone.

use std::os::unix::fs::MetadataExt;

use serde::{Deserialize, Serialize};

/// The identity of a lease's process, besides its pid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Owner {
    /// Clock ticks after boot at which the process started.
    pub(crate) start_time: u64,
    /// The kernel's boot id when the lease was taken.
    pub(crate) boot_id: String,
    /// The inode of the owner's pid namespace.
    pub(crate) pid_ns: u64,
}

/// What a reader can say about a lease's process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// The process that took the lease still runs.
    Alive,
    /// It is gone (or the pid now names another process).
    Dead,
    /// This reader cannot tell: another boot or pid namespace, or no
    /// `/proc`.
    Unknown,
}

/// The boot and pid namespace this process runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Here {
    boot_id: String,
    pid_ns: u64,
}

impl Here {
    /// Reads them from `/proc`; `None` where it cannot (not Linux).
    pub(crate) fn read() -> Option<Here> {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let pid_ns = std::fs::metadata("/proc/self/ns/pid").ok()?.ino();
        Some(Here {
            boot_id: boot_id.trim().to_owned(),
            pid_ns,
        })
    }
}

impl Owner {
    /// This process as a lease owner; `None` where `/proc` cannot say
    /// (the lease then ends by its expiry alone).
    pub(crate) fn current() -> Option<Owner> {
        let here = Here::read()?;
        let (start_time, _) = stat("self")?;
        Some(Owner {
            start_time,
            boot_id: here.boot_id,
            pid_ns: here.pid_ns,
        })
    }

    /// Whether the process `pid` that took a lease as `self` still runs,
    /// as seen from `here`.
    pub(crate) fn liveness(&self, pid: u32, here: Option<&Here>) -> Liveness {
        let Some(here) = here else {
            return Liveness::Unknown;
        };
        if here.boot_id != self.boot_id || here.pid_ns != self.pid_ns {
            return Liveness::Unknown;
        }
        match stat(&pid.to_string()) {
            None => Liveness::Dead,
            Some((start, state)) if start != self.start_time || matches!(state, 'Z' | 'X') => {
                Liveness::Dead
            }
            Some(_) => Liveness::Alive,
        }
    }
}

/// `(start time, state letter)` of `/proc/<who>/stat`, or `None` if it
/// does not exist (or cannot be read).
fn stat(who: &str) -> Option<(u64, char)> {
    let text = std::fs::read_to_string(format!("/proc/{who}/stat")).ok()?;
    parse_stat(&text)
}

/// Field 3 (state) and field 22 (start time) of a stat line. The command
/// name (field 2) is in parentheses and may itself hold spaces and
/// parentheses, so fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<(u64, char)> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Fields 4..=21 lie between the state and the start time.
    let start = fields.nth(18)?.parse().ok()?;
    Some((start, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 \
                    1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_stat(line), Some((987_654, 'S')));
        assert_eq!(parse_stat("12 (x) Z 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_another_boot_is_unknown() {
        let Some(me) = Owner::current() else {
            return; // no /proc here: nothing to judge by
        };
        let here = Here::read();
        let pid = std::process::id();
        assert_eq!(me.liveness(pid, here.as_ref()), Liveness::Alive);
        let reused = Owner {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert_eq!(reused.liveness(pid, here.as_ref()), Liveness::Dead);
        let elsewhere = Owner {
            boot_id: "another-boot".into(),
            ..reused.clone()
        };
        assert_eq!(elsewhere.liveness(pid, here.as_ref()), Liveness::Unknown);
        let other_ns = Owner {
            pid_ns: me.pid_ns + 1,
            ..reused
        };
        assert_eq!(other_ns.liveness(pid, here.as_ref()), Liveness::Unknown);
        assert_eq!(me.liveness(pid, None), Liveness::Unknown);
    }
}
