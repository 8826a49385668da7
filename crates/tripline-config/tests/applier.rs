//! The applier: documents accepted or refused whole, state kept, audit,
//! rollback, overrides and metrics.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/common.rs"]
mod common;

use std::sync::{Arc, Mutex};

use common::doc;
use prometheus_client::registry::Registry;
use tripline::{ManualClock, State};
use tripline_config::{
    Applier, ApplyError, AuditAction, ConfigMetrics, DocumentError, MAX_DOCUMENT_BYTES, Origin,
};

fn file() -> Origin {
    Origin::new("file", None)
}

fn trip(applier: &Applier, name: &str) {
    let breaker = applier.breaker(name).unwrap();
    for _ in 0..4 {
        let _ = breaker.call(|| Err::<(), _>("refused"));
    }
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_valid_document_reconfigures_live_breakers_keeping_their_state() {
    let applier = Applier::builder().clock(ManualClock::new()).build();
    applier
        .apply(doc("", "payments", 4, 0.5).as_bytes(), file())
        .unwrap();
    trip(&applier, "payments");
    let breaker = applier.breaker("payments").unwrap();
    let before = breaker.metrics();

    let record = applier
        .apply(doc("", "payments", 8, 0.6).as_bytes(), file())
        .unwrap();

    assert_eq!(record.version, 2);
    assert_eq!(applier.version(), 2);
    assert_eq!(breaker.config().minimum_calls, 8);
    assert_eq!(breaker.state(), State::Open, "state survives the change");
    assert_eq!(breaker.metrics().calls.failed, before.calls.failed);
    assert_eq!(breaker.metrics().generation, before.generation);
}

#[test]
fn an_invalid_document_changes_nothing_and_is_reported_everywhere() {
    let metrics = ConfigMetrics::default();
    let applier = Applier::builder().metrics(metrics.clone()).build();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    applier.subscribe(move |record| sink.lock().unwrap().push(record.action.clone()));
    applier
        .apply(
            format!("{}{}", doc("", "a", 4, 0.5), common::breaker("b", 4, 0.5)).as_bytes(),
            file(),
        )
        .unwrap();

    // `a` is fine, `b` is not: neither changes.
    let bad = format!("{}{}", doc("", "a", 9, 0.5), common::breaker("b", 4, 1.5));
    let err = applier.apply(bad.as_bytes(), file()).unwrap_err();

    let ApplyError::Document(DocumentError::Invalid { breaker, field, .. }) = &err else {
        panic!("unexpected error {err:?}");
    };
    assert_eq!(
        (breaker.as_str(), field.as_str()),
        ("b", "failure_rate_threshold")
    );
    assert!(err.to_string().contains("(0, 1]"), "{err}");
    assert_eq!(applier.breaker("a").unwrap().config().minimum_calls, 4);
    assert_eq!(applier.version(), 1);
    assert_eq!(metrics.rejected_count("file"), 1);
    assert_eq!(metrics.applied_count("file"), 1);
    assert!(
        applier
            .status()
            .last_error
            .unwrap()
            .contains("failure_rate_threshold")
    );
    let actions = seen.lock().unwrap().clone();
    assert!(matches!(
        actions.as_slice(),
        [AuditAction::Applied, AuditAction::Rejected { .. }]
    ));
}

#[test]
fn oversize_non_utf8_and_typoed_documents_are_refused() {
    let applier = Applier::builder().build();
    applier
        .apply(doc("", "a", 4, 0.5).as_bytes(), file())
        .unwrap();

    let junk = vec![b'#'; 10 * 1024 * 1024];
    let err = applier.apply(&junk, file()).unwrap_err();
    assert_eq!(
        err,
        ApplyError::Document(DocumentError::TooLarge {
            len: junk.len(),
            limit: MAX_DOCUMENT_BYTES
        })
    );

    let mut latin1 = doc("", "a", 5, 0.5).into_bytes();
    latin1.extend_from_slice(b"# caf\xe9\n");
    assert!(matches!(
        applier.apply(&latin1, file()),
        Err(ApplyError::Document(DocumentError::NotUtf8 { .. }))
    ));

    let typo = doc("", "a", 5, 0.5).replace("minimum_calls", "minimum_cals");
    let err = applier
        .apply(typo.as_bytes(), file())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("minimum_cals") && err.contains("line"),
        "{err}"
    );

    assert_eq!(applier.breaker("a").unwrap().config().minimum_calls, 4);
    assert_eq!(applier.version(), 1);
}

