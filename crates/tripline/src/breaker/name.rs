//! A breaker's name, stored inline when short.
//!
//! Keyed breakers are named `"<family>:<key>"`, usually well under 23
//! bytes. Kept inline, such a name costs the breaker 24 bytes and no
//! allocation; as an `Arc<str>` it cost 16 bytes plus a 32–48-byte heap
//! block, ~40 bytes a breaker more at a million keyed breakers. Longer
//! names are shared as before. Events carry the name as an `Arc<str>`,
//! made when an event is built (only when somebody listens).

use crate::sync::Arc;

/// Bytes a name may have to be kept inline: what fits beside its length
/// in the 24 bytes of the shared form's pointer, length and tag.
const INLINE: usize = 22;

/// A breaker's name.
#[derive(Clone)]
pub(crate) enum Name {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<str>),
}

impl Name {
    pub(crate) fn new(name: &str) -> Self {
        let len = name.len();
        if len <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..len].copy_from_slice(name.as_bytes());
            Name::Inline {
                len: len as u8,
                bytes,
            }
        } else {
            Name::Shared(Arc::from(name))
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // The bytes were copied from a `&str` and cut at its length: a
            // character boundary, so they are valid UTF-8.
            Name::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Name::Shared(s) => s,
        }
    }

    /// The name as an `Arc<str>`, for an event.
    pub(crate) fn to_arc(&self) -> Arc<str> {
        match self {
            Name::Inline { .. } => Arc::from(self.as_str()),
            Name::Shared(s) => s.clone(),
        }
    }

    /// Heap bytes the name owns.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Name::Inline { .. } => 0,
            Name::Shared(s) => 16 + s.len(),
        }
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_inline_and_long_ones_shared() {
        assert_eq!(std::mem::size_of::<Name>(), 24);
        for name in ["", "rpc:42", "é-ü:ключ", "exactly-twenty-two-by!"] {
            let n = Name::new(name);
            assert!(matches!(n, Name::Inline { .. }), "{name}");
            assert_eq!(n.as_str(), name);
            assert_eq!(&*n.to_arc(), name);
            assert_eq!(n.heap_bytes(), 0);
        }
        let long = "payments:tenant-0000042:charge";
        let n = Name::new(long);
        assert!(matches!(n, Name::Shared(_)));
        assert_eq!(n.as_str(), long);
        assert_eq!(n.heap_bytes(), 16 + long.len());
        assert_eq!(format!("{n:?}"), format!("{long:?}"));
    }
}
