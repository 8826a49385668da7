//! Helpers shared by the tests: documents in the library vocabulary.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // shared by several tests; they fail loudly

/// One breaker table: a 10-call window, so tests trip it with a few calls.
pub fn breaker(name: &str, minimum_calls: u32, failure_rate: f64) -> String {
    format!(
        "[[breaker]]\nname = \"{name}\"\nwindow = {{ kind = \"count\", size = 10 }}\n\
         minimum_calls = {minimum_calls}\nfailure_rate_threshold = {failure_rate}\n\
         open_duration = \"30s\"\nhalf_open = {{ policy = \"consecutive\", successes = 2 }}\n"
    )
}

/// A document of one breaker with an optional header (author, rollout…).
pub fn doc(header: &str, name: &str, minimum_calls: u32, failure_rate: f64) -> String {
    format!("{header}\n{}", breaker(name, minimum_calls, failure_rate))
}
