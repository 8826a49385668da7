//! Which kind of tripline file a text is — breaker config, proxy config or
//! fault scenario — judged by its top-level keys, so a command handed the
//! wrong kind says which command reads it instead of `unknown field`.

/// Top-level keys only a scenario has.
const SCENARIO_KEYS: [&str; 4] = ["traffic", "fault", "breaker", "seed"];

/// Top-level keys of a breaker config that a scenario never has at the top.
const BREAKER_KEYS: [&str; 8] = [
    "failure_rate_threshold",
    "slow_call_rate_threshold",
    "slow_call_duration",
    "minimum_calls",
    "window",
    "open_duration",
    "half_open",
    "max_half_open_duration",
];

fn top_level_keys(text: &str) -> Vec<String> {
    toml::from_str::<toml::Table>(text)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

/// Whether `text` (TOML) reads as a fault scenario.
pub(crate) fn looks_like_scenario(text: &str) -> bool {
    top_level_keys(text)
        .iter()
        .any(|k| SCENARIO_KEYS.contains(&k.as_str()))
}

/// The top-level keys of a fleet config document.
pub(crate) const DOCUMENT_KEYS: [&str; 6] = [
    "breaker", "override", "profile", "rollout", "author", "comment",
];

/// Whether `text` (TOML) reads as a fleet config document: `[[breaker]]`
/// tables and nothing at its top level but a document's keys. A scenario
/// has `[[breaker]]` tables too, but never without its `[traffic]`.
pub(crate) fn looks_like_document(text: &str) -> bool {
    let keys = top_level_keys(text);
    keys.iter().any(|k| k == "breaker") && keys.iter().all(|k| DOCUMENT_KEYS.contains(&k.as_str()))
}

/// Whether `text` (TOML) reads as a breaker config rather than a scenario.
pub(crate) fn looks_like_breaker_config(text: &str) -> bool {
    let keys = top_level_keys(text);
    !keys.iter().any(|k| SCENARIO_KEYS.contains(&k.as_str()))
        && keys.iter().any(|k| BREAKER_KEYS.contains(&k.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_and_breaker_configs_are_told_apart_by_their_top_level_keys() {
        let scenario = "duration = \"60s\"\n[traffic]\nrate = 1.0\n[[breaker]]\nname = \"b\"\n";
        let breaker = "name = \"b\"\nminimum_calls = 5\nfailure_rate_threshold = 0.5\n";
        assert!(looks_like_scenario(scenario) && !looks_like_breaker_config(scenario));
        assert!(looks_like_breaker_config(breaker) && !looks_like_scenario(breaker));
        assert!(!looks_like_scenario("not toml [") && !looks_like_breaker_config("not toml ["));
        let document = "author = \"ops\"\n[[breaker]]\nname = \"b\"\nminimum_calls = 5\n";
        assert!(looks_like_document(document) && !looks_like_document(scenario));
        assert!(!looks_like_document(breaker));
    }
}
