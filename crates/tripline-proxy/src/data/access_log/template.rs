//! Writing a line in the text format: a walk over the template's pieces,
//! parsed once when the config was loaded (see the config's access-log
//! template), never a parse per line. A value that is missing is written
//! `-`, as Envoy does.

use std::io::{self, Write};

use super::{Record, millis};
use crate::config::access_log_template::{Operator, Piece, Template};

/// Writes `record`'s line (without its line end) to `out`, as
/// `template` says.
pub(super) fn render(template: &Template, record: &Record, out: &mut Vec<u8>) -> io::Result<()> {
    for piece in template.pieces() {
        match piece {
            Piece::Text(text) => out.extend_from_slice(text.as_bytes()),
            Piece::Operator(operator) => value(*operator, record, out)?,
        }
    }
    Ok(())
}

/// Writes one operator's value, `-` when the request has none.
fn value(operator: Operator, record: &Record, out: &mut Vec<u8>) -> io::Result<()> {
    let trail = &record.trail;
    match operator {
        Operator::StartTime => write!(out, "{}", humantime::format_rfc3339_millis(trail.timestamp)),
        Operator::Method => out.write_all(trail.method.as_str().as_bytes()),
        Operator::Path => out.write_all(trail.path.as_bytes()),
        Operator::ResponseCode => write!(out, "{}", record.status),
        Operator::ResponseFlags => {
            out.write_all(record.flag().as_deref().unwrap_or("-").as_bytes())
        }
        Operator::Duration => write!(out, "{}", record.duration.as_millis()),
        Operator::RouteName => out.write_all(record.route.as_deref().unwrap_or("-").as_bytes()),
        Operator::UpstreamCluster => {
            out.write_all(record.cluster.as_deref().unwrap_or("-").as_bytes())
        }
        Operator::UpstreamHost => out.write_all(record.upstream_host().unwrap_or("-").as_bytes()),
        Operator::AttemptCount => write!(out, "{}", record.tries_sent()),
        Operator::Retries => write!(out, "{}", record.retries()),
        Operator::Attempts => attempts(record, out),
        Operator::DownstreamRemoteAddress => write!(out, "{}", trail.peer),
        // A subject holds spaces: quoted, as Envoy's `%REQ(…)%`-style
        // values with spaces are, so a line still splits on spaces.
        Operator::DownstreamPeerSubject => match trail.client_cert.as_deref() {
            Some(subject) => write!(out, "\"{}\"", subject.replace('"', "'")),
            None => out.write_all(b"-"),
        },
    }
}

/// Every try, comma-separated, as `endpoint/outcome/ms` (a hedge with a
/// leading `+`, a try that reached no endpoint with `-` for it); `-`
/// when there was none.
fn attempts(record: &Record, out: &mut Vec<u8>) -> io::Result<()> {
    let tries = &record.trail.attempts;
    if tries.is_empty() {
        return out.write_all(b"-");
    }
    for (i, attempt) in tries.iter().enumerate() {
        let separator = if i == 0 { "" } else { "," };
        let hedge = if attempt.hedge { "+" } else { "" };
        let endpoint = attempt.endpoint.as_ref().map_or("-", |e| e.as_str());
        write!(
            out,
            "{separator}{hedge}{endpoint}/{}/{}",
            attempt.outcome_name(),
            millis(attempt.took).round()
        )?;
    }
    Ok(())
}
