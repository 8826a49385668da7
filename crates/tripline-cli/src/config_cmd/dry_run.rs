//! `tripline config push --dry-run`: what a document would change, before
//! anything is written.
//!
//! A pushed table patches (it changes the fields it names on top of each
//! instance's own config), so what a push changes depends on the kind of
//! instance. Three views are printed: the table fields that change for
//! every instance, where "own" stands for the instance's own value (its
//! file's); the effective change on each kind of live instance (see
//! [`super::kinds`]); and the effective change on an instance that has no
//! config of its own (an applier that builds the breaker on the library's
//! defaults).

use tripline_config::{Document, FieldChange, diff_configs, diff_documents};

use super::kinds::Kind;

/// The report's lines; `current` is the document in etcd now, if any.
pub(super) fn report(current: Option<&Document>, new: &Document, kinds: &[Kind]) -> Vec<String> {
    let mut lines = Vec::new();
    let fields = diff_documents(current, new);
    lines.push(
        "on every instance (own: the instance's own value, which the document leaves alone):"
            .into(),
    );
    push_changes(&mut lines, &fields, "own");
    for kind in kinds {
        let count = kind.instances.len();
        lines.push(format!("on {} — {count} instance(s):", kind.label()));
        if kind.bases.is_none() {
            lines.push(
                "  (its own configs are not in etcd: shown on the library's defaults)".into(),
            );
        }
        match kind.changes(current, new) {
            Ok(changes) => push_changes(&mut lines, &changes, "unset"),
            Err(e) => lines.push(format!("  would refuse the document: {e}")),
        }
    }
    lines.push("on an instance without a config of its own (the library's defaults):".into());
    let mut effective = Vec::new();
    for table in &new.breakers {
        let base = table.default_base();
        let before = current
            .and_then(|d| d.breaker(&table.name))
            .and_then(|t| t.apply_to(&base).ok());
        let Ok(after) = table.apply_to(&base) else {
            continue;
        };
        // A breaker the current document does not name runs on defaults
        // there, if it runs at all.
        let before = before.unwrap_or(base);
        effective.extend(diff_configs(&table.name, Some(&before), &after));
    }
    push_changes(&mut lines, &effective, "unset");
    lines
}

fn push_changes(lines: &mut Vec<String>, changes: &[FieldChange], missing: &str) {
    if changes.is_empty() {
        lines.push("  no change".into());
    }
    for c in changes {
        lines.push(format!(
            "  {}.{}: {} → {}",
            c.breaker,
            c.field,
            c.old.as_deref().unwrap_or(missing),
            c.new.as_deref().unwrap_or(missing)
        ));
    }
}
