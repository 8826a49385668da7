//! Dynamic breaker config for tripline: documents pushed from a file or
//! etcd, validated whole, applied live with the breakers' state kept,
//! audited, rolled back on demand, and rolled out gradually.
//!
//! # Pieces
//!
//! - [`Document`]: the breakers' configs in the library's own vocabulary
//!   (`[[breaker]]` tables of [`tripline::CircuitBreakerConfig`] fields,
//!   each a [`BreakerTable`] that patches the fields it names on top of
//!   the instance's own config), plus an optional [`Rollout`] and
//!   `author`/`comment`.
//! - [`Applier`]: owns named breakers (and `BreakerRegistry` families)
//!   and applies documents — accepted or refused whole, never rule by
//!   rule — with an [`AuditLog`],
//!   [`Applier::rollback`], operator overrides that pushed config never
//!   undoes, and the rollout's shadow → canary → bake steps.
//! - Sources: [`FileSource`] (watched with `notify`, debounced) and
//!   [`EtcdSource`] (a key watched through etcd's v3 JSON gateway, resumed
//!   from the last revision after a disconnect, with a leased status key per
//!   instance).
//! - [`ConfigMetrics`] counts `tripline_config_applied_total{source}`,
//!   `tripline_config_rejected_total{source}`, `tripline_config_version`.
//!
//! # Why etcd's JSON gateway and not `etcd-client`
//!
//! The `etcd-client` crate speaks gRPC: it needs `protoc` at build time
//! and brings tonic and a second HTTP stack. etcd serves the same v3 API as
//! JSON over HTTP (`/v3/kv/range`, `/v3/kv/put`, `/v3/watch`,
//! `/v3/lease/grant`, `/v3/lease/keepalive`; keys and values base64), so
//! this crate talks to it over the hyper 1.x client the workspace already
//! builds: a default build needs nothing beyond Cargo, and the few calls
//! used here are stable across etcd 3.4 and later. The cost is parsing a
//! streamed JSON watch by hand (one object per line), which
//! [`etcd`] does and tests against a real server.

#![forbid(unsafe_code)]

mod applier;
mod audit;
mod diff;
mod document;
mod error;
pub mod etcd;
mod file;
mod fleet_view;
mod metrics;
mod rollout;

pub use applier::MAX_FAMILY_TWINS;
pub use applier::{
    Applier, ApplierBuilder, ApplyError, BreakerSummary, FamilySummary, InstanceStatus,
    ManagedStatus, Origin, OverrideHolder, PushedAt, RolloutPhase,
};
pub use audit::{AuditAction, AuditLog, AuditRecord, FamilyShadow};
pub use diff::{FieldChange, diff_configs, diff_documents};
pub use document::{
    BreakerTable, Document, DocumentError, DocumentWarning, FleetOverride, MAX_DOCUMENT_BYTES,
    OverrideState, Profile, When,
};
pub use etcd::{EtcdOptions, EtcdSource};
pub use fleet_view::{AUTOMATIC, FleetBreaker, FleetState, fleet_view};

pub use file::FileSource;
pub use metrics::ConfigMetrics;
pub use rollout::{Rollout, TrafficSample, canary_bucket};
