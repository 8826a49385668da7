//! `GET /api/fleet`: the fleet's breakers at a glance, for a proxy whose
//! config source is etcd — every live instance's status key summed per
//! breaker and state ("open on 2 of 3 instances, for 40 s"), as
//! `tripline config status --breakers` prints it. The dashboard's fleet
//! panel polls it. Stopped instances drop out when their leases expire.

use http::{Method, Response, StatusCode};
use serde_json::json;

use super::not_allowed;
use super::respond::{AdminBody, error, json};
use crate::control::Control;

/// Answers `GET /api/fleet`.
pub(super) async fn answer(control: &Control, method: &Method) -> Response<AdminBody> {
    if *method != Method::GET {
        return not_allowed("GET");
    }
    let read = match &control.config_source {
        Some(source) => source.fleet().await,
        None => None,
    };
    match read {
        None => error(
            StatusCode::NOT_FOUND,
            "no fleet: the proxy has no etcd config source ([config_source] kind = \"etcd\")",
            &[],
        ),
        Some(Err(e)) => error(
            StatusCode::BAD_GATEWAY,
            &format!("cannot read the fleet's status keys from etcd: {e}"),
            &[],
        ),
        Some(Ok(fleet)) => json(
            StatusCode::OK,
            &json!({
                "instances": fleet.iter().map(|s| &s.instance).collect::<Vec<_>>(),
                "breakers": tripline_config::fleet_view(&fleet),
                "now_ms": now_ms(),
            }),
        ),
    }
}

/// The wall clock, in ms since the Unix epoch (for "for 40 s").
fn now_ms() -> u64 {
    let now = tripline::clock::system_time_after(std::time::Duration::ZERO);
    now.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
