//! The retry policy's parts: config, backoff, the per-attempt decision and
//! the shared policy state (counters, jitter, budget).
//!
//! They sit below both the [`Pipeline`](crate::pipeline::Pipeline), which
//! runs the retry loop, and the standalone [`Retry`](crate::retry::Retry)
//! facade, which is a pipeline with this one policy. Keeping them apart
//! from the facade is what lets the pipeline use them without importing
//! the module that imports the pipeline. Their public path is
//! [`crate::retry`], which re-exports them.

mod backoff;
mod config;
mod decision;
mod policy;

pub use backoff::RetryBackoff;
pub use config::{RetryConfig, RetryRefusal, RetryStats};
pub use decision::{RetryClassifier, RetryDecision, RetryOnError};
pub(crate) use policy::{Idempotency, RetryPolicy};
