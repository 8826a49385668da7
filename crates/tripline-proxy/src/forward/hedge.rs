//! Hedged tries: the same request to a second endpoint when the first is
//! slow to answer, the first good answer winning.
//!
//! Run by the library's [`Hedge`](tripline::hedge::Hedge): after the
//! route's `hedge.delay` without response headers, another try is
//! prepared (on an endpoint not tried yet, when there is one) and raced
//! against the first. A try that fails outright (connect failure, a
//! failure status) launches the next hedge at once, if one is left. The
//! first answer that is not a failure wins; the others' futures are
//! dropped, which cancels their upstream requests and releases their
//! endpoint leases unrecorded — neutral for breakers, so a slow endpoint
//! that lost a race is not charged a failure. When every try failed, the
//! last failure is the answer (and the retry loop may go on).
//!
//! Each hedge is paid from the route's retry budget like a retry; with
//! the budget empty, no hedge is sent and the first try runs alone.
//! Only requests that may be sent twice are hedged: idempotent methods,
//! or any method on a `retry.retryable` route, with a body kept for
//! replay.

use tripline::timeout::Deadline;

use super::attempt::{self, Tried};
use super::{Outbound, TriedEndpoints};
use crate::body::RequestBody;
use crate::proxy::Inner;
use crate::rejection::{Reason, Rejection};
use crate::route::Route;
use std::sync::{Mutex, PoisonError};

/// One try, hedged when the route says so and the request allows it.
pub(super) async fn try_maybe_hedged(
    proxy: &Inner,
    route: &Route,
    parts: &Outbound,
    body: &mut RequestBody,
    deadline: Option<Deadline>,
    tried: &mut TriedEndpoints,
) -> Tried {
    let hedge = match &route.guard.hedge {
        // Two endpoints must not both take over a connection for one client.
        Some(h) if body.is_replayable() && route.may_hedge(&parts.method) && !parts.upgrade => h,
        _ => return attempt::try_once(proxy, route, parts, body, deadline, tried).await,
    };
    // Failed tries are put aside, recorded on their endpoints at once: a
    // later refusal (no endpoint, no budget) must not hide an upstream's
    // real answer, nor drop its outcome unrecorded.
    let failed: Mutex<Option<Tried>> = Mutex::new(None);
    let put_aside = |t: Tried| {
        let t = t.settle();
        let mut slot = failed.lock().unwrap_or_else(PoisonError::into_inner);
        if !(slot.is_some() && matches!(t, Tried::Refused(_))) {
            *slot = Some(t);
        }
    };
    let raced = hedge
        .call(|number| {
            let prepared = match attempt::prepare(route, body, deadline, tried) {
                // The first try is the request's own; every later one is
                // extra load, paid like a retry. Unpaid, the prepared
                // lease is dropped: released, never sent.
                Ok(_) if number > 1 && !route.budget.try_withdraw() => None,
                Ok(ready) => Some(Ok(ready)),
                Err(refused) => Some(Err(refused)),
            };
            let put_aside = &put_aside;
            async move {
                let tried = match prepared {
                    Some(Ok(ready)) => attempt::send(proxy, route, parts, ready, deadline).await,
                    Some(Err(refused)) => Tried::Refused(refused),
                    None => return Err(()),
                };
                match tried.outcome() {
                    Some(o) if !o.is_failure() => Ok(tried),
                    _ => {
                        put_aside(tried);
                        Err(())
                    }
                }
            }
        })
        .await;
    match raced {
        Ok(tried) => tried,
        Err(()) => failed
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or_else(|| {
                Tried::Refused(Rejection::new(Reason::NoHealthyEndpoint, Some(&route.name)))
            }),
    }
}
