"""Export every tripline breaker (and registry) through `prometheus_client`.

    import prometheus_client, tripline.prometheus
    tripline.prometheus.register()          # prometheus_client.REGISTRY
    prometheus_client.start_http_server(9100)

The families carry the names of the Rust exporter (`tripline-prometheus`),
so one dashboard and one set of alert rules serve Rust and Python
services: ``tripline_breaker_state{name,state}``,
``tripline_breaker_state_code{name}``,
``tripline_breaker_calls_total{name,outcome}``,
``tripline_breaker_failure_rate{name}``, ... and, per registry (bounded
cardinality: never one series per key),
``tripline_registry_breakers{family,state}`` and friends. With
``compat=True`` the generic ``circuit_breaker_state{name}`` and
``circuit_breaker_requests_total{name,result}`` that many existing
dashboards query are exported too.

Every breaker alive in the process is exported, read at scrape time
(nothing is added to the call path); a breaker Python frees leaves.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

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
        metrics = _tripline._breaker_metrics()
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
        stats = _tripline._registry_stats()
        if stats:
            yield from self._registries(stats)

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
