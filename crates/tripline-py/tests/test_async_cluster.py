"""`Cluster.acall`: the Rust cluster strategies over coroutines, against
real HTTP servers the test starts on the loop (asyncio.start_server)."""

from __future__ import annotations

import asyncio
from typing import Optional

import pytest
import pytest_asyncio

import tripline

pytestmark = pytest.mark.asyncio

BREAKER = {"window": {"kind": "count", "size": 4}, "minimum_calls": 2, "failure_rate_threshold": 0.5, "open_duration": "60s"}


class AsyncNode:
    """A real HTTP/1.0 server on a loopback port answering its own name;
    `gate` holds every answer until set; `closed` counts clients that hung
    up before their answer (abandoned calls)."""

    def __init__(self, name: str, status: int = 200, gate: Optional[asyncio.Event] = None) -> None:
        self.name, self.status, self.gate = name, status, gate
        self.hits = self.closed = 0
        self.server: Optional[asyncio.AbstractServer] = None
        self.address = ""

    async def start(self) -> "AsyncNode":
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.hits += 1
            if self.gate is not None:
                gate = asyncio.ensure_future(self.gate.wait())
                eof = asyncio.ensure_future(reader.read())
                done, _ = await asyncio.wait({gate, eof}, return_when=asyncio.FIRST_COMPLETED)
                if eof in done:  # the client hung up first
                    gate.cancel()
                    self.closed += 1
                    return
                eof.cancel()
            body = self.name.encode()
            writer.write(b"HTTP/1.0 %d X\r\nContent-Length: %d\r\n\r\n%s" % (self.status, len(body), body))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


class ServerError(Exception):
    pass


async def aget(address: str, path: str = "/") -> str:
    """One GET to one endpoint over asyncio; a 5xx raises ServerError."""
    host, port = address.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        await writer.drain()
        response = await reader.read()
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if status >= 500:
        raise ServerError(f"{address} answered {status}")
    return body.decode()


@pytest_asyncio.fixture
async def nodes():
    started = [await AsyncNode(n).start() for n in ("a", "b", "c")]
    yield started
    for n in started:
        await n.stop()


async def test_async_failover_routes_around_a_dead_node(nodes, clock):
    cluster = tripline.Cluster([n.address for n in nodes], call=aget, strategy="failover", breaker=BREAKER, clock=clock)
    await nodes[0].stop()
    answers = [await cluster.acall("/") for _ in range(12)]
    assert set(answers) == {"b", "c"}
    states = {e["id"]: e["state"] for e in cluster.endpoints}
    assert states[nodes[0].address] == "open"
    assert cluster.stats()["failover"]["failovers"] >= 1


async def test_async_failfast_raises_the_endpoints_failure(clock):
    node = await AsyncNode("x", status=503).start()
    try:
        cluster = tripline.Cluster([node.address], call=aget, strategy="failfast", breaker=BREAKER, clock=clock)
        with pytest.raises(ServerError):
            await cluster.acall()
        assert node.hits == 1
    finally:
        await node.stop()


async def test_async_failsafe_serves_the_default_marked_degraded(nodes, clock):
    async def down(address: str) -> str:
        raise ConnectionRefusedError(address)

    cluster = tripline.Cluster([nodes[0].address], call=aget, strategy="failsafe", default="cached", clock=clock)
    fresh = await cluster.acall()
    assert (fresh.value, fresh.degraded, fresh.reason) == ("a", False, None)
    broken = tripline.Cluster([nodes[0].address], call=down, strategy="failsafe", default=lambda e: f"stale ({type(e).__name__})", clock=clock)
    served = await broken.acall()
    assert served.degraded and served.reason == "failed"
    assert served.value == "stale (ConnectionRefusedError)"


async def test_async_broadcast_calls_every_endpoint_at_once(nodes, clock):
    cluster = tripline.Cluster([n.address for n in nodes], call=aget, strategy="broadcast", clock=clock)
    answers = await cluster.acall("/")
    assert sorted(answers.values()) == ["a", "b", "c"]
    assert all(n.hits == 1 for n in nodes)


async def test_async_forking_takes_the_first_answer_and_abandons_the_slow_fork(clock):
    gate = asyncio.Event()
    slow = await AsyncNode("slow", gate=gate).start()
    fast = await AsyncNode("fast").start()
    try:
        cluster = tripline.Cluster([slow.address, fast.address], call=aget, strategy="forking", forks=2, clock=clock)
        for _ in range(3):
            assert await cluster.acall() == "fast"
        # Every slow fork was closed: its connection hung up, not answered.
        for _ in range(100):
            if slow.closed == 3:
                break
            await asyncio.sleep(0.01)
        assert (slow.hits, slow.closed) == (3, 3)
        # A lost fork is no failure of its endpoint.
        states = {e["id"]: e["state"] for e in cluster.endpoints}
        assert states[slow.address] == "closed"
    finally:
        gate.set()
        await slow.stop()
        await fast.stop()


async def test_async_forking_returns_the_last_failure_when_every_fork_fails(clock):
    down = [await AsyncNode(n, status=500).start() for n in ("p", "q")]
    try:
        cluster = tripline.Cluster([n.address for n in down], call=aget, strategy="forking", forks=2, clock=clock)
        with pytest.raises(ServerError):
            await cluster.acall()
        assert all(n.hits == 1 for n in down)
    finally:
        for n in down:
            await n.stop()


async def test_cancelling_a_cluster_call_is_neutral(clock):
    gate = asyncio.Event()
    node = await AsyncNode("held", gate=gate).start()
    try:
        cluster = tripline.Cluster([node.address], call=aget, strategy="failover", breaker=BREAKER, clock=clock)
        task = asyncio.create_task(cluster.acall())
        while node.hits == 0:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):
            if node.closed:
                break
            await asyncio.sleep(0.01)
        assert node.closed == 1
        gate.set()
        for _ in range(3):  # no failure was recorded: the breaker stays closed
            assert await cluster.acall() == "held"
        assert cluster.endpoints[0]["state"] == "closed"
    finally:
        gate.set()
        await node.stop()


async def test_a_thousand_concurrent_cluster_calls(nodes, clock):
    cluster = tripline.Cluster([n.address for n in nodes], call=aget, strategy="failover", clock=clock)
    answers = await asyncio.gather(*(cluster.acall("/") for _ in range(1000)))
    assert set(answers) == {"a", "b", "c"} and len(answers) == 1000
    assert sum(n.hits for n in nodes) == 1000
