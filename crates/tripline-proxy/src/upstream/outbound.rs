//! The request head the upstream client sends: the client's, with this
//! hop's forwarding elements kept beside it.

use std::ops::Deref;

use crate::http::body::ClientUpload;
use crate::http::headers::ForwardedValues;

/// A request's head as it goes upstream: the client's, hop-by-hop headers
/// removed, and this hop's `x-forwarded-for` and `forwarded` elements,
/// which each try writes into its own request. Kept apart, they cost a
/// cleartext HTTP/1.1 try nothing but the bytes: the client's header map
/// is never grown (a reallocation and a rehash per request) to hold them.
pub(crate) struct Outbound {
    pub(crate) parts: http::request::Parts,
    pub(crate) forwarded: ForwardedValues,
    /// How the client's body is arriving (`None` for a request without
    /// one): a try that fails because the body broke, or times out while
    /// it waits for more of the body, is the client's fault, not the
    /// endpoint's.
    pub(crate) client_body: Option<ClientUpload>,
    /// The client asks to switch protocols, and the route allows it: the
    /// request carries `Upgrade` and `Connection: upgrade` upstream, goes
    /// on an HTTP/1.1 connection the endpoint may take over with `101`,
    /// and is never hedged.
    pub(crate) upgrade: bool,
}

impl Deref for Outbound {
    type Target = http::request::Parts;

    fn deref(&self) -> &http::request::Parts {
        &self.parts
    }
}
