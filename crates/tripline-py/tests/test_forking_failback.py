"""The forking and failback strategies, sync, against real local servers:
forking races HTTP nodes on worker threads; failback delivers payloads
over TCP to a collector, queueing them durably on disk while it is down."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
import time
from pathlib import Path

import pytest

import tripline
from test_cluster import Node, ServerError, get


class SlowNode(Node):
    """A node whose answers wait for `release`."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.release = threading.Event()
        handler = self.server.RequestHandlerClass
        original = handler.do_GET  # type: ignore[attr-defined]
        release = self.release

        def do_get(h: object) -> None:
            release.wait(10)
            original(h)

        handler.do_GET = do_get  # type: ignore[attr-defined]


def test_sync_forking_takes_the_fast_answer_without_waiting_for_the_slow_one(clock):
    slow, fast = SlowNode("slow"), Node("fast")
    try:
        cluster = tripline.Cluster([slow.address, fast.address], call=get, strategy="forking", forks=2, clock=clock)
        assert cluster.strategy == "forking"
        start = time.monotonic()
        assert cluster() == "fast"
        # The slow fork is still held by its server: the call did not wait.
        assert time.monotonic() - start < 5
        assert not slow.release.is_set()
        states = {e["id"]: e["state"] for e in cluster.endpoints}
        assert states[slow.address] == "closed"  # a lost fork is no failure
    finally:
        slow.release.set()
        slow.stop()
        fast.stop()


def test_sync_forking_fails_with_the_last_failure_and_respects_forks(clock):
    down = [Node(n, status=500) for n in ("p", "q", "r")]
    try:
        cluster = tripline.Cluster([n.address for n in down], call=get, strategy="forking", forks=2, clock=clock)
        with pytest.raises(ServerError):
            cluster()
        assert sum(n.hits for n in down) == 2  # two forks, not three
    finally:
        for n in down:
            n.stop()


def test_forking_bad_input_names_the_field(clock):
    with pytest.raises(ValueError, match="forks"):
        tripline.Cluster(["a:1"], call=get, strategy="forking", forks=0)
    with pytest.raises(ValueError, match="forks"):
        tripline.Cluster(["a:1"], call=get, strategy="forking", forks=33)
    with pytest.raises(ValueError, match="strategy"):
        tripline.Cluster(["a:1"], call=get, strategy="hedging")


class Collector:
    """A real TCP server storing every payload it receives; `up` decides
    whether it listens (down: the port refuses connections)."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        collector = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                collector.received.append(self.rfile.read())

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.address = f"127.0.0.1:{self.port}"
        self.server.server_close()  # down until started

    def start(self) -> None:
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), self.server.RequestHandlerClass)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, n: int) -> None:
        deadline = time.monotonic() + 5
        while len(self.received) < n and time.monotonic() < deadline:
            time.sleep(0.01)


def send(address: str, payload: bytes) -> None:
    """Delivers one payload over TCP (raises ConnectionRefusedError when down)."""
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(payload)


def failback_cluster(address: str, tmp_path: Path, clock: tripline.ManualClock, **overrides: object) -> tripline.Cluster:
    config: dict[str, object] = {"dir": str(tmp_path / "queue"), "fsync": "never", "max_retries": 3,
                                 "backoff": {"kind": "constant", "delay": "1s"}}
    config.update(overrides)
    return tripline.Cluster([address], call=send, strategy="failback", failback=config, clock=clock)


def test_failback_queues_while_down_and_delivers_later(tmp_path, clock):
    collector = Collector()
    cluster = failback_cluster(collector.address, tmp_path, clock)
    assert cluster.call(b"points=30") == "queued"
    assert cluster.pending == 1
    collector.start()
    try:
        assert cluster.run_due()["delivered"] == 0  # not due yet
        clock.advance(1)
        assert cluster.run_due() == {"delivered": 1, "retried": 0, "gave_up": 0, "pending": 0}
        collector.wait_for(1)
        assert collector.received == [b"points=30"]
        assert cluster.call(b"points=5") == "delivered"
        collector.wait_for(2)
        stats = cluster.stats()["failback"]
        assert (stats["queued"], stats["delivered_later"], stats["delivered_first"]) == (1, 1, 1)
    finally:
        collector.stop()


def test_failback_queue_is_bounded(tmp_path, clock):
    collector = Collector()  # down throughout
    cluster = failback_cluster(collector.address, tmp_path, clock, max_entries=2, max_bytes=1000)
    assert cluster.call(b"1") == "queued"
    assert cluster.call(b"2") == "queued"
    with pytest.raises(tripline.FailbackFullError, match="max_entries") as e:
        cluster.call(b"3")
    assert isinstance(e.value, tripline.Rejected)
    with pytest.raises(tripline.FailbackFullError, match="max_bytes"):
        failback_cluster(collector.address, tmp_path / "big", clock, max_bytes=4).call(b"12345")
    assert cluster.pending == 2 and cluster.stats()["failback"]["refused"] == 1


def test_failback_gives_up_to_dead_letters_and_survives_a_restart(tmp_path, clock):
    collector = Collector()
    cluster = failback_cluster(collector.address, tmp_path, clock, max_retries=2)
    assert cluster.call(b"kept") == "queued"
    for _ in range(3):
        clock.advance(1)
        cluster.run_due()
    assert cluster.pending == 0
    assert cluster.dead_letters() == [b"kept"]
    assert cluster.call(b"replayed") == "queued"
    del cluster
    reopened = failback_cluster(collector.address, tmp_path, clock, max_retries=2)
    assert reopened.pending == 1  # replayed from the log
    collector.start()
    try:
        clock.advance(1)
        assert reopened.run_due()["delivered"] == 1
        collector.wait_for(1)
        assert collector.received == [b"replayed"]
    finally:
        collector.stop()


def test_failback_bad_input_names_the_field(tmp_path, clock):
    with pytest.raises(ValueError, match="dir"):
        tripline.Cluster(["a:1"], call=send, strategy="failback")
    with pytest.raises(ValueError, match="max_entries"):
        failback_cluster("a:1", tmp_path, clock, max_entries=0)
    with pytest.raises(ValueError, match="max_retries"):
        failback_cluster("a:1", tmp_path, clock, max_retries=0)
    with pytest.raises(ValueError, match="bogus"):
        failback_cluster("a:1", tmp_path, clock, bogus=1)
    cluster = failback_cluster("a:1", tmp_path, clock)
    with pytest.raises(TypeError, match="payload"):
        cluster.call("text")
    with pytest.raises(ValueError, match="failback"):
        tripline.Cluster(["a:1"], call=send, strategy="failover", failback={"dir": str(tmp_path)})
    with pytest.raises(ValueError, match="delivery queue"):
        tripline.Cluster(["a:1"], call=send, strategy="failover").run_due()

    async def adeliver(address: str, payload: bytes) -> None:
        pass

    with pytest.raises(TypeError, match="def"):
        tripline.Cluster(["a:1"], call=adeliver, strategy="failback", failback={"dir": str(tmp_path / "q2")})


def test_failback_on_asyncio(tmp_path, clock):
    collector = Collector()
    cluster = failback_cluster(collector.address, tmp_path, clock, poll_interval="5ms")

    async def main() -> None:
        assert await cluster.acall(b"async") == "queued"
        collector.start()
        clock.advance(1)
        runner = asyncio.create_task(cluster.run_failback())
        for _ in range(500):
            if cluster.pending == 0:
                break
            await asyncio.sleep(0.01)
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner

    try:
        asyncio.run(main())
        collector.wait_for(1)
        assert collector.received == [b"async"]
    finally:
        collector.stop()