#[test]
fn the_audit_record_says_who_changed_which_field_from_what_to_what() {
    let applier = Applier::builder().build();
    applier
        .apply(doc("", "payments", 4, 0.5).as_bytes(), file())
        .unwrap();
    let header = "author = \"ops@example.com\"\ncomment = \"stricter for the sale\"";
    let record = applier
        .apply(
            doc(header, "payments", 1, 0.3).as_bytes(),
            Origin::new("etcd", Some("42".into())),
        )
        .unwrap();

    assert_eq!(record.author.as_deref(), Some("ops@example.com"));
    assert_eq!(record.comment.as_deref(), Some("stricter for the sale"));
    assert_eq!(record.revision.as_deref(), Some("42"));
    let changes: Vec<_> = record
        .changes
        .iter()
        .map(|c| {
            (
                c.breaker.as_str(),
                c.field.as_str(),
                c.old.as_deref(),
                c.new.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            (
                "payments",
                "failure_rate_threshold",
                Some("0.5"),
                Some("0.3")
            ),
            ("payments", "minimum_calls", Some("4"), Some("1")),
        ]
    );
    // Two probes to close but one call enough to trip: valid, but warned.
    let warned: Vec<_> = record
        .warnings
        .iter()
        .map(|w| (w.breaker.as_str(), w.field.as_str()))
        .collect();
    assert!(
        warned.contains(&("payments", "half_open")),
        "{:?}",
        record.warnings
    );
    assert_eq!(applier.audit().len(), 2);
}

#[test]
fn the_audit_log_is_bounded_and_mirrored_to_a_json_lines_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let applier = Applier::builder()
        .audit_capacity(3)
        .audit_file(&path)
        .unwrap()
        .build();
    for min in 1..=5 {
        applier
            .apply(doc("", "a", min, 0.5).as_bytes(), file())
            .unwrap();
    }
    let versions: Vec<u64> = applier.audit().iter().map(|r| r.version).collect();
    assert_eq!(versions, [3, 4, 5]);
    let lines = std::fs::read_to_string(&path).unwrap();
    assert_eq!(lines.lines().count(), 5);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["action"]["kind"], "applied");
    assert_eq!(applier.rollback(1), Err(ApplyError::UnknownVersion(1)));
}

#[test]
fn rollback_reapplies_an_earlier_version_as_a_new_one() {
    let applier = Applier::builder().build();
    applier
        .apply(doc("", "a", 4, 0.5).as_bytes(), file())
        .unwrap();
    applier
        .apply(doc("", "a", 7, 0.6).as_bytes(), file())
        .unwrap();
    let record = applier.rollback(1).unwrap();
    assert_eq!(record.action, AuditAction::RolledBack { to: 1 });
    assert_eq!(record.version, 3);
    let config = applier.breaker("a").unwrap().config();
    assert_eq!(
        (config.minimum_calls, config.failure_rate_threshold),
        (4, 0.5)
    );
    assert_eq!(record.changes.len(), 2);
}

#[test]
fn an_operator_override_outlives_pushed_configs_until_cleared() {
    let applier = Applier::builder().build();
    applier
        .apply(doc("", "a", 4, 0.5).as_bytes(), file())
        .unwrap();
    applier.force_open("a").unwrap();
    applier
        .apply(doc("", "a", 6, 0.5).as_bytes(), file())
        .unwrap();
    applier.rollback(1).unwrap();
    let breaker = applier.breaker("a").unwrap();
    assert_eq!(breaker.state(), State::ForcedOpen);
    assert_eq!(applier.overrides(), ["a"]);
    assert!(breaker.call(|| Ok::<_, ()>(())).is_err());

    applier.clear_override("a").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert!(applier.overrides().is_empty());
    assert_eq!(
        applier.force_open("nope"),
        Err(ApplyError::UnknownBreaker("nope".into()))
    );
}

#[test]
fn the_metrics_are_exposed_beside_the_exporters_in_one_registry() {
    let metrics = ConfigMetrics::default();
    let exporter = tripline_prometheus::Exporter::default();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exporter.clone()));
    metrics.register(&mut registry);
    let applier = Applier::builder().metrics(metrics).build();
    applier
        .apply(doc("", "a", 4, 0.5).as_bytes(), Origin::new("etcd", None))
        .unwrap();
    let breaker = applier.breaker("a").unwrap();
    exporter
        .register_breaker(&breaker, tripline_prometheus::Detail::Essential)
        .unwrap();
    let _ = applier.apply(b"[[breaker]]\nname = \"\"\n", Origin::new("etcd", None));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("tripline_config_applied_total{source=\"etcd\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("tripline_config_rejected_total{source=\"etcd\"} 1"),
        "{text}"
    );
    assert!(text.contains("tripline_config_version 1"), "{text}");
    // Beside the breakers' own series, in one exposition.
    assert!(
        text.contains("tripline_breaker_state_code{name=\"a\"} 0"),
        "{text}"
    );
}
