//! Which failed tries a route retries (`retry.retry_on`), with Envoy's
//! condition names, parsed once at load into a bit set so the request path
//! decides with a mask test.
//!
//! Without `retry_on` a route retries what it did before the conditions
//! existed: every try its endpoint counts as failed (a connection that
//! failed, broke or timed out, and the route's failure statuses, 5xx by
//! default). A route that lists conditions retries exactly those.

use std::fmt::Write as _;

/// The condition names `retry_on` accepts, in the order the docs list them.
pub const RETRY_ON_CONDITIONS: [&str; 12] = [
    "connect-failure",
    "reset",
    "refused-stream",
    "5xx",
    "gateway-error",
    "retriable-4xx",
    "retriable-status-codes",
    "grpc:cancelled",
    "grpc:deadline-exceeded",
    "grpc:resource-exhausted",
    "grpc:unavailable",
    "grpc:internal",
];

/// The gRPC status code each `grpc:` condition retries, by its index in
/// [`RETRY_ON_CONDITIONS`] less 7.
const GRPC_CODES: [u8; 5] = [1, 4, 8, 14, 13];

// The bits of the conditions, by their index in [`RETRY_ON_CONDITIONS`].
const CONNECT_FAILURE: u16 = 1;
const RESET: u16 = 1 << 1;
const REFUSED_STREAM: u16 = 1 << 2;
const FIVE_XX: u16 = 1 << 3;
const GATEWAY_ERROR: u16 = 1 << 4;
const RETRIABLE_4XX: u16 = 1 << 5;
const RETRIABLE_STATUS_CODES: u16 = 1 << 6;

/// A failed try, as much of it as the conditions look at.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TryEnd {
    /// The endpoint could not be connected to.
    ConnectFailure,
    /// The endpoint refused the stream before reading the request.
    RefusedStream,
    /// The connection broke, or the try timed out, before a whole answer.
    Reset,
    /// The endpoint answered with `status` (and `grpc-status` in the head,
    /// for a trailers-only gRPC answer).
    Answered { status: u16, grpc: Option<u8> },
}

/// The parsed `retry_on`: a bit per condition and the retriable statuses.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RetryOn {
    bits: u16,
    statuses: Box<[u16]>,
}

impl RetryOn {
    /// Parses the condition names; an unknown one is an error listing the
    /// known ones.
    pub(crate) fn parse(names: &[String], statuses: &[u16]) -> Result<RetryOn, String> {
        let mut bits = 0u16;
        for name in names {
            let Some(i) = RETRY_ON_CONDITIONS.iter().position(|c| c == name) else {
                let mut known = String::new();
                for c in RETRY_ON_CONDITIONS {
                    let _ = write!(known, "{}{c}", if known.is_empty() { "" } else { ", " });
                }
                return Err(format!("unknown condition {name:?}; known: {known}"));
            };
            bits |= 1 << i;
        }
        Ok(RetryOn {
            bits,
            statuses: statuses.into(),
        })
    }

    fn has(&self, bit: u16) -> bool {
        self.bits & bit != 0
    }

    /// Whether a try that ended as `end` is retried.
    pub(crate) fn retries(&self, end: TryEnd) -> bool {
        let any_5xx = self.has(FIVE_XX) || self.has(GATEWAY_ERROR);
        match end {
            TryEnd::ConnectFailure => self.has(CONNECT_FAILURE) || self.has(RESET) || any_5xx,
            TryEnd::RefusedStream => self.has(REFUSED_STREAM) || self.has(RESET) || any_5xx,
            TryEnd::Reset => self.has(RESET) || any_5xx,
            TryEnd::Answered { status, grpc } => {
                (self.has(FIVE_XX) && status >= 500)
                    || (self.has(GATEWAY_ERROR) && (502..=504).contains(&status))
                    || (self.has(RETRIABLE_4XX) && status == 409)
                    || (self.has(RETRIABLE_STATUS_CODES) && self.statuses.contains(&status))
                    || grpc.is_some_and(|code| {
                        GRPC_CODES
                            .iter()
                            .enumerate()
                            .any(|(i, c)| *c == code && self.has(1 << (7 + i)))
                    })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(names: &[&str]) -> RetryOn {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        RetryOn::parse(&names, &[418]).expect("known conditions")
    }

    fn status(status: u16) -> TryEnd {
        TryEnd::Answered { status, grpc: None }
    }

    #[test]
    fn each_condition_retries_what_envoy_retries() {
        assert!(on(&["5xx"]).retries(status(500)) && on(&["5xx"]).retries(TryEnd::Reset));
        assert!(!on(&["gateway-error"]).retries(status(500)));
        assert!(on(&["gateway-error"]).retries(status(503)));
        assert!(on(&["retriable-4xx"]).retries(status(409)));
        assert!(!on(&["retriable-4xx"]).retries(status(404)));
        assert!(on(&["retriable-status-codes"]).retries(status(418)));
        assert!(!on(&["connect-failure"]).retries(TryEnd::Reset));
        assert!(on(&["connect-failure"]).retries(TryEnd::ConnectFailure));
        let unavailable = TryEnd::Answered {
            status: 200,
            grpc: Some(14),
        };
        assert!(on(&["grpc:unavailable"]).retries(unavailable));
        assert!(!on(&["grpc:resource-exhausted"]).retries(unavailable));
        assert!(!on(&["connect-failure"]).retries(status(503)));
    }

    #[test]
    fn an_unknown_condition_names_the_known_ones() {
        let e = RetryOn::parse(&["5xxx".to_string()], &[]).unwrap_err();
        assert!(
            e.starts_with("unknown condition \"5xxx\"; known: connect-failure, reset"),
            "{e}"
        );
    }
}
