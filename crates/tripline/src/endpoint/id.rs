//! An endpoint's name.

use std::borrow::Borrow;
use std::fmt;

use crate::sync::Arc;

/// An endpoint's identity within its cluster (an instance id, `host:port`…).
///
/// ```
/// use tripline::cluster::EndpointId;
/// let id = EndpointId::from("orders-1");
/// assert_eq!(id.as_str(), "orders-1");
/// assert_eq!(id.to_string(), "orders-1");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(Arc<str>);

impl EndpointId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for EndpointId {
    fn from(s: &str) -> Self {
        EndpointId(Arc::from(s))
    }
}

impl From<String> for EndpointId {
    fn from(s: String) -> Self {
        EndpointId(Arc::from(s))
    }
}

impl Borrow<str> for EndpointId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}
