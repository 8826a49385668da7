//! `tripline config check FILE [--at TIME]`: validates a fleet document as
//! every instance will (no etcd needed) and says which profile holds at
//! `TIME` (default: now), with the parameters it changes, and which fleet
//! overrides are in force then.

use std::path::Path;
use std::time::{Duration, SystemTime};

use tripline_config::{Document, diff_configs};

use crate::CliError;

/// The check's report, or the refusal naming the field.
pub(crate) fn check_document(file: &Path, at: Option<SystemTime>) -> Result<(), CliError> {
    let path = file.display();
    let bytes = std::fs::read(file).map_err(|e| CliError::input(format!("{path}: {e}")))?;
    let (bytes, wrapped) = super::bare_table::as_document(&bytes);
    if wrapped {
        println!("{path}: one breaker table, read as a document with that [[breaker]]");
    }
    let (doc, warnings) = Document::parse_and_validate(&bytes)
        .map_err(|e| CliError::input(format!("{path}: {e}")))?;
    for w in &warnings {
        println!(
            "warning: breaker {:?}: `{}` {}",
            w.breaker, w.field, w.message
        );
    }
    let at = at.unwrap_or_else(|| tripline::clock::system_time_after(Duration::ZERO));
    let when = humantime::format_rfc3339_seconds(at);
    match doc.profile_at(at) {
        Some(profile) => {
            println!("at {when}: profile {:?} holds", profile.name);
            for table in &profile.breakers {
                // Shown on the library's defaults with the document's own
                // table: an instance with a file of its own differs in the
                // fields neither names.
                let base = table.default_base();
                let own = doc
                    .breaker(&table.name)
                    .and_then(|t| t.apply_to(&base).ok());
                let own = own.unwrap_or(base);
                let Ok(held) = table.apply_to(&own) else {
                    continue;
                };
                for c in diff_configs(&table.name, Some(&own), &held) {
                    println!(
                        "  {}.{}: {} → {}",
                        c.breaker,
                        c.field,
                        c.old.as_deref().unwrap_or("unset"),
                        c.new.as_deref().unwrap_or("unset")
                    );
                }
            }
        }
        None if doc.profiles.is_empty() => {
            println!("at {when}: no profile (the document has none)")
        }
        None => println!("at {when}: no profile holds; the document's own tables apply"),
    }
    for o in doc.overrides.iter().filter(|o| o.until > at) {
        println!(
            "at {when}: {} held {} until {}: {}",
            o.breaker,
            o.state.as_str(),
            humantime::format_rfc3339_seconds(o.until),
            o.reason
        );
    }
    println!(
        "{path}: valid config document ({} breaker table(s), {} profile(s), {} override(s))",
        doc.breakers.len(),
        doc.profiles.len(),
        doc.overrides.len()
    );
    Ok(())
}
