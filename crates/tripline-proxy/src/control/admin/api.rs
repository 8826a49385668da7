//! The `/api/breakers…` calls, and the percent-decoding of breaker names.

use http::{Method, Response, StatusCode};
use serde_json::json;

use super::audit::Entry;
use super::breakers::{self, Action};
use super::respond::{AdminBody, error, json};
use super::{AdminState, not_allowed};
use crate::table::Table;

/// `GET /api/breakers/{name}` and `POST /api/breakers/{name}/{action}`;
/// `rest` is the path after `/api/breakers/`.
pub(crate) fn breaker_call(
    table: &Table,
    admin: &AdminState,
    applier: Option<&tripline_config::Applier>,
    method: &Method,
    rest: &str,
    who: &str,
) -> Response<AdminBody> {
    match *method {
        Method::GET => {
            let name = percent_decode(rest);
            if let Some(value) = breakers::one(table, &admin.hub, applier, &name) {
                return json(StatusCode::OK, &value);
            }
            match breakers::find_family(table, &name) {
                Some(family) => json(StatusCode::OK, &family_summary(&*family, &name)),
                None => unknown_breaker(&name),
            }
        }
        Method::POST => {
            let Some((name, segment)) = rest.rsplit_once('/') else {
                return error(
                    StatusCode::NOT_FOUND,
                    "POST needs an action: /api/breakers/{name}/{action}",
                    &[("actions", actions())],
                );
            };
            let Some(action) = Action::parse(segment) else {
                return error(
                    StatusCode::NOT_FOUND,
                    &format!("unknown breaker action {segment:?}"),
                    &[("action", segment.into()), ("actions", actions())],
                );
            };
            let name = percent_decode(name);
            let Some(breaker) = breakers::find(table, &name) else {
                return match breakers::find_family(table, &name) {
                    Some(family) => hold_family(admin, who, action, &*family, &name, applier),
                    None => unknown_breaker(&name),
                };
            };
            let before = breaker.state();
            if !through_applier(action, &name, applier) {
                action.apply(&breaker);
            }
            admin.audit.record(Entry {
                source: "admin-api",
                who,
                action: action.audit_name(),
                target: Some(&name),
                summary: format!("{name}: {} → {}", before.as_str(), breaker.state().as_str()),
            });
            match breakers::one(table, &admin.hub, applier, &name) {
                Some(value) => json(StatusCode::OK, &value),
                None => unknown_breaker(&name),
            }
        }
        _ => not_allowed("GET, POST"),
    }
}

/// Applies `action` to `name` through the `[config_source]` applier, if
/// it manages that name on its own (a route breaker, or a family); whether
/// it did. Through the applier, it knows the local override: it lists it,
/// pushed documents leave the state alone, and it holds over a fleet
/// override until the reset, which hands the breaker back to the fleet
/// override if one is in force.
fn through_applier(action: Action, name: &str, applier: Option<&tripline_config::Applier>) -> bool {
    use tripline_config::OverrideState;
    match (action, applier) {
        (Action::ForceOpen, Some(a)) => a.hold_locally(name, OverrideState::ForcedOpen).is_ok(),
        (Action::Disable, Some(a)) => a.hold_locally(name, OverrideState::Disabled).is_ok(),
        (Action::MetricsOnly, Some(a)) => a.hold_locally(name, OverrideState::MetricsOnly).is_ok(),
        (Action::Reset, Some(a)) => a.clear_override(name).is_ok(),
        (_, None) => false,
    }
}

/// `POST /api/breakers/{family}/{action}`: the action holds (or `reset`
/// lifts) every breaker of a keyed route or a cluster, those made later
/// included; audited like a breaker's.
fn hold_family(
    admin: &AdminState,
    who: &str,
    action: Action,
    family: &dyn breakers::Family,
    name: &str,
    applier: Option<&tripline_config::Applier>,
) -> Response<AdminBody> {
    let state_name = |s: Option<tripline::State>| s.map_or("automatic", tripline::State::as_str);
    let before = family.held();
    if !through_applier(action, name, applier) {
        family.hold(action.operator_state());
    }
    let held = family.held();
    admin.audit.record(Entry {
        source: "admin-api",
        who,
        action: action.audit_name(),
        target: Some(name),
        summary: format!(
            "{name} (every breaker of the family): {} → {}",
            state_name(before),
            state_name(held)
        ),
    });
    json(StatusCode::OK, &family_summary(family, name))
}

/// A family as `GET` and `POST /api/breakers/{family}…` describe it: the
/// state it is held in (null: automatic), and its live breakers (each
/// listed in `GET /api/breakers` under `family:key`).
fn family_summary(family: &dyn breakers::Family, name: &str) -> serde_json::Value {
    json!({
        "family": name,
        "held": family.held().map(tripline::State::as_str),
        "breakers": family.breakers(),
    })
}

fn actions() -> serde_json::Value {
    json!(Action::ALL.map(Action::segment))
}

/// 404 naming the breaker.
fn unknown_breaker(name: &str) -> Response<AdminBody> {
    error(
        StatusCode::NOT_FOUND,
        &format!("no breaker named {name:?}: GET /api/breakers lists them"),
        &[("breaker", name.into())],
    )
}

/// Decodes `%XX` escapes (a keyed breaker's name holds a header value,
/// which may have spaces or `/`); anything malformed is kept as written.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn decodes_escapes_and_keeps_malformed_ones() {
        assert_eq!(
            percent_decode("backend%2F127.0.0.1%3A80"),
            "backend/127.0.0.1:80"
        );
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("a%zz"), "a%zz");
        assert_eq!(percent_decode("t%20x"), "t x");
    }
}
