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

    def __init__(self, target: str, tmp: Path) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("the `prometheus` binary is missing: install the Debian package prometheus (scripts/install-deps)")
        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            f"scrape_configs:\n  - job_name: python\n    static_configs:\n      - targets: ['{target}']\n"
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
    prom = Prometheus(f"127.0.0.1:{port}", tmp_path)
    try:
        prom.until("the closed breaker", 'tripline_breaker_state_code{name="scraped"}', 0.0)
        trip(b)
        prom.until("the open breaker", 'tripline_breaker_state{name="scraped",state="open"}', 1.0)
        prom.until("the compat state", 'circuit_breaker_state{name="scraped"}', 1.0)
        prom.until("the failures", 'circuit_breaker_requests_total{name="scraped",result="failure"}', 4.0)
    finally:
        prom.stop()
        server.shutdown()
