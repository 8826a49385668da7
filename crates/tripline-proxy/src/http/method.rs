//! What a request method promises about repeating it.

use http::Method;

/// Methods whose repetition has the effect of one request (RFC 9110 §9.2.2).
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}
