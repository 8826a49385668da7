//! The text format's template: literal text and `%OPERATOR%`s, parsed
//! once when the config is loaded into a list of pieces, so that writing
//! a line is a walk over that list, never a parse.
//!
//! The syntax is Envoy's command operators' (`%RESPONSE_CODE%`), and the
//! names are Envoy's where Envoy has the same field; `%%` is a literal
//! `%`. A value that is missing is written `-`, as Envoy does. No value
//! holds a space (paths and endpoints cannot), so a line splits on them.

use super::ConfigError;

/// The field a template names.
const FIELD: &str = "access_log.template";

/// A parsed template.
#[derive(Clone, Debug)]
pub(crate) struct Template {
    pieces: Box<[Piece]>,
}

#[derive(Clone, Debug)]
pub(crate) enum Piece {
    Text(Box<str>),
    Operator(Operator),
}

/// The values a line can hold. The README's access-log section lists
/// them with their Envoy counterparts: keep the two in step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operator {
    StartTime,
    Method,
    Path,
    ResponseCode,
    ResponseFlags,
    Duration,
    RouteName,
    UpstreamCluster,
    UpstreamHost,
    AttemptCount,
    Retries,
    Attempts,
    DownstreamRemoteAddress,
    DownstreamPeerSubject,
}

/// Every operator by name, in the order the error for an unknown one
/// lists them.
const OPERATORS: [(&str, Operator); 14] = [
    ("START_TIME", Operator::StartTime),
    ("METHOD", Operator::Method),
    ("PATH", Operator::Path),
    ("RESPONSE_CODE", Operator::ResponseCode),
    ("RESPONSE_FLAGS", Operator::ResponseFlags),
    ("DURATION", Operator::Duration),
    ("ROUTE_NAME", Operator::RouteName),
    ("UPSTREAM_CLUSTER", Operator::UpstreamCluster),
    ("UPSTREAM_HOST", Operator::UpstreamHost),
    ("UPSTREAM_REQUEST_ATTEMPT_COUNT", Operator::AttemptCount),
    ("RETRIES", Operator::Retries),
    ("ATTEMPTS", Operator::Attempts),
    (
        "DOWNSTREAM_REMOTE_ADDRESS",
        Operator::DownstreamRemoteAddress,
    ),
    ("DOWNSTREAM_PEER_SUBJECT", Operator::DownstreamPeerSubject),
];

impl Template {
    /// The pieces, in order: what writing a line walks.
    pub(crate) fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Parses `template`, refusing an unknown operator, a `%` left open
    /// and a line break (a template is one line per request, and a log
    /// reader splits on line ends), each named at `access_log.template`.
    pub(crate) fn parse(template: &str) -> Result<Template, ConfigError> {
        if let Some(c) = template.chars().find(|c| c.is_control()) {
            return Err(ConfigError::invalid(
                FIELD,
                format!("must be one line of printable text, found {c:?}"),
            ));
        }
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = template;
        while let Some((before, after)) = rest.split_once('%') {
            text.push_str(before);
            let Some((name, after)) = after.split_once('%') else {
                return Err(ConfigError::invalid(
                    FIELD,
                    format!(
                        "unterminated operator `%{after}`: close it with `%`, or write a literal `%` as `%%`"
                    ),
                ));
            };
            rest = after;
            if name.is_empty() {
                text.push('%');
                continue;
            }
            let Some((_, operator)) = OPERATORS.iter().find(|(n, _)| *n == name) else {
                let known: Vec<String> = OPERATORS.iter().map(|(n, _)| format!("%{n}%")).collect();
                return Err(ConfigError::invalid(
                    FIELD,
                    format!("unknown operator `%{name}%` (known: {})", known.join(", ")),
                ));
            };
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text).into()));
            }
            pieces.push(Piece::Operator(*operator));
        }
        text.push_str(rest);
        if !text.is_empty() {
            pieces.push(Piece::Text(text.into()));
        }
        Ok(Template {
            pieces: pieces.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn literals_operators_and_escapes_become_pieces() {
        let t = Template::parse("a %METHOD%%PATH% 100%% %RESPONSE_CODE%").unwrap();
        let shape: Vec<String> = t
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Text(s) => format!("{s:?}"),
                Piece::Operator(o) => format!("{o:?}"),
            })
            .collect();
        assert_eq!(
            shape,
            ["\"a \"", "Method", "Path", "\" 100% \"", "ResponseCode"]
        );
    }

    #[test]
    fn an_unknown_or_unterminated_operator_is_named() {
        let e = Template::parse("%METHOD% %STATUS%").unwrap_err();
        assert_eq!(e.field, "access_log.template");
        assert!(e.message.contains("unknown operator `%STATUS%`"), "{e}");
        assert!(
            e.message.contains("%RESPONSE_CODE%"),
            "lists the known: {e}"
        );

        let e = Template::parse("%METHOD% %DURATION").unwrap_err();
        assert_eq!(e.field, "access_log.template");
        assert!(
            e.message.contains("unterminated operator `%DURATION`"),
            "{e}"
        );

        let e = Template::parse("%METHOD%\n%PATH%").unwrap_err();
        assert!(e.message.contains("one line"), "{e}");
    }

    #[test]
    fn the_default_template_parses() {
        let t = Template::parse(super::super::AccessLogSection::DEFAULT_TEMPLATE).unwrap();
        assert!(t.pieces.len() > 10);
    }
}
