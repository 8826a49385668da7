//! What keeps a web page out of a token-less admin listener.
//!
//! Without `[admin] token` the listener is on loopback, and "whoever
//! reaches it is on the machine already" holds for programs, not for the
//! browser of a developer on that machine: any page it shows can send
//! requests to `127.0.0.1`. Two attacks follow, and three rules stop them:
//!
//! - **DNS rebinding**: a page on `evil.example` re-points its own name at
//!   `127.0.0.1` and then reads and calls the admin API as same-origin.
//!   Its requests still name `evil.example` in `Host`, so every call must
//!   name a loopback host: `localhost`, an address of `127.0.0.0/8` or
//!   `[::1]`, with or without a port (rule `loopback_host`). A request
//!   without `Host` (not a browser's) passes.
//! - **Cross-site requests (CSRF)**: a page may send a "simple" request
//!   to any origin without asking first — a form post, or a `fetch` with
//!   `text/plain` — and a bodiless `POST` is one too. Browsers name the
//!   page's origin in `Origin` on every such request, so a request whose
//!   `Origin` is not the listener's own (`http://` + the request's `Host`,
//!   which the first rule made a loopback one) is refused (rule
//!   `same_origin`). Comparing with the request's `Host` rather than the
//!   configured address keeps the dashboard working through a port
//!   forward (`kubectl port-forward`, `ssh -L`).
//! - A mutating call (`POST`, `PUT`, `DELETE`, `PATCH`) that carries a
//!   body or declares a content type must declare one no page can send
//!   without the browser's CORS preflight (which this listener never
//!   grants): `application/json`, or for `PUT /api/config` the config's
//!   format, `application/toml` or `application/yaml` (rule
//!   `content_type`, answered 415). A bodiless call without a content type
//!   (`curl -X POST …/reset`) passes: a browser sending one names its
//!   origin, which the second rule judges.
//!
//! The refusals are 403 (415 for the content type) with a JSON error that
//! names the rule, and a `tracing` warning. With a token the token is the
//! protection of the mutating calls (a page cannot make a browser send
//! it), so only the first rule still applies, and only to a listener bound
//! to loopback: the reads answer without the token, and a rebinding page
//! must not read them.

use http::{HeaderMap, Method, StatusCode, Uri, header};

use super::respond::{AdminBody, error};

/// The content types a mutating call's body may declare; `PUT
/// /api/config` takes the config's own formats instead.
const JSON: &[&str] = &["application/json"];
const CONFIG: &[&str] = &["application/toml", "application/yaml", "application/x-yaml"];

