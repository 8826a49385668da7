//! The kinds of instance a fleet has: instances whose breakers started
//! from the same configs (the same proxy file) are one kind, and a pushed
//! table — which patches those configs — changes them alike. Each live
//! instance names its kind in its status key; the configs are under
//! `<prefix>/kinds/<kind>`. `push` refuses a document some live kind would
//! refuse, and `push --dry-run` shows the effective change per kind.

use std::collections::BTreeMap;

use tripline::CircuitBreakerConfig;
use tripline_config::etcd::{Gateway, fleet_status, kind_bases};
use tripline_config::{Document, FieldChange, diff_configs};

use crate::CliError;

/// One kind of live instance.
pub(super) struct Kind {
    pub(super) kind: String,
    pub(super) instances: Vec<String>,
    /// Its breakers' own configs; `None` if no instance wrote them.
    pub(super) bases: Option<BTreeMap<String, CircuitBreakerConfig>>,
}

impl Kind {
    /// `3f2a… (edge-1, edge-2)`.
    pub(super) fn label(&self) -> String {
        format!("kind {} ({})", self.kind, self.instances.join(", "))
    }

    fn base(&self, name: &str) -> CircuitBreakerConfig {
        self.bases
            .as_ref()
            .and_then(|b| b.get(name).cloned())
            .unwrap_or_else(|| CircuitBreakerConfig {
                name: name.to_owned(),
                ..Default::default()
            })
    }

    /// What `new` changes on this kind against `current`, or the refusal.
    pub(super) fn changes(
        &self,
        current: Option<&Document>,
        new: &Document,
    ) -> Result<Vec<FieldChange>, String> {
        let mut changes = Vec::new();
        for table in &new.breakers {
            let base = self.base(&table.name);
            let before = current
                .and_then(|d| d.breaker(&table.name))
                .and_then(|t| t.apply_to(&base).ok())
                .unwrap_or_else(|| base.clone());
            let (after, _) = table.resolve(&base).map_err(|e| e.to_string())?;
            changes.extend(diff_configs(&table.name, Some(&before), &after));
        }
        Ok(changes)
    }
}

/// The live instances' kinds, largest first.
pub(super) async fn live(gateway: &Gateway, prefix: &str) -> Result<Vec<Kind>, CliError> {
    let fleet = fleet_status(gateway, prefix)
        .await
        .map_err(|e| CliError::other(e.to_string()))?;
    let mut by_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for status in fleet {
        if let Some(kind) = status.kind {
            by_kind.entry(kind).or_default().push(status.instance);
        }
    }
    let mut kinds = Vec::new();
    for (kind, instances) in by_kind {
        let bases = kind_bases(gateway, prefix, &kind)
            .await
            .map_err(|e| CliError::other(e.to_string()))?;
        kinds.push(Kind {
            kind,
            instances,
            bases,
        });
    }
    kinds.sort_by_key(|k| std::cmp::Reverse(k.instances.len()));
    Ok(kinds)
}

/// Refuses `doc` if a live kind would: every instance refuses a document
/// whole, so one kind's refusal is a fleet split in two.
pub(super) fn refused_by_any(kinds: &[Kind], doc: &Document) -> Result<(), CliError> {
    for kind in kinds {
        if let Err(e) = kind.changes(None, doc) {
            return Err(CliError::input(format!(
                "{} would refuse it: {e}; nothing written",
                kind.label()
            )));
        }
    }
    Ok(())
}
