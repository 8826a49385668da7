//! The state directory: `<name>.json` guarded by `<name>.lock`.
//!
//! The advisory lock (`File::lock`, released by the kernel when its holder
//! dies, so a `kill -9` never leaves it stuck) is taken only around one
//! read–decide–write. Writes go to a temp file renamed over the state:
//! readers see the old or the new state, never a torn one. Only writes that
//! change a decision are fsynced (see [`Store::write`]).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::state::{StateFile, VERSION};
use crate::CliError;

/// One breaker's files.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    state: PathBuf,
    lock: PathBuf,
    temp: PathBuf,
}

/// The lock, held until dropped.
pub(crate) struct Locked {
    _file: File,
}

impl Store {
    /// Resolves and creates the state directory; an unusable one is bad
    /// input (exit 2), found before any command runs.
    pub(crate) fn open(dir: Option<PathBuf>, name: &str) -> Result<Self, CliError> {
        let dir = match dir {
            Some(d) => d,
            None => default_dir()?,
        };
        fs::create_dir_all(&dir).map_err(|e| {
            CliError::input(format!("--state-dir {}: cannot create: {e}", dir.display()))
        })?;
        let store = Store {
            state: dir.join(format!("{name}.json")),
            lock: dir.join(format!("{name}.lock")),
            temp: dir.join(format!(".{name}.json.{}.tmp", std::process::id())),
            dir,
        };
        // Unwritable? Find out now, not after the command ran.
        store.lock_file().map_err(|e| {
            CliError::input(format!(
                "--state-dir {}: not writable: {}",
                store.dir.display(),
                e.message
            ))
        })?;
        Ok(store)
    }

    fn lock_file(&self) -> Result<File, CliError> {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&self.lock)
            .map_err(|e| CliError::other(format!("{}: {e}", self.lock.display())))
    }

    /// Takes the lock (blocking while another run holds it).
    pub(crate) fn lock(&self) -> Result<Locked, CliError> {
        let file = self.lock_file()?;
        file.lock()
            .map_err(|e| CliError::other(format!("{}: cannot lock: {e}", self.lock.display())))?;
        Ok(Locked { _file: file })
    }

    /// Reads the state; a missing file is a fresh breaker, a corrupt one is
    /// reported on stderr and replaced by a fresh breaker.
    pub(crate) fn read(&self, _lock: &Locked) -> StateFile {
        let mut text = String::new();
        match File::open(&self.state) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return StateFile::fresh(),
            Err(e) => {
                warn_fresh(&self.state, &e.to_string());
                return StateFile::fresh();
            }
            Ok(mut f) => {
                if let Err(e) = f.read_to_string(&mut text) {
                    warn_fresh(&self.state, &e.to_string());
                    return StateFile::fresh();
                }
            }
        }
        match serde_json::from_str::<StateFile>(&text) {
            Ok(s) if s.version == VERSION => s,
            Ok(s) => {
                warn_fresh(&self.state, &format!("unknown version {}", s.version));
                StateFile::fresh()
            }
            Err(e) => {
                warn_fresh(&self.state, &e.to_string());
                StateFile::fresh()
            }
        }
    }

    /// Replaces the state atomically: a temp file renamed over the state,
    /// so a reader sees the old or the new state, never a torn one. When
    /// `durable` (a decision changed: the breaker's state or a probe
    /// lease), the temp file is fsynced before the rename and the
    /// directory after it, so the decision survives a power loss.
    ///
    /// The trade-off: a run that only adds evidence (a success or failure
    /// recorded in a closed window, a rejection counted while open) is not
    /// fsynced. That is most runs, and on a real disk the two fsyncs cost
    /// more than the rest of the run. A crash of the process at any point
    /// still leaves the old or the new file (the kernel has the data); only
    /// a power loss or kernel crash soon after such a write can lose it.
    /// Filesystems that order a replacing rename after its data (ext4's
    /// `auto_da_alloc`, btrfs) then bring back the last fsynced or a later
    /// state: a few runs of evidence lost, never a decision. On others
    /// the file may come back empty or torn; the next run reports it and
    /// starts a fresh breaker, as for any corrupt state file.
    pub(crate) fn write(
        &self,
        _lock: &Locked,
        state: &StateFile,
        durable: bool,
    ) -> Result<(), CliError> {
        let fail = |e: std::io::Error| {
            CliError::other(format!("{}: cannot save state: {e}", self.state.display()))
        };
        let text = serde_json::to_vec(state)
            .map_err(|e| CliError::other(format!("cannot encode state: {e}")))?;
        let mut f = File::create(&self.temp).map_err(fail)?;
        f.write_all(&text).map_err(fail)?;
        if durable {
            f.sync_all().map_err(fail)?;
        }
        drop(f);
        test_stall_point();
        fs::rename(&self.temp, &self.state).map_err(fail)?;
        if durable {
            // The rename itself is durable only once the directory is.
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(fail)?;
        }
        Ok(())
    }

    /// With a shared store: this host's count of runs that could not
    /// reach it, kept beside the state (`<name>.store-errors`) so the
    /// textfile counter grows across runs. Under the lock; not fsynced (a
    /// metric, not a decision).
    pub(crate) fn bump_store_errors(&self) -> u64 {
        let Ok(lock) = self.lock() else {
            return 0;
        };
        let next = self.store_errors() + 1;
        let path = self.state.with_extension("store-errors");
        let temp = self.temp.with_extension("store-errors");
        let written = fs::write(&temp, next.to_string()).and_then(|()| fs::rename(&temp, &path));
        if let Err(e) = written {
            eprintln!("tripline: warning: {}: {e}", path.display());
        }
        drop(lock);
        next
    }

    /// This host's count of runs that could not reach the shared store.
    pub(crate) fn store_errors(&self) -> u64 {
        fs::read_to_string(self.state.with_extension("store-errors"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    pub(crate) fn state_path(&self) -> &Path {
        &self.state
    }
}

fn warn_fresh(path: &Path, why: &str) {
    eprintln!(
        "tripline: warning: state file {} is unreadable ({why}); starting a fresh breaker",
        path.display()
    );
}

/// For the crash test only: with `TRIPLINE_TEST_STALL_LOCKED` set, a run
/// stops between writing its temp file and renaming it — holding the
/// lock — and waits on stdin until it is killed.
fn test_stall_point() {
    if std::env::var_os("TRIPLINE_TEST_STALL_LOCKED").is_some() {
        eprintln!("tripline: stalled holding the lock");
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
}

fn default_dir() -> Result<PathBuf, CliError> {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("tripline"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".local/state/tripline")),
        None => Err(CliError::input(
            "--state-dir: not given, and neither XDG_STATE_HOME nor HOME is set",
        )),
    }
}
