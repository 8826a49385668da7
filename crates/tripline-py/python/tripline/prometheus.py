"""Export every tripline breaker (and registry) through `prometheus_client`.

    import prometheus_client, tripline.prometheus
    tripline.prometheus.register()          # prometheus_client.REGISTRY
    prometheus_client.start_http_server(9100)

The families carry the names of the Rust exporter (`tripline-prometheus`),
so one dashboard and one set of alert rules serve Rust and Python
services: ``tripline_breaker_state{name,state}``,
``tripline_breaker_state_code{name}``,
``tripline_breaker_calls_total{name,outcome}``,
``tripline_breaker_failure_rate{name}``, ...,
``tripline_breaker_transitions_total{name,from,to,reason}``,
``tripline_breaker_time_in_state_seconds{name}`` and the thresholds in
force (what the shipped alert rules read) and, per registry (bounded
cardinality: never one series per key),
``tripline_registry_breakers{family,state}`` and friends; per pipeline
(by its ``name``) ``tripline_retry_*``, ``tripline_retry_budget_*`` and
``tripline_bulkhead_*``; per cluster ``tripline_cluster_endpoints{cluster}``,
``tripline_cluster_routable_endpoints``, ``tripline_outlier_*``, its
endpoint breakers (as breakers, and as a registry family), its retry
budget and, for failback, ``tripline_failback_*``; per hedge with a
budget, ``tripline_retry_budget_*`` under its name; per adaptive throttle
``tripline_throttle_*{name}``. With
``compat=True`` the generic ``circuit_breaker_state{name}`` and
``circuit_breaker_requests_total{name,result}`` that many existing
dashboards query are exported too.

Every breaker alive in the process is exported, read at scrape time
(nothing is added to the call path); a breaker Python frees leaves.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

from . import _tripline

__all__ = ["TriplineCollector", "register"]

_STATES = ("closed", "open", "half_open", "forced_open", "disabled", "metrics_only")
_STATE_CODE = {s: i for i, s in enumerate(_STATES)}
# The compat state: open and forced open read 1, half-open 2, the states
# in which calls flow 0.
_COMPAT_CODE = {"open": 1, "forced_open": 1, "half_open": 2}
_OUTCOMES = ("successful", "failed", "rejected", "slow", "ignored", "cancelled", "late")


class TriplineCollector:
    """A `prometheus_client` collector of every tripline breaker and registry."""

    def __init__(self, prefix: str = "tripline", compat: bool = False) -> None:
        self.prefix = prefix
        self.compat = compat

    def describe(self) -> list[Any]:
        # Families vary with the breakers alive: no fixed description.
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self.prefix
        clusters = _tripline._cluster_stats()
        # Standalone breakers, then the clusters' endpoint breakers, each
        # name once.
        samples = _tripline._breaker_samples()
        metrics = [s["metrics"] for s in samples]
        state = GaugeMetricFamily(f"{p}_breaker_state", "1 for the breaker's current state, 0 for the others", labels=["name", "state"])
        code = GaugeMetricFamily(
            f"{p}_breaker_state_code",
            "Breaker state: 0 closed, 1 open, 2 half_open, 3 forced_open, 4 disabled, 5 metrics_only",
            labels=["name"],
        )
        calls = CounterMetricFamily(
            f"{p}_breaker_calls",
            "Calls by outcome; successful, failed, ignored, rejected and cancelled are disjoint, slow and late are part of successful plus failed",
            labels=["name", "outcome"],
        )
        failure_rate = GaugeMetricFamily(f"{p}_breaker_failure_rate", "Failure rate (0-1) of the live window", labels=["name"])
        slow_rate = GaugeMetricFamily(f"{p}_breaker_slow_call_rate", "Slow-call rate (0-1) of the live window", labels=["name"])
        window = GaugeMetricFamily(f"{p}_breaker_window_calls", "Calls in the live window", labels=["name"])
        probes_in_flight = GaugeMetricFamily(f"{p}_breaker_probes_in_flight", "Half-open probes admitted and not yet finished", labels=["name"])
        probes = CounterMetricFamily(f"{p}_breaker_probes", "Half-open probes by result (succeeded, failed)", labels=["name", "result"])
        probe_due = GaugeMetricFamily(
            f"{p}_breaker_probe_due",
            "1 when the breaker is open and its open duration has passed, so the next call probes",
            labels=["name"],
        )
        backoff = GaugeMetricFamily(f"{p}_breaker_backoff_round", "Consecutive failed probe rounds: the step of the open-duration backoff", labels=["name"])
        version = GaugeMetricFamily(f"{p}_breaker_config_version", "Version of the breaker's config: 0 at creation, +1 per reconfiguration", labels=["name"])
        for m in metrics:
            n = m.name
            for s in _STATES:
                state.add_metric([n, s], 1.0 if m.state == s else 0.0)
            code.add_metric([n], _STATE_CODE[m.state])
            for outcome in _OUTCOMES:
                calls.add_metric([n, outcome], getattr(m, outcome))
            failure_rate.add_metric([n], m.failure_rate)
            slow_rate.add_metric([n], m.slow_call_rate)
            window.add_metric([n], m.window_calls)
            probes_in_flight.add_metric([n], m.probes_in_flight)
            probes.add_metric([n, "succeeded"], m.probes_succeeded)
            probes.add_metric([n, "failed"], m.probes_failed)
            probe_due.add_metric([n], 1.0 if m.probe_due else 0.0)
            backoff.add_metric([n], m.backoff_round)
            version.add_metric([n], m.config_version)
        if metrics:
            yield from (state, code, calls, failure_rate, slow_rate, window, probes_in_flight, probes, probe_due, backoff, version)
            yield from self._breaker_details(samples)
        if self.compat and metrics:
            cstate = GaugeMetricFamily("circuit_breaker_state", "Breaker state: 0 closed, 1 open, 2 half-open", labels=["name"])
            requests = CounterMetricFamily(
                "circuit_breaker_requests", "Requests by result (success, failure, short_circuited)", labels=["name", "result"]
            )
            for m in metrics:
                cstate.add_metric([m.name], _COMPAT_CODE.get(m.state, 0))
                requests.add_metric([m.name, "success"], m.successful)
                requests.add_metric([m.name, "failure"], m.failed)
                requests.add_metric([m.name, "short_circuited"], m.rejected)
            yield cstate
            yield requests
        stats = _tripline._registry_stats() + [c["registry"] for c in clusters]
        if stats:
            yield from self._registries(stats)
        pipelines = _tripline._pipeline_stats()
        named_budgets = [(s["name"], s["budget"]) for s in pipelines if s["budget"] is not None]
        named_budgets += [(c["cluster"], c["budget"]) for c in clusters if c["budget"] is not None]
        named_budgets += _tripline._hedge_budgets()
        yield from self._retries([s for s in pipelines if s["retry"] is not None])
        yield from self._budgets(named_budgets)
        yield from self._bulkheads([s for s in pipelines if s["bulkhead"] is not None])
        if clusters:
            yield from self._clusters(clusters)
        failbacks = [(c["cluster"], c["failback"]) for c in clusters if c["failback"] is not None]
        if failbacks:
            yield from self._failbacks(failbacks)
        throttles = _tripline._throttle_metrics()
        if throttles:
            yield from self._throttles(throttles)

    def _breaker_details(self, samples: list[dict[str, Any]]) -> Iterator[Any]:
        """The families the Rust exporter shows at its ``Full`` detail, which
        the shipped alert rules read: transitions by kind (flapping, failed
        probe rounds), time in state against the half-open backstop (a
        stuck half-open), and the thresholds in force."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self.prefix
        transitions = CounterMetricFamily(
            f"{p}_breaker_transitions", "State transitions since the breaker was created (by from, to and reason)", labels=["name", "from", "to", "reason"]
        )
        for s in samples:
            for frm, to, reason, n in s["transitions"]:
                transitions.add_metric([s["metrics"].name, frm, to, reason], n)
        if transitions.samples:
            yield transitions
        # (family, help, the sample's key); a None value (no slow-call
        # detection, no backstop) leaves the breaker out of that family.
        gauges = [
            (GaugeMetricFamily, "breaker_time_in_state_seconds", "Seconds since the breaker entered its current state, on the breaker's clock", "time_in_state"),
            (
                GaugeMetricFamily,
                "breaker_open_until_timestamp_seconds",
                "Unix time at which the current open state ends; 0 when not open",
                "open_until",
            ),
            (GaugeMetricFamily, "breaker_failure_rate_threshold", "Configured failure rate (0-1) that trips the breaker", "failure_rate_threshold"),
            (GaugeMetricFamily, "breaker_slow_call_rate_threshold", "Configured slow-call rate (0-1) that trips the breaker", "slow_call_rate_threshold"),
            (GaugeMetricFamily, "breaker_minimum_calls", "Calls the window needs before its rates can trip the breaker", "minimum_calls"),
            (
                GaugeMetricFamily,
                "breaker_max_half_open_duration_seconds",
                "Longest the breaker may stay half-open, when configured",
                "max_half_open",
            ),
        ]
        for kind, name, documentation, key in gauges:
            family = kind(f"{p}_{name}", documentation, labels=["name"])
            for s in samples:
                if s[key] is not None:
                    family.add_metric([s["metrics"].name], s[key])
            if family.samples:
                yield family

    def _throttles(self, throttles: list[dict[str, Any]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: list[tuple[Any, str, str, Callable[[dict[str, Any]], float]]] = [
            (
                GaugeMetricFamily,
                "throttle_drop_probability",
                "Probability (0-1) with which the throttle sheds the next request",
                lambda t: t["rejection_probability"],
            ),
            (
                GaugeMetricFamily,
                "throttle_active",
                "1 when the request rate is high enough for the throttle to act",
                lambda t: 1.0 if t["active"] else 0.0,
            ),
            (CounterMetricFamily, "throttle_requests", "Requests seen by the throttle", lambda t: t["totals"]["requests"]),
            (CounterMetricFamily, "throttle_accepts", "Requests the backend accepted", lambda t: t["totals"]["accepts"]),
            (
                CounterMetricFamily,
                "throttle_throttled",
                "Requests the throttle shed locally",
                lambda t: t["totals"]["throttled"],
            ),
        ]
        for kind, name, documentation, value in families:
            family = kind(f"{self.prefix}_{name}", documentation, labels=["name"])
            for t in throttles:
                family.add_metric([t["name"]], value(t))
            yield family

    def _retries(self, pipelines: list[dict[str, Any]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        if not pipelines:
            return
        p = self.prefix
        attempts = CounterMetricFamily(f"{p}_retry_attempts", "Attempts made, first attempts included", labels=["name"])
        retries = CounterMetricFamily(f"{p}_retry_retries", "Retries made (attempts after the first)", labels=["name"])
        refusals = CounterMetricFamily(f"{p}_retry_refusals", "Wanted retries not made, by reason", labels=["name", "reason"])
        for s in pipelines:
            r = s["retry"]
            attempts.add_metric([s["name"]], r["attempts"])
            retries.add_metric([s["name"]], r["retries"])
            for reason, n in r["refused"].items():
                refusals.add_metric([s["name"], reason], n)
        yield from (attempts, retries, refusals)

    def _budgets(self, budgets: list[tuple[str, dict[str, Any]]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        if not budgets:
            return
        p = self.prefix
        available = GaugeMetricFamily(f"{p}_retry_budget_available", "Retries the budget would grant now", labels=["name"])
        requests = CounterMetricFamily(f"{p}_retry_budget_requests", "Requests deposited into the budget", labels=["name"])
        withdrawals = CounterMetricFamily(f"{p}_retry_budget_withdrawals", "Retries (and hedges) the budget granted", labels=["name"])
        refusals = CounterMetricFamily(
            f"{p}_retry_budget_refusals", "Retries (and hedges) refused because the budget was spent", labels=["name"]
        )
        for name, b in budgets:
            available.add_metric([name], b["available"])
            requests.add_metric([name], b["deposits"])
            withdrawals.add_metric([name], b["withdrawals"])
            refusals.add_metric([name], b["refused"])
        yield from (available, requests, withdrawals, refusals)

    def _bulkheads(self, pipelines: list[dict[str, Any]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        if not pipelines:
            return
        p = self.prefix
        in_use = GaugeMetricFamily(f"{p}_bulkhead_in_use", "Calls holding a bulkhead slot now", labels=["name"])
        queued = GaugeMetricFamily(f"{p}_bulkhead_queued", "Calls waiting for a bulkhead slot now", labels=["name"])
        most = GaugeMetricFamily(f"{p}_bulkhead_max_concurrent", "Slots of the bulkhead", labels=["name"])
        admitted = CounterMetricFamily(f"{p}_bulkhead_admitted", "Bulkhead slots granted", labels=["name"])
        rejected = CounterMetricFamily(f"{p}_bulkhead_rejected", "Calls the bulkhead rejected", labels=["name"])
        for s in pipelines:
            b, n = s["bulkhead"], [s["name"]]
            in_use.add_metric(n, b["in_flight"])
            queued.add_metric(n, b["waiting"])
            most.add_metric(n, b["max_concurrent"])
            admitted.add_metric(n, b["admitted"])
            rejected.add_metric(n, b["rejected"])
        yield from (in_use, queued, most, admitted, rejected)

    def _clusters(self, clusters: list[dict[str, Any]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self.prefix
        detectors = _tripline._OUTLIER_DETECTORS
        endpoints = GaugeMetricFamily(f"{p}_cluster_endpoints", "Endpoints in the cluster", labels=["cluster"])
        routable = GaugeMetricFamily(
            f"{p}_cluster_routable_endpoints", "Endpoints neither ejected nor marked unhealthy", labels=["cluster"]
        )
        active = GaugeMetricFamily(
            f"{p}_outlier_ejections_active",
            "Endpoints ejected now, by the detector that ejected them (unknown: before registration)",
            labels=["cluster", "detector"],
        )
        ejections = CounterMetricFamily(
            f"{p}_outlier_ejections", "Ejections since the cluster was registered, by detector", labels=["cluster", "detector"]
        )
        skipped = CounterMetricFamily(
            f"{p}_outlier_detections_skipped",
            "Outlier detections that ejected nothing, by reason (not_enforced, max_ejection_percent)",
            labels=["cluster", "detector", "reason"],
        )
        panic = GaugeMetricFamily(
            f"{p}_outlier_panic_mode",
            "1 while the cluster is in panic mode (too few healthy endpoints: health ignored)",
            labels=["cluster"],
        )
        panic_entered = CounterMetricFamily(
            f"{p}_outlier_panic_entered", "Entries into panic mode since the cluster was registered", labels=["cluster"]
        )
        for c in clusters:
            n = c["cluster"]
            endpoints.add_metric([n], c["endpoints"])
            routable.add_metric([n], c["routable"])
            for d, count in zip(detectors, c["active"]):
                active.add_metric([n, d], count)
            # `unknown` is only ever a current state, never a counted ejection.
            for d, count, per_reason in zip(detectors[:-1], c["ejections"], c["skipped"]):
                ejections.add_metric([n, d], count)
                for reason, k in zip(("not_enforced", "max_ejection_percent"), per_reason):
                    skipped.add_metric([n, d, reason], k)
            panic.add_metric([n], 1.0 if c["panic"] else 0.0)
            panic_entered.add_metric([n], c["panic_entered"])
        yield from (endpoints, routable, active, ejections, skipped, panic, panic_entered)

    def _failbacks(self, queues: list[tuple[str, dict[str, Any]]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self.prefix
        depth = GaugeMetricFamily(f"{p}_failback_queue_depth", "Failback entries pending delivery", labels=["name"])
        age = GaugeMetricFamily(
            f"{p}_failback_oldest_entry_age_seconds",
            "Age of the oldest pending failback entry; 0 when the queue is empty",
            labels=["name"],
        )
        submissions = CounterMetricFamily(
            f"{p}_failback_submissions",
            "Failback submissions by outcome (delivered at once, queued, refused)",
            labels=["name", "outcome"],
        )
        deliveries = CounterMetricFamily(
            f"{p}_failback_deliveries",
            "Background deliveries by outcome (delivered, retry_failed, gave_up)",
            labels=["name", "outcome"],
        )
        for name, q in queues:
            depth.add_metric([name], q["depth"])
            age.add_metric([name], q["oldest_age"])
            submissions.add_metric([name, "delivered"], q["delivered_first"])
            submissions.add_metric([name, "queued"], q["queued"])
            submissions.add_metric([name, "refused"], q["refused"])
            deliveries.add_metric([name, "delivered"], q["delivered_later"])
            deliveries.add_metric([name, "retry_failed"], q["retries_failed"])
            deliveries.add_metric([name, "gave_up"], q["gave_up"])
        yield from (depth, age, submissions, deliveries)

    def _registries(self, stats: list[dict[str, Any]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self.prefix
        breakers = GaugeMetricFamily(
            f"{p}_registry_breakers", "Breakers of the registry by state (closed, open, half_open, operator)", labels=["family", "state"]
        )
        most = GaugeMetricFamily(f"{p}_registry_max_breakers", "Most breakers the registry holds", labels=["family"])
        created = CounterMetricFamily(f"{p}_registry_breakers_created", "Breakers the registry made", labels=["family"])
        dropped = CounterMetricFamily(
            f"{p}_registry_breakers_dropped", "Breakers the registry dropped, by reason (evicted, removed)", labels=["family", "reason"]
        )
        overflow = CounterMetricFamily(
            f"{p}_registry_overflow",
            "Lookups of new keys in a full registry (shared: given the overflow breaker; refused)",
            labels=["family", "outcome"],
        )
        for s in stats:
            f = s["family"]
            for st in ("closed", "open", "half_open", "operator"):
                breakers.add_metric([f, st], s["by_state"][st])
            most.add_metric([f], s["max_breakers"])
            created.add_metric([f], s["created"])
            dropped.add_metric([f, "evicted"], s["evicted"])
            dropped.add_metric([f, "removed"], s["removed"])
            overflow.add_metric([f, "shared"], s["overflowed"])
            overflow.add_metric([f, "refused"], s["refused"])
        yield from (breakers, most, created, dropped, overflow)


def register(registry: Optional[Any] = None, *, prefix: str = "tripline", compat: bool = False) -> TriplineCollector:
    """Registers a `TriplineCollector` with `registry` (default:
    `prometheus_client.REGISTRY`) and returns it. `compat=True` adds
    `circuit_breaker_state` and `circuit_breaker_requests_total`."""
    if registry is None:
        from prometheus_client import REGISTRY

        registry = REGISTRY
    collector = TriplineCollector(prefix=prefix, compat=compat)
    registry.register(collector)
    return collector
