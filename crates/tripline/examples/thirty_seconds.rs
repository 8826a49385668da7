//! The README's "A breaker in thirty seconds", as a program that compiles
//! and runs: `cargo run -p tripline --example thirty_seconds`.
//!
//! The lines between the `README` markers are the README's snippet,
//! verbatim (a test keeps the two equal); around them are the stand-ins
//! for a real service's calls.

use std::time::Duration;

use tripline::{CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Outcome, WindowConfig};

#[derive(Debug)]
struct Receipt;

#[derive(Debug)]
enum PayError {
    Declined,
    #[allow(dead_code)] // what a real payment service also answers
    Unavailable,
}

fn fetch_balance(_user: &str) -> Result<u64, std::io::Error> {
    Ok(42)
}

fn charge_card(_user: &str, _cents: u64) -> Result<Receipt, PayError> {
    Err(PayError::Declined)
}

struct Client;

impl Client {
    async fn get_profile(&self, user: &str) -> Result<String, std::io::Error> {
        Ok(format!("profile of {user}"))
    }
}

fn main() -> Result<(), tripline::ConfigError> {
    let client = Client;
    futures_executor::block_on(async {
        // README begin
        let breaker = CircuitBreaker::try_new(CircuitBreakerConfig {
            name: "payments".into(),
            // The last 10 s in 1 s buckets; at least 20 calls before rates count.
            window: WindowConfig::Time {
                length: Duration::from_secs(10),
                buckets: 10,
            },
            minimum_calls: 20,
            failure_rate_threshold: 0.5, // trip at 50% failures...
            slow_call_duration: Some(Duration::from_millis(800)),
            slow_call_rate_threshold: 0.8, // ...or 80% slow calls
            half_open: HalfOpenPolicy::Permits {
                calls: 5,
                failure_rate_threshold: 0.2,
            },
            ..Default::default()
        })?;

        // Every decision explains itself: subscribe before the calls.
        // "payments: closed → open (failure rate 62% ≥ 50% over 20 calls; open for 5.0s)"
        let _sub = breaker.subscribe(|event| println!("{event}"));

        // Closures: Err is a failure, Ok a success.
        let balance = breaker.call(|| fetch_balance("alice"));

        // Or classify the whole result: a declined card is not the dependency's fault.
        let charge = breaker.call_with(
            &|r: &Result<Receipt, PayError>| match r {
                Ok(_) => Outcome::Success,
                Err(PayError::Declined) => Outcome::Ignored,
                Err(_) => Outcome::Failure,
            },
            || charge_card("alice", 42),
        );

        // Async, on any runtime: dropping the future counts as a neutral cancellation.
        let profile = breaker.call_async(client.get_profile("alice")).await;

        // Or by hand: a permit is an RAII guard; dropping it unrecorded frees its
        // half-open slot, so no probe can leak.
        match breaker.try_acquire() {
            Ok(permit) => permit.record(Outcome::Success, Duration::from_millis(12)),
            Err(rejected) => eprintln!("{rejected}"), // "call rejected: circuit breaker is open (retry after 4.2s)"
        }
        // README end
        println!("{balance:?} {charge:?} {profile:?}");
        Ok(())
    })
}
