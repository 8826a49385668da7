//! The file source: a config file watched with `notify`, every change
//! re-read and applied.
//!
//! The watch is on the file's directory, not the file: editors and config
//! management replace a file by writing a new one and renaming it over the
//! old, which a watch on the old inode would miss. Events are debounced
//! (one apply per burst of writes) and a content hash skips documents
//! already seen, so a save that touches the file twice applies once. A
//! file that is briefly missing (mid-rename) keeps the last good config.
//! So does an empty file: writing a file in place truncates it first, and a
//! debounce window that closes between the truncation and the write would
//! otherwise apply an empty document (seen on a loaded CI machine). A fleet
//! that means "no breakers" says so with a document, not with zero bytes.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};

use crate::applier::{Applier, Origin};
use crate::document::MAX_DOCUMENT_BYTES;
use crate::rollout::fnv1a;

/// Watches one config file and applies it on every change; stops when dropped.
///
/// ```no_run
/// use std::time::Duration;
/// use tripline_config::{Applier, FileSource};
///
/// let applier = Applier::builder().instance_id("web-1").build();
/// let _source = FileSource::watch("breakers.toml".as_ref(), applier.clone(),
///                                 Duration::from_millis(200)).unwrap();
/// // ... the breakers follow the file until `_source` is dropped.
/// ```
pub struct FileSource {
    _debouncer: Debouncer<notify::RecommendedWatcher>,
    path: PathBuf,
}

impl FileSource {
    /// Applies `path` now (if it exists), then on every change, debounced
    /// by `debounce`. Fails only if the directory cannot be watched.
    pub fn watch(path: &Path, applier: Applier, debounce: Duration) -> notify::Result<FileSource> {
        let path = std::path::absolute(path)?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let reader = Arc::new(FileReader {
            path: path.clone(),
            applier,
            last_hash: Mutex::new(None),
        });
        reader.reload();
        let handler = reader.clone();
        let mut debouncer =
            new_debouncer(debounce, move |result: DebounceEventResult| match result {
                Ok(events) if events.iter().any(|e| e.path == handler.path) => handler.reload(),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "tripline-config: file watch error"),
            })?;
        debouncer
            .watcher()
            .watch(&dir, RecursiveMode::NonRecursive)?;
        Ok(FileSource {
            _debouncer: debouncer,
            path,
        })
    }

    /// The watched file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

struct FileReader {
    path: PathBuf,
    applier: Applier,
    /// The last content seen, applied or refused: unchanged bytes are not
    /// judged twice.
    last_hash: Mutex<Option<u64>>,
}

impl FileReader {
    fn reload(&self) {
        let bytes = match read_limited(&self.path) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e,
                    "tripline-config: config file unreadable, last good config kept");
                return;
            }
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            // Not hashed: if the write that follows restores the content in
            // force, it is rightly skipped as already applied.
            tracing::warn!(path = %self.path.display(),
                "tripline-config: config file is empty (mid-write?), last good config kept");
            return;
        }
        let hash = fnv1a(&bytes);
        {
            let mut last = self
                .last_hash
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *last == Some(hash) {
                return;
            }
            *last = Some(hash);
        }
        let origin = Origin::new("file", Some(format!("{hash:016x}")));
        // Refusals are audited and counted by the applier; the log line
        // here adds which file to fix.
        if let Err(e) = self.applier.apply(&bytes, origin) {
            tracing::warn!(path = %self.path.display(), error = %e,
                "tripline-config: config file refused, last good config kept");
        }
    }
}

/// Reads at most one byte past the limit: enough for the document parser
/// to refuse an oversize file without reading all of it.
fn read_limited(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_DOCUMENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}
