//! The admin token: `[admin] token` (or `token_file`), required as
//! `Authorization: Bearer <token>` on every mutating call (POST, PUT,
//! DELETE). Reads stay open, so a dashboard or a scrape needs no secret.
//!
//! Without a token the listener must be on loopback (validation refuses a
//! config that binds it elsewhere): whoever reaches a loopback port is on
//! the machine already.

use http::{HeaderMap, Method, StatusCode, header};

use super::respond::{AdminBody, error};
use crate::config::{AdminSection, ConfigError};

/// The token mutating calls must carry, if one is configured.
#[derive(Clone, Default)]
pub(crate) struct AdminToken(Option<String>);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.write_str(if self.0.is_some() {
            "AdminToken(set)"
        } else {
            "AdminToken(none)"
        })
    }
}

impl AdminToken {
    /// The token `section` configures, reading `token_file` now (at
    /// start): an unreadable or empty file is an error naming the field.
    pub(crate) fn load(section: Option<&AdminSection>) -> Result<AdminToken, ConfigError> {
        let Some(section) = section else {
            return Ok(AdminToken(None));
        };
        if let Some(token) = &section.token {
            return Ok(AdminToken(Some(token.clone())));
        }
        let Some(path) = &section.token_file else {
            return Ok(AdminToken(None));
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::invalid(
                "admin.token_file",
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(ConfigError::invalid(
                "admin.token_file",
                format!("{} holds no token", path.display()),
            ));
        }
        Ok(AdminToken(Some(token.to_owned())))
    }

    /// Whether a token is configured.
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// `None` when the call may go ahead, else the 401 to send.
    pub(crate) fn check(
        &self,
        method: &Method,
        headers: &HeaderMap,
    ) -> Option<http::Response<AdminBody>> {
        let expected = self.0.as_deref()?;
        if !super::browser::is_mutating(method) {
            return None;
        }
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_credentials);
        if given.is_some_and(|g| constant_time_eq(g.as_bytes(), expected.as_bytes())) {
            return None;
        }
        let message = if given.is_some() {
            "wrong admin token"
        } else {
            "this call changes the proxy: send Authorization: Bearer <admin.token>"
        };
        let mut r = error(StatusCode::UNAUTHORIZED, message, &[]);
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"tripline-admin\""),
        );
        Some(r)
    }
}

/// The credentials of a `Bearer` authorization value. The scheme is
/// matched without regard to case (`bearer`, `BEARER`: RFC 9110 §11.1),
/// and any run of spaces may separate it from the token.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim_start_matches(' '))
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell an attacker how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
