"""Cluster strategies against real local HTTP servers over TCP."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import tripline


class Node:
    """A real HTTP server on a loopback port answering its own name."""

    def __init__(self, name: str, status: int = 200) -> None:
        node = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                node.hits += 1
                body = node.name.encode()
                self.send_response(node.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.name, self.status, self.hits = name, status, 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()  # the port now refuses connections


class ServerError(Exception):
    pass


def get(address: str, path: str = "/") -> str:
    """One GET to one endpoint; a 5xx raises ServerError."""
    host, port = address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read().decode()
    finally:
        conn.close()
    if response.status >= 500:
        raise ServerError(f"{address} answered {response.status}")
    return body


BREAKER = {"window": {"kind": "count", "size": 4}, "minimum_calls": 2, "failure_rate_threshold": 0.5, "open_duration": "60s"}


@pytest.fixture
def nodes():
    started = [Node(n) for n in ("a", "b", "c")]
    yield started
    for n in started:
        try:
            n.stop()
        except OSError:
            pass


def test_failover_routes_around_a_dead_node(nodes, clock):
    cluster = tripline.Cluster([n.address for n in nodes], call=get, strategy="failover", breaker=BREAKER, clock=clock)
    nodes[0].stop()
    answers = [cluster("/") for _ in range(12)]
    assert set(answers) == {"b", "c"}
    states = {e["id"]: e["state"] for e in cluster.endpoints}
    assert states[nodes[0].address] == "open"  # its breaker tripped on refused connections
    assert states[nodes[1].address] == "closed"


def test_failfast_raises_the_endpoint_error(nodes, clock):
    cluster = tripline.Cluster([nodes[0].address], call=get, strategy="failfast", breaker=BREAKER, clock=clock)
    nodes[0].stop()
    with pytest.raises(ConnectionRefusedError):
        cluster.call("/")
    with pytest.raises(ConnectionRefusedError):
        cluster.call("/")
    with pytest.raises(tripline.ClusterUnavailableError) as info:
        cluster.call("/")  # its one breaker is open: refused locally
    assert isinstance(info.value, tripline.Rejected)


def test_failover_does_not_resend_a_non_idempotent_call_that_reached_a_node(clock):
    bad, good = Node("bad", status=500), Node("good")
    try:
        cluster = tripline.Cluster(
            [bad.address, good.address], call=get, strategy="failover", idempotent=False, balancer="round_robin", breaker=BREAKER, clock=clock
        )
        outcomes = []
        for _ in range(2):
            try:
                outcomes.append(cluster.call("/"))
            except ServerError:
                outcomes.append("error")
        assert sorted(outcomes) == ["error", "good"]
        assert bad.hits == 1 and good.hits == 1  # the 500 was not sent again elsewhere
    finally:
        bad.stop()
        good.stop()


def test_failsafe_serves_the_default_marked_degraded(nodes, clock):
    cluster = tripline.Cluster([nodes[0].address], call=get, strategy="failsafe", default=lambda exc: f"cached ({type(exc).__name__})", breaker=BREAKER, clock=clock)
    fresh = cluster.call("/")
    assert (fresh.value, fresh.degraded, fresh.reason) == ("a", False, None)
    nodes[0].stop()
    served = cluster.call("/")
    assert served.degraded and served.value == "cached (ConnectionRefusedError)"
    assert served.reason == "failed"


def test_broadcast_reaches_every_node_and_reports_failures(nodes, clock):
    cluster = tripline.Cluster([n.address for n in nodes], call=get, strategy="broadcast", breaker=BREAKER, clock=clock)
    assert cluster.call("/") == {n.address: n.name for n in nodes}
    nodes[2].stop()
    with pytest.raises(tripline.BroadcastError) as info:
        cluster.call("/")
    results = info.value.results
    assert results[nodes[0].address] == "a"
    assert isinstance(results[nodes[2].address], ConnectionRefusedError)
    tolerant = tripline.Cluster([n.address for n in nodes], call=get, strategy="broadcast", fail_percent=50, breaker=BREAKER, clock=clock)
    assert len(tolerant.call("/")) == 3


def test_bad_cluster_arguments_name_the_field():
    with pytest.raises(ValueError, match="strategy"):
        tripline.Cluster(["127.0.0.1:1"], call=get, strategy="roulette")
    with pytest.raises(ValueError, match="failback"):
        tripline.Cluster(["127.0.0.1:1"], call=get, strategy="failback")  # no queue directory
    with pytest.raises(ValueError, match="budget"):
        tripline.Cluster(["127.0.0.1:1"], call=get, strategy="failfast", budget={"ratio": 0.1})
    with pytest.raises(TypeError, match="call"):
        tripline.Cluster(["127.0.0.1:1"], call=3)
    with pytest.raises(TypeError, match="endpoints"):
        tripline.Cluster("127.0.0.1:1", call=get)
    with pytest.raises(ValueError, match="balancer"):
        tripline.Cluster(["127.0.0.1:1"], call=get, balancer="fastest")


def test_outlier_detection_ejects_a_node_that_keeps_failing(clock):
    nodes = [Node("a"), Node("b"), Node("bad", status=500)]
    try:
        cluster = tripline.Cluster(
            [n.address for n in nodes],
            call=get,
            strategy="failover",
            # The breakers never trip here: only outlier detection acts.
            breaker={"window": {"kind": "count", "size": 100}, "minimum_calls": 100},
            outlier={
                "interval": 1,
                "base_ejection_time": 30,
                "max_ejection_percent": 100,
                "consecutive_failures": {"threshold": 3, "enforcing_percent": 100},
                "success_rate": None,
            },
            clock=clock,
        )
        for _ in range(9):
            assert cluster.call("/") in ("a", "b")  # failover hides the bad node
        clock.advance(1)
        cluster.analyze()
        ejected = {e["id"]: e["ejected"] for e in cluster.endpoints}
        assert ejected == {nodes[0].address: False, nodes[1].address: False, nodes[2].address: True}
        hits = nodes[2].hits
        for _ in range(6):
            cluster.call("/")
        assert nodes[2].hits == hits  # no traffic while ejected
    finally:
        for n in nodes:
            n.stop()
