//! The leaf of the proxy: HTTP pieces every other layer uses and that use
//! nothing of the proxy's own — body wrappers, header handling, gRPC
//! status, the refusal vocabulary and its responses, and the HTTP/1 head
//! spans and socket wrappers the server and the upstream client share.

pub mod body;
pub(crate) mod coarse_timer;
pub(crate) mod drain;
pub(crate) mod grpc;
pub(crate) mod h1_spans;
pub(crate) mod headers;
pub(crate) mod io_wrap;
pub(crate) mod method;
pub mod rejection;
