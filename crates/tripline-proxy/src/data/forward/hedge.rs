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
//!
//! Each try sent is opened on the request's access-log trail as it is
//! sent and closed with its own outcome when it ends; a try still open
//! when the race is won lost it, and is closed as `cancelled`.

use super::TriedEndpoints;
use super::attempt::{self, Tried};
use crate::data::Ctx;
use crate::data::access_log::Trail;
use crate::http::body::RequestBody;
use crate::table::route::Route;
use crate::upstream::Outbound;

use super::limits::Limits;
use std::sync::{Mutex, PoisonError};

/// One try, hedged when the route says so and the request allows it;
/// every try sent is listed on `trail` (when the request is logged).
pub(super) async fn try_maybe_hedged(
    proxy: &Ctx,
    route: &Route,
    parts: &Outbound,
    body: &mut RequestBody,
    limits: Limits,
    tried: &mut TriedEndpoints,
    trail: Option<&mut Trail>,
) -> Tried {
    let hedge = match &route.guard.hedge {
        // Two endpoints must not both take over a connection for one client.
        Some(h) if body.is_replayable() && route.may_hedge(&parts.method) && !parts.upgrade => h,
        // Unhedged. A request that is not logged tries exactly as if there
        // were no log: no clock reading, no list.
        _ => {
            return match trail {
                None => attempt::try_once(proxy, route, parts, body, limits, tried).await,
                Some(trail) => try_logged(proxy, route, parts, body, limits, tried, trail).await,
            };
        }
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
    // The racing tries share the trail (one task polls them all, so the
    // lock is never contended); no lock at all when the request is not
    // logged.
    let trail = trail.map(Mutex::new);
    let raced = hedge
        .call(|number| {
            let before = tried.len();
            let prepared = match attempt::prepare(route, body, limits.deadline, tried) {
                // The first try is the request's own; every later one is
                // extra load, paid like a retry. Unpaid, the prepared
                // lease is dropped: released, never sent.
                Ok(_) if number > 1 && !route.budget.try_withdraw() => None,
                Ok(ready) => Some(Ok(ready)),
                Err(refused) => Some(Err(refused)),
            };
            // Listed: every try sent, and the pass's first try even when
            // refused (so each pass of the retry loop shows what became of
            // it); not a hedge that was never sent.
            let listed = match (&trail, &prepared) {
                (Some(trail), Some(Ok(_))) => Some((trail, number > 1)),
                (Some(trail), Some(Err(_))) if number == 1 => Some((trail, false)),
                _ => None,
            };
            let open = listed.map(|(trail, hedge)| {
                let open = lock(trail).open_try(tried.get(before), hedge);
                (trail, open)
            });
            let put_aside = &put_aside;
            async move {
                let tried = match prepared {
                    Some(Ok(ready)) => attempt::send(proxy, route, parts, ready, limits).await,
                    Some(Err(refused)) => Tried::Refused(refused),
                    None => return Err(()),
                };
                if let Some((trail, open)) = open {
                    lock(trail).close_try(open, tried.name());
                }
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
    // The race is over: a try still open lost it (its future was dropped,
    // its request cancelled).
    if let Some(trail) = trail {
        trail
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .cancel_open_tries();
    }
    match raced {
        Ok(tried) => tried,
        Err(()) => failed
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or_else(|| Tried::Refused(super::no_healthy::refusal(route))),
    }
}

/// One try without a hedge, listed on `trail`. Kept apart from
/// [`attempt::try_once`] (which it repeats, plus the listing): folding the
/// optional trail into `try_once` made every request's future carry it,
/// ~600 more instructions a request with the log off (`instructions.sh`,
/// 25 199 against 24 643).
pub(super) async fn try_logged(
    proxy: &Ctx,
    route: &Route,
    parts: &Outbound,
    body: &mut RequestBody,
    limits: Limits,
    tried: &mut TriedEndpoints,
    trail: &mut Trail,
) -> Tried {
    let before = tried.len();
    let prepared = attempt::prepare(route, body, limits.deadline, tried);
    let open = trail.open_try(tried.get(before), false);
    let outcome = match prepared {
        Ok(ready) => attempt::send(proxy, route, parts, ready, limits).await,
        Err(refused) => Tried::Refused(refused),
    };
    trail.close_try(open, outcome.name());
    outcome
}

fn lock<'a, 't>(trail: &'a Mutex<&'t mut Trail>) -> std::sync::MutexGuard<'a, &'t mut Trail> {
    trail.lock().unwrap_or_else(PoisonError::into_inner)
}