/// The `loopback_host` rule alone: `None` when the request names a
/// loopback host (or none), else the refusal. A listener bound to
/// loopback applies it with a token too: the token guards the mutating
/// calls, but the reads answer without it, and a rebinding page could
/// otherwise read them.
pub(crate) fn refuse_rebinding(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Option<http::Response<AdminBody>> {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let named = host.or_else(|| uri.authority().map(|a| a.as_str()))?;
    (!is_loopback_host(named)).then(|| {
        refusal(
            StatusCode::FORBIDDEN,
            "loopback_host",
            method,
            uri,
            format!(
                "Host {named:?} is not a loopback name: an admin listener on loopback answers only requests for localhost, 127.0.0.0/8 or [::1] (a web page's DNS rebinding names its own host)"
            ),
        )
    })
}

/// `None` when a token-less admin listener may answer the request, else
/// the refusal.
pub(crate) fn refuse_foreign(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Option<http::Response<AdminBody>> {
    if let Some(refused) = refuse_rebinding(method, uri, headers) {
        return Some(refused);
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = host.is_some_and(|h| is_own_origin(origin.as_bytes(), h));
        if !own {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            return Some(refusal(
                StatusCode::FORBIDDEN,
                "same_origin",
                method,
                uri,
                format!(
                    "Origin {origin:?} is not this admin listener's own: without an admin token the admin API refuses calls from other web pages (cross-site requests)"
                ),
            ));
        }
    }
    if !is_mutating(method) {
        return None;
    }
    let declared = headers.get(header::CONTENT_TYPE);
    if declared.is_none() && !has_body(headers) {
        return None;
    }
    let accepted = if *method == Method::PUT && uri.path() == "/api/config" {
        CONFIG
    } else {
        JSON
    };
    let media = declared
        .and_then(|v| v.to_str().ok())
        .map(media_type)
        .unwrap_or_default();
    if accepted.iter().any(|a| media.eq_ignore_ascii_case(a)) {
        return None;
    }
    let mut r = refusal(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "content_type",
        method,
        uri,
        format!(
            "{method} {} needs Content-Type {} (got {}): without an admin token a call that changes the proxy must declare a type no web page can send without asking",
            uri.path(),
            accepted.join(" or "),
            if media.is_empty() { "none" } else { media },
        ),
    );
    r.headers_mut().insert(
        header::ACCEPT,
        header::HeaderValue::from_static(if accepted == JSON {
            "application/json"
        } else {
            "application/toml, application/yaml"
        }),
    );
    Some(r)
}

fn refusal(
    status: StatusCode,
    rule: &'static str,
    method: &Method,
    uri: &Uri,
    message: String,
) -> http::Response<AdminBody> {
    tracing::warn!(
        target: "tripline_proxy::admin",
        rule,
        %method,
        path = uri.path(),
        status = status.as_u16(),
        "admin call refused: {message}"
    );
    error(status, &message, &[("rule", rule.into())])
}

/// Whether the call may change the proxy.
pub(crate) fn is_mutating(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::DELETE | Method::PATCH
    )
}

/// Whether the request announces a body (`Content-Length` over zero, or
/// chunked).
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.to_str().map_or(true, |v| v.trim() != "0"))
}

/// `application/json` of `application/json; charset=utf-8`.
fn media_type(value: &str) -> &str {
    value.split(';').next().unwrap_or_default().trim()
}

/// Whether `host` (a `Host` value: a name or address, maybe a port) is
/// `localhost`, in `127.0.0.0/8`, or `[::1]`.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((inside, "")) => inside,
            Some((inside, port)) if port.strip_prefix(':').is_some_and(is_port) => inside,
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `8080`'s shape.
fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `origin` is `http://` + `host`, the origin of a page the
/// listener itself served (the dashboard), compared without case and
/// with the default port written or not.
fn is_own_origin(origin: &[u8], host: &str) -> bool {
    let Some(origin) = std::str::from_utf8(origin)
        .ok()
        .and_then(|o| o.strip_prefix("http://"))
    else {
        return false;
    };
    let strip_default = |s: &str| s.strip_suffix(":80").map(str::to_owned);
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    same(origin, host)
        || strip_default(origin).is_some_and(|o| same(&o, host))
        || strip_default(host).is_some_and(|h| same(origin, &h))
}

#[cfg(test)]
mod tests {
    use super::{is_loopback_host, is_own_origin};

    #[test]
    fn loopback_hosts_with_and_without_ports() {
        for host in [
            "localhost",
            "LOCALHOST:9901",
            "127.0.0.1",
            "127.3.4.5:80",
            "[::1]",
            "[::1]:9901",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9901",
            "localhost.evil.example",
            "10.0.0.1:9901",
            "[::2]:1",
            "127.0.0.1:",
            "127.0.0.1:x",
            "[::1]x",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn own_origin_is_http_and_the_requests_host() {
        assert!(is_own_origin(b"http://127.0.0.1:9901", "127.0.0.1:9901"));
        assert!(is_own_origin(b"http://LocalHost:9901", "localhost:9901"));
        assert!(is_own_origin(b"http://localhost:80", "localhost"));
        assert!(!is_own_origin(b"http://localhost:3000", "localhost:9901"));
        assert!(!is_own_origin(b"https://127.0.0.1:9901", "127.0.0.1:9901"));
        assert!(!is_own_origin(b"null", "127.0.0.1:9901"));
    }
}
