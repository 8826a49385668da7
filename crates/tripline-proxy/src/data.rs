//! The data side: what a request goes through, from the listener to the
//! upstream and back. It reads the [`Table`](crate::table::Table) in
//! force, loaded once per request, and writes to the sinks its context
//! carries (the access log, the counters); it never imports the control
//! side, which changes its behaviour only by publishing a new table.

pub(crate) mod access_log;
pub(crate) mod forward;
pub(crate) mod server;
pub(crate) mod smuggling;
