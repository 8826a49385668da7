"""Export through prometheus_client, and a scrape by a real Prometheus
server (Debian package `prometheus`; missing, the test fails naming it)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest

import tripline
import tripline.prometheus
from conftest import trip


def exposition(compat: bool = False) -> str:
    registry = CollectorRegistry()
    tripline.prometheus.register(registry, compat=compat)
    return generate_latest(registry).decode()


def test_families_carry_the_rust_exporters_names(make_breaker):
    b = make_breaker("payments-export")
    b.call(lambda: 1)
    with pytest.raises(ZeroDivisionError):
        b.call(lambda: 1 / 0)
    rates = exposition()
    assert 'tripline_breaker_failure_rate{name="payments-export"} 0.5' in rates
    assert 'tripline_breaker_window_calls{name="payments-export"} 2.0' in rates
    o = make_breaker("opened-export")
    trip(o)
    text = exposition()
    assert 'tripline_breaker_state{name="opened-export",state="open"} 1.0' in text
    assert 'tripline_breaker_state{name="opened-export",state="closed"} 0.0' in text
    assert 'tripline_breaker_state_code{name="opened-export"} 1.0' in text
    assert 'tripline_breaker_calls_total{name="payments-export",outcome="successful"} 1.0' in text
    assert 'tripline_breaker_calls_total{name="opened-export",outcome="failed"} 4.0' in text
    assert "circuit_breaker_state" not in text


def test_the_full_detail_families_the_alert_rules_read(make_breaker, clock):
    b = make_breaker("detail-export", max_half_open_duration="2s", slow_call_duration="1s")
    trip(b)
    clock.advance(2)
    text = exposition()
    assert 'tripline_breaker_transitions_total{from="closed",name="detail-export",reason="failure_rate",to="open"} 1.0' in text
    assert 'tripline_breaker_time_in_state_seconds{name="detail-export"} 2.0' in text
    # Open for 5 s, 2 of them passed: the deadline is 3 s from now.
    until = float(text.split('tripline_breaker_open_until_timestamp_seconds{name="detail-export"} ')[1].split()[0])
    assert abs(until - (time.time() + 3)) < 2
    assert 'tripline_breaker_failure_rate_threshold{name="detail-export"} 0.5' in text
    assert 'tripline_breaker_slow_call_rate_threshold{name="detail-export"} 1.0' in text
    assert 'tripline_breaker_minimum_calls{name="detail-export"} 4.0' in text
    assert 'tripline_breaker_max_half_open_duration_seconds{name="detail-export"} 2.0' in text
    # A probe round that fails counts half_open -> open; the next closes.
    clock.advance(3)
    with pytest.raises(ConnectionError):
        b.call(lambda: (_ for _ in ()).throw(ConnectionError("still down")))
    clock.advance(10)
    b.call(lambda: 1)
    text = exposition()
    assert 'tripline_breaker_transitions_total{from="open",name="detail-export",reason="open_duration_elapsed",to="half_open"} 2.0' in text
    assert 'tripline_breaker_transitions_total{from="half_open",name="detail-export",reason="probe_failed",to="open"} 1.0' in text
    assert 'tripline_breaker_transitions_total{from="half_open",name="detail-export",reason="probes_succeeded",to="closed"} 1.0' in text
    assert 'tripline_breaker_open_until_timestamp_seconds{name="detail-export"} 0.0' in text


def test_a_breaker_without_slow_calls_shows_no_slow_threshold(make_breaker):
    b = make_breaker("plain-export")
    text = exposition()
    assert b.state == "closed"
    assert 'tripline_breaker_failure_rate_threshold{name="plain-export"}' in text
    assert 'tripline_breaker_slow_call_rate_threshold{name="plain-export"}' not in text
    # The backstop's default.
    assert 'tripline_breaker_max_half_open_duration_seconds{name="plain-export"} 60.0' in text
    assert 'tripline_breaker_transitions_total{name="plain-export"' not in text


def test_compat_names_behind_the_switch(make_breaker):
    b = make_breaker("compat-export")
    b.force_open()
    try:
        b.call(lambda: 1)
    except tripline.CircuitOpenError:
        pass
    text = exposition(compat=True)
    assert 'circuit_breaker_state{name="compat-export"} 1.0' in text
    assert 'circuit_breaker_requests_total{name="compat-export",result="short_circuited"} 1.0' in text


def test_registries_export_bounded_stats(clock):
    reg = tripline.BreakerRegistry("export-family", max_breakers=2, clock=clock)
    for key in ("a", "b", "c"):
        reg.get(key)
    text = exposition()
    assert 'tripline_registry_breakers{family="export-family",state="closed"} 2.0' in text
    assert 'tripline_registry_overflow_total{family="export-family",outcome="shared"} 1.0' in text
    assert "export-family:a" not in text  # never one series per key


def test_pipelines_export_retry_budget_and_bulkhead_families(clock):
    p = tripline.pipeline(
        name="inventory-export",
        retry={"max_attempts": 2, "backoff": {"kind": "none"}},
        budget={"ratio": 0.5, "min_retries_per_second": 1},
        bulkhead={"max_concurrent": 3},
        clock=clock,
    )
    with pytest.raises(ConnectionError):
        p.call(lambda: (_ for _ in ()).throw(ConnectionError("down")))
    text = exposition()
    assert 'tripline_retry_attempts_total{name="inventory-export"} 2.0' in text
    assert 'tripline_retry_retries_total{name="inventory-export"} 1.0' in text
    assert 'tripline_retry_refusals_total{name="inventory-export",reason="max_attempts"} 1.0' in text
    assert 'tripline_retry_budget_requests_total{name="inventory-export"} 1.0' in text
    assert 'tripline_retry_budget_withdrawals_total{name="inventory-export"} 1.0' in text
    assert 'tripline_retry_budget_available{name="inventory-export"}' in text
    assert 'tripline_bulkhead_max_concurrent{name="inventory-export"} 3.0' in text
    assert 'tripline_bulkhead_admitted_total{name="inventory-export"} 2.0' in text
    assert 'tripline_bulkhead_in_use{name="inventory-export"} 0.0' in text
    del p
    assert "inventory-export" not in exposition()  # a freed pipeline leaves


def test_clusters_export_health_outliers_endpoint_breakers_and_failback(clock, tmp_path):
    bad = {"n": 0}

    def call(address: str) -> str:
        if address == "bad:1":
            bad["n"] += 1
            raise ConnectionResetError(address)
        return address

    cluster = tripline.Cluster(
        ["good:1", "bad:1"],
        call=call,
        name="users-export",
        breaker={"window": {"kind": "count", "size": 100}, "minimum_calls": 100},
        outlier={"interval": 1, "base_ejection_time": 30, "max_ejection_percent": 100,
                 "consecutive_failures": {"threshold": 2, "enforcing_percent": 100}, "success_rate": None},
        budget={"ratio": 0.5},
        clock=clock,
    )
    for _ in range(6):
        assert cluster() == "good:1"
    clock.advance(1)
    cluster.analyze()
    text = exposition()
    assert 'tripline_cluster_endpoints{cluster="users-export"} 2.0' in text
    assert 'tripline_cluster_routable_endpoints{cluster="users-export"} 1.0' in text
    assert 'tripline_outlier_ejections_total{cluster="users-export",detector="consecutive_failures"} 1.0' in text
    assert 'tripline_outlier_ejections_active{cluster="users-export",detector="consecutive_failures"} 1.0' in text
    assert 'tripline_outlier_panic_mode{cluster="users-export"} 0.0' in text
    assert 'tripline_breaker_calls_total{name="users-export:bad:1",outcome="failed"}' in text
    assert 'tripline_registry_breakers_created_total{family="users-export"} 2.0' in text
    assert 'tripline_retry_budget_requests_total{name="users-export"} 6.0' in text

    def send(address: str, payload: bytes) -> None:
        raise ConnectionRefusedError(address)

    queue = tripline.Cluster(["points:1"], call=send, name="points-export", strategy="failback",
                             failback={"dir": str(tmp_path / "q"), "fsync": "never"}, clock=clock)
    queue.call(b"x")
    clock.advance(3)
    text = exposition()
    assert 'tripline_failback_queue_depth{name="points-export"} 1.0' in text
    assert 'tripline_failback_oldest_entry_age_seconds{name="points-export"} 3.0' in text
    assert 'tripline_failback_submissions_total{name="points-export",outcome="queued"} 1.0' in text
    assert 'tripline_failback_deliveries_total{name="points-export",outcome="gave_up"} 0.0' in text


def test_endpoint_breaker_transitions_are_exported(clock):
    def call(address: str) -> str:
        raise ConnectionResetError(address)

    cluster = tripline.Cluster(
        ["down:1"],
        call=call,
        name="trips-export",
        strategy="failfast",
        breaker={"window": {"kind": "count", "size": 2}, "minimum_calls": 2},
        clock=clock,
    )
    for _ in range(2):
        with pytest.raises(ConnectionResetError):
            cluster()
    text = exposition()
    assert 'tripline_breaker_state_code{name="trips-export:down:1"} 1.0' in text
    assert 'tripline_breaker_transitions_total{from="closed",name="trips-export:down:1",reason="failure_rate",to="open"} 1.0' in text


def test_freed_breakers_leave_the_export():
    b = tripline.CircuitBreaker("ephemeral-export")
    assert "ephemeral-export" in exposition()
    del b
    assert "ephemeral-export" not in exposition()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """A Prometheus server scraping one target every second."""

    def __init__(self, target: str, tmp: Path, rules: Optional[Path] = None) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("the `prometheus` binary is missing: install the Debian package prometheus (scripts/install-deps)")
        # Rules, if any, are evaluated every second too.
        rule_files = f"rule_files:\n  - '{rules}'\n" if rules else ""
        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            + rule_files
            + f"scrape_configs:\n  - job_name: python\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.port = free_port()
        self.log = tmp / "prometheus.log"
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

    def query(self, expr: str) -> Optional[float]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?query={urllib.parse.quote(expr)}"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                result = json.load(r)["data"]["result"]
        except OSError:
            return None
        return float(result[0]["value"][1]) if result else None

    def until(self, what: str, expr: str, value: float, deadline: float = 30.0) -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if self.query(expr) == value:
                return
            time.sleep(0.2)  # polling a real server's API, bounded by the deadline
        pytest.fail(f"Prometheus never saw {what} ({expr} == {value}); log:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_a_real_prometheus_scrapes_a_python_process(tmp_path, make_breaker):
    registry = CollectorRegistry()
    tripline.prometheus.register(registry, compat=True)
    port = free_port()
    server, thread = prometheus_client.start_http_server(port, addr="127.0.0.1", registry=registry)
    b = make_breaker("scraped")
    scraped = tripline.Cluster(["x:1", "y:1"], call=lambda a: a, name="scraped-cluster")
    scraped_pipeline = tripline.pipeline(name="scraped-pipeline", bulkhead={"max_concurrent": 7})
    prom = Prometheus(f"127.0.0.1:{port}", tmp_path)
    try:
        prom.until("the closed breaker", 'tripline_breaker_state_code{name="scraped"}', 0.0)
        trip(b)
        prom.until("the open breaker", 'tripline_breaker_state{name="scraped",state="open"}', 1.0)
        prom.until("the compat state", 'circuit_breaker_state{name="scraped"}', 1.0)
        prom.until("the failures", 'circuit_breaker_requests_total{name="scraped",result="failure"}', 4.0)
        prom.until("the cluster", 'tripline_cluster_routable_endpoints{cluster="scraped-cluster"}', 2.0)
        prom.until("the bulkhead", 'tripline_bulkhead_max_concurrent{name="scraped-pipeline"}', 7.0)
        assert scraped.name and scraped_pipeline.name
    finally:
        prom.stop()
        server.shutdown()


# The alert rules shipped for tripline's Rust exporter.
ALERT_RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "tripline-alerts.yml"


def firing(alert: str, name: str) -> str:
    return f'ALERTS{{alertname="{alert}",name="{name}",alertstate="firing"}}'


def test_the_shipped_breaker_alerts_fire_for_a_python_process(tmp_path, make_breaker, clock):
    """One dashboard and one set of alert rules serve Rust and Python
    services: the rules written for the Rust exporter fire, in a real
    Prometheus, on what a Python process exports."""
    registry = CollectorRegistry()
    tripline.prometheus.register(registry)
    port = free_port()
    server, _ = prometheus_client.start_http_server(port, addr="127.0.0.1", registry=registry)
    flapping = make_breaker("alert-flapping")
    probing = make_breaker("alert-probing")
    stuck = make_breaker("alert-stuck", max_half_open_duration="2s")

    def fail() -> None:
        raise ConnectionError("still down")

    def failed_probe() -> None:
        clock.advance(6)  # the open duration (5 s) passes
        with pytest.raises(ConnectionError):
            probing.call(fail)
        assert probing.state == "open"

    prom = Prometheus(f"127.0.0.1:{port}", tmp_path, rules=ALERT_RULES)
    try:
        # A counter's first sample is its baseline: Prometheus's increase()
        # counts from the second on.
        trip(flapping)
        trip(probing)
        failed_probe()
        prom.until("the first trip", 'tripline_breaker_transitions_total{name="alert-flapping",from="closed",to="open"}', 1.0)
        prom.until("the first failed probe", 'tripline_breaker_transitions_total{name="alert-probing",from="half_open",to="open"}', 1.0)
        for _ in range(4):
            clock.advance(6)
            flapping.call(lambda: 1)  # the probe closes it...
            trip(flapping)  # ...and it trips again
        for _ in range(3):
            failed_probe()
        trip(stuck)
        clock.advance(6)
        probe = stuck.try_acquire()  # a probe that never finishes
        assert stuck.state == "half_open"
        clock.advance(3)  # past its 2 s backstop; no call comes to end it
        prom.until("the flapping alert", firing("TriplineBreakerFlapping", "alert-flapping"), 1.0)
        prom.until("the failing-probes alert", firing("TriplineBreakerProbesFailing", "alert-probing"), 1.0)
        prom.until("the stuck half-open alert", firing("TriplineBreakerHalfOpenStuck", "alert-stuck"), 1.0)
        probe.release()
    finally:
        prom.stop()
        server.shutdown()


# What the shipped dashboard and alert rules read. The proxy's, `tripline
# run`'s and the config source's families are not the library's.
DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def deployed_library_names() -> set[str]:
    import re

    text = (DEPLOY / "grafana" / "tripline.json").read_text() + ALERT_RULES.read_text()
    names = set(re.findall(r"tripline_[a-z_]+", text))
    return {n for n in names if not n.startswith(("tripline_proxy_", "tripline_run_", "tripline_config_"))}


def test_every_library_family_the_dashboard_and_alerts_read_is_exported(tmp_path, make_breaker, clock):
    b = make_breaker("deployed", slow_call_duration="1s")
    trip(b)
    p = tripline.pipeline(
        name="deployed-pipeline",
        retry={"max_attempts": 2, "backoff": {"kind": "none"}},
        budget={"ratio": 0.5},
        bulkhead={"max_concurrent": 2},
        clock=clock,
    )
    with pytest.raises(ConnectionError):
        p.call(lambda: (_ for _ in ()).throw(ConnectionError("down")))
    c = tripline.Cluster(
        ["x:1"],
        call=lambda a, payload: None,
        name="deployed-cluster",
        strategy="failback",
        failback={"dir": str(tmp_path / "q"), "fsync": "never"},
        clock=clock,
    )
    t = tripline.AdaptiveThrottle("deployed-throttle")
    text = exposition()
    names = deployed_library_names()
    assert len(names) >= 20, names
    missing = sorted(n for n in names if f"\n{n}{{" not in text and f"\n{n} " not in text)
    assert missing == [], f"read by deploy/ but not exported by the Python package: {missing}"
    assert b and p and c and t
