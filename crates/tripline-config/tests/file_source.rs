//! The file source against the real file system: a write to the watched
//! file is applied; an invalid one keeps the last good config.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/common.rs"]
mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::doc;
use tripline_config::{Applier, AuditAction, AuditRecord, FileSource};

const WAIT: Duration = Duration::from_secs(10);

fn next(records: &mpsc::Receiver<AuditRecord>) -> AuditRecord {
    records
        .recv_timeout(WAIT)
        .expect("no audit record within 10 s")
}

#[test]
fn writes_to_the_watched_file_are_applied_and_bad_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breakers.toml");
    std::fs::write(&path, doc("", "payments", 4, 0.5)).unwrap();

    let applier = Applier::builder().instance_id("web-1").build();
    let (tx, records) = mpsc::channel();
    applier.subscribe(move |r| {
        let _ = tx.send(r.clone());
    });
    let source = FileSource::watch(&path, applier.clone(), Duration::from_millis(50)).unwrap();
    assert_eq!(source.path(), path);
    assert_eq!(next(&records).action, AuditAction::Applied);
    let breaker = applier.breaker("payments").unwrap();
    assert_eq!(breaker.config().minimum_calls, 4);

    // An edit in place.
    std::fs::write(&path, doc("", "payments", 8, 0.5)).unwrap();
    let record = next(&records);
    assert_eq!(record.action, AuditAction::Applied);
    assert_eq!(record.source, "file");
    assert_eq!(breaker.config().minimum_calls, 8);

    // A broken edit: refused, the last good config stays.
    std::fs::write(&path, doc("", "payments", 0, 0.5)).unwrap();
    let record = next(&records);
    assert!(
        matches!(&record.action, AuditAction::Rejected { error } if error.contains("minimum_calls")),
        "{record:?}"
    );
    assert_eq!(breaker.config().minimum_calls, 8);

    // Replaced by rename, as editors and config management do.
    let staged = dir.path().join("breakers.toml.new");
    std::fs::write(&staged, doc("", "payments", 12, 0.5)).unwrap();
    std::fs::rename(&staged, &path).unwrap();
    assert_eq!(next(&records).action, AuditAction::Applied);
    assert_eq!(breaker.config().minimum_calls, 12);
    assert_eq!(applier.version(), 3);
}

#[test]
fn an_empty_file_is_a_write_in_progress_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breakers.toml");
    // What a reader sees between an in-place write's truncation and its data.
    std::fs::write(&path, "").unwrap();

    let applier = Applier::builder().instance_id("web-1").build();
    let (tx, records) = mpsc::channel();
    applier.subscribe(move |r| {
        let _ = tx.send(r.clone());
    });
    let _source = FileSource::watch(&path, applier.clone(), Duration::from_millis(50)).unwrap();
    assert_eq!(
        applier.version(),
        0,
        "an empty file is neither applied nor refused"
    );
    assert!(records.try_recv().is_err());

    std::fs::write(&path, doc("", "payments", 4, 0.5)).unwrap();
    let record = next(&records);
    assert_eq!(record.action, AuditAction::Applied);
    assert_eq!(
        applier.breaker("payments").unwrap().config().minimum_calls,
        4
    );
    assert_eq!(applier.version(), 1);
}
