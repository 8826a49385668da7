//! The admin section's own rules: the mutating API is never exposed by
//! accident.

use super::{AdminSection, ConfigError};

/// Refuses an admin section that would expose the mutating API: off
/// loopback without a token, an empty token, or both `token` and
/// `token_file`.
pub(crate) fn validate_section(
    section: &AdminSection,
    address: std::net::SocketAddr,
) -> Result<(), ConfigError> {
    if section.token.is_some() && section.token_file.is_some() {
        return Err(ConfigError::invalid(
            "admin.token",
            "set admin.token or admin.token_file, not both",
        ));
    }
    if section
        .token
        .as_deref()
        .is_some_and(|t| t.trim().is_empty())
    {
        return Err(ConfigError::invalid("admin.token", "must not be empty"));
    }
    if !address.ip().is_loopback() && section.token.is_none() && section.token_file.is_none() {
        return Err(ConfigError::invalid(
            "admin.token",
            format!(
                "required when admin.address is not loopback (got {address}): the admin API can force breakers open and replace the config"
            ),
        ));
    }
    Ok(())
}
