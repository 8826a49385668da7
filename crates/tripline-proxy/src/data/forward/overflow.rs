//! The answer to a request a cluster's overflow limits refused.

use crate::http::rejection::{Reason, Rejection};
use crate::table::overflow::{Limit, Overflow};
use crate::table::route::Route;

/// 503 `upstream_overflow` (`UO`), naming the cluster and the limit: the
/// proxy's own refusal, booked on no breaker (the caller answers it as a
/// try that was never sent).
pub(super) fn refusal(route: &Route, limit: Limit) -> Rejection {
    let cluster = route.cluster.name();
    Rejection::new(Reason::UpstreamOverflow, Some(&route.name))
        .cluster(cluster)
        .detail(format!(
            "cluster {cluster}: its {} limit is reached",
            Overflow::name(limit)
        ))
}
