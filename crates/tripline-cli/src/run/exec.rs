//! Running the command: stdio passed through, SIGTERM/SIGINT/SIGHUP/SIGQUIT
//! forwarded, an optional timeout, and the result classified.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;

use super::state::Verdict;

/// Exit status after `--timeout` (as coreutils `timeout`).
pub(crate) const TIMEOUT_EXIT: u8 = 124;
/// Exit status when the command could not be started (as a shell).
pub(crate) const NOT_STARTED_EXIT: u8 = 127;
/// How long a timed-out command gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// What to run and how to judge it.
pub(crate) struct Spec<'a> {
    pub(crate) command: &'a [OsString],
    pub(crate) timeout: Option<Duration>,
    pub(crate) fail_on_exit: &'a [u8],
}

/// How the command ended.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) exit: u8,
    pub(crate) verdict: Verdict,
    pub(crate) elapsed: Duration,
}

/// Runs the command to its end. `elapsed` is measured by the caller's
/// clock readings, so it is passed in as a closure.
pub(crate) fn execute(spec: &Spec<'_>, elapsed: impl Fn() -> Duration) -> Ran {
    let Some((program, args)) = spec.command.split_first() else {
        return not_started("no command", elapsed());
    };
    // Signals are caught before the command starts: a SIGTERM that comes
    // as soon as the command runs must reach it, not kill tripline (the
    // default action) and leave the command running unrecorded.
    let child_pid = Arc::new(Target::default());
    let forwarded = Arc::new(AtomicBool::new(false));
    let signals = forward_signals(&child_pid, &forwarded);
    let mut child = match Command::new(program).args(args).spawn() {
        Ok(c) => c,
        Err(e) => {
            if let Some(h) = signals {
                h.close();
            }
            return not_started(
                &format!("cannot run {}: {e}", program.to_string_lossy()),
                elapsed(),
            );
        }
    };
    child_pid.started(i32::try_from(child.id()).unwrap_or(0));
    let timed_out = Arc::new(AtomicBool::new(false));
    let (done, wait_done) = mpsc::channel::<()>();
    if let Some(limit) = spec.timeout {
        let (child_pid, timed_out) = (child_pid.clone(), timed_out.clone());
        std::thread::spawn(move || {
            if wait_done.recv_timeout(limit).is_err() {
                timed_out.store(true, Ordering::SeqCst);
                send(&child_pid, Signal::SIGTERM);
                if wait_done.recv_timeout(KILL_GRACE).is_err() {
                    send(&child_pid, Signal::SIGKILL);
                }
            }
        });
    }
    let status = child.wait();
    // No signal may reach a reused pid once the child is reaped.
    child_pid.reaped();
    let _ = done.send(());
    if let Some(h) = signals {
        h.close();
    }
    let elapsed = elapsed();
    let status = match status {
        Ok(s) => s,
        Err(e) => return not_started(&format!("lost the command: {e}"), elapsed),
    };
    if timed_out.load(Ordering::SeqCst) {
        eprintln!(
            "tripline: command timed out after {}",
            humantime::format_duration(spec.timeout.unwrap_or_default())
        );
        return Ran {
            exit: TIMEOUT_EXIT,
            verdict: Verdict::Failure,
            elapsed,
        };
    }
    // A signal we forwarded is an operator cancelling the run, not the
    // dependency failing, however the command then ends.
    let cancelled = forwarded.load(Ordering::SeqCst);
    if let Some(code) = status.code() {
        let verdict = match code {
            0 => Verdict::Success,
            _ if cancelled => Verdict::Cancelled,
            c if spec.fail_on_exit.is_empty()
                || u8::try_from(c).is_ok_and(|c| spec.fail_on_exit.contains(&c)) =>
            {
                Verdict::Failure
            }
            _ => Verdict::Ignored,
        };
        return Ran {
            exit: u8::try_from(code).unwrap_or(1),
            verdict,
            elapsed,
        };
    }
    let signal = status.signal().unwrap_or(0);
    // Killed by a signal we did not forward (a crash, the OOM killer):
    // a failure.
    let verdict = if cancelled {
        Verdict::Cancelled
    } else {
        Verdict::Failure
    };
    Ran {
        exit: u8::try_from(128 + signal).unwrap_or(255),
        verdict,
        elapsed,
    }
}

fn not_started(why: &str, elapsed: Duration) -> Ran {
    eprintln!("tripline: {why}");
    Ran {
        exit: NOT_STARTED_EXIT,
        verdict: Verdict::Cancelled,
        elapsed,
    }
}

/// The command's pid while it runs, and the last signal that came before
/// it started (sent to it as soon as it has a pid). One lock, so a signal
/// is either sent or kept, never lost between the two.
#[derive(Default)]
struct Target(Mutex<TargetState>);

#[derive(Default)]
struct TargetState {
    /// 0 before the start and after the reaping.
    pid: i32,
    pending: Option<Signal>,
}

impl Target {
    fn started(&self, pid: i32) {
        let mut t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        t.pid = pid;
        if let Some(signal) = t.pending.take() {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    fn reaped(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).pid = 0;
    }
}

/// Sends `signal` to the running command; before it starts, keeps it for
/// the start; after it is reaped, drops it.
fn send(target: &Target, signal: Signal) {
    let mut t = target.0.lock().unwrap_or_else(PoisonError::into_inner);
    if t.pid > 0 {
        let _ = kill(Pid::from_raw(t.pid), signal);
    } else if t.pending.is_none() || signal == Signal::SIGKILL {
        t.pending = Some(signal);
    }
}

/// Forwards the signals a CI runner or an operator sends to the child.
/// A Ctrl-C at a terminal reaches the child twice (the terminal signals the
/// whole foreground group, and tripline forwards it): harmless for the
/// termination signals forwarded here, and the only way to reach a child
/// when a runner signals tripline alone.
fn forward_signals(
    child_pid: &Arc<Target>,
    forwarded: &Arc<AtomicBool>,
) -> Option<signal_hook::iterator::Handle> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGQUIT]).ok()?;
    let handle = signals.handle();
    let (child_pid, forwarded) = (child_pid.clone(), forwarded.clone());
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if let Ok(s) = Signal::try_from(sig) {
                forwarded.store(true, Ordering::SeqCst);
                send(&child_pid, s);
            }
        }
    });
    Some(handle)
}
