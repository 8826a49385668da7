//! The words the cluster and the outlier detector share about one
//! endpoint: its name ([`EndpointId`]) and what one call on it came to
//! ([`EndpointOutcome`], and the classifier that decides it).
//!
//! They sit below both modules so that neither imports the other for them:
//! the cluster routes and records outcomes, the detector counts outcomes
//! per host and names hosts in its events. Their public paths are
//! `tripline::cluster::{EndpointId, EndpointOutcome, …}`, re-exported there.

mod id;
mod outcome;

pub use id::EndpointId;
pub use outcome::{DefaultEndpointClassifier, EndpointClassifier, EndpointOutcome};
