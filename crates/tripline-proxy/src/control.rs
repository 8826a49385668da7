//! The control side: what changes the proxy while it serves — the admin
//! API and dashboard, reloads, pushed breaker parameters and DNS
//! refreshes. Each acts through the table handle: it builds and publishes
//! a new [`Table`](crate::table::Table), or acts on the shared breakers and
//! clusters the table in force carries.

pub(crate) mod admin;
pub(crate) mod config_source;
pub(crate) mod dns;
pub(crate) mod reload;
