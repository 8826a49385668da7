//! The configs a document gives an applier's breakers: each breaker's
//! base (its owner's config), the document's table laid on it, then the
//! table of the profile holding now — validated as a whole, so a table
//! that does not fit this instance's own config is refused here even when
//! it is valid on the library's defaults.

use tripline::CircuitBreakerConfig;

use super::Core;
use super::Managed;
use super::install::invalid;
use crate::diff::{FieldChange, diff_configs};
use crate::document::{Document, DocumentError, DocumentWarning, Profile, warnings_of};

/// The configs `doc` gives this applier's breakers, each table laid on
/// its breaker's base (the library's defaults for a name not managed
/// yet), validated, with their warnings; or the first field refused.
pub(super) fn resolve(
    core: &Core,
    doc: &Document,
    profile: Option<&Profile>,
) -> Result<(Vec<CircuitBreakerConfig>, Vec<DocumentWarning>), DocumentError> {
    let mut names: Vec<&str> = doc.breakers.iter().map(|t| t.name.as_str()).collect();
    for table in profile.into_iter().flat_map(|p| &p.breakers) {
        if !names.contains(&table.name.as_str()) {
            names.push(&table.name);
        }
    }
    let mut configs = Vec::with_capacity(names.len());
    let mut warnings = Vec::new();
    for name in names {
        let base = core.breakers.get(name).map_or_else(
            || CircuitBreakerConfig {
                name: name.to_owned(),
                ..Default::default()
            },
            |m| m.base.clone(),
        );
        let (config, found) = overlay(base, doc.breaker(name), profile)?;
        warnings.extend(warnings_of(name, found));
        configs.push(config);
    }
    Ok((configs, warnings))
}

/// `base` with the document's `table` laid on it, then the `profile`'s
/// table of the same breaker, validated; an error of the profile's table
/// names the profile.
pub(super) fn overlay(
    base: CircuitBreakerConfig,
    table: Option<&crate::document::BreakerTable>,
    profile: Option<&Profile>,
) -> Result<(CircuitBreakerConfig, Vec<tripline::ConfigWarning>), DocumentError> {
    let name = base.name.clone();
    let mut config = match table {
        Some(t) => t.apply_to(&base)?,
        None => base,
    };
    let extra = profile.and_then(|p| p.breakers.iter().find(|t| t.name == name).map(|t| (p, t)));
    if let Some((p, t)) = extra {
        config = t.resolve(&config).map_err(|e| in_profile(p, &name, e))?.0;
    }
    let found = config.validate().map_err(|e| invalid(&name, e))?;
    Ok((config, found))
}

fn in_profile(p: &Profile, breaker: &str, e: DocumentError) -> DocumentError {
    match e {
        DocumentError::Invalid {
            field, constraint, ..
        } => DocumentError::Profile {
            profile: p.name.clone(),
            field: format!("breaker.{field}"),
            constraint: format!("(breaker {breaker:?}) {constraint}"),
        },
        other => other,
    }
}

/// Old → new for every config of `configs`.
pub(super) fn changes_of(core: &Core, configs: &[CircuitBreakerConfig]) -> Vec<FieldChange> {
    configs
        .iter()
        .flat_map(|new| {
            let old = core.breakers.get(&new.name).map(Managed::config);
            diff_configs(&new.name, old.as_ref(), new)
        })
        .collect()
}
