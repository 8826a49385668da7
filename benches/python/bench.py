#!/usr/bin/env python3
"""tripline's Python package against the Python breakers people use.

Measures, in one process and one run, the overhead each breaker adds to a
call: the closed path of the decorator on a `def` (tripline, pybreaker,
circuitbreaker) and on an `async def` (tripline, aiobreaker, purgatory),
the rejected path, one breaker called from 8 threads, and the process's
RSS across 1,000,000 guarded calls (flat: nothing leaks).

    pip install ./crates/tripline-py pybreaker circuitbreaker aiobreaker purgatory
    python benches/python/bench.py            # ~1 minute
    python benches/python/bench.py --quick    # fewer rounds

Each figure is the best of several rounds (the least disturbed by other
work on the machine), in nanoseconds per call; "overhead" subtracts the
bare call measured the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import platform
import resource
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Optional

import tripline


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def per_call_ns(fn: Callable[[int], None], n: int, rounds: int) -> float:
    """Best of `rounds` runs of `fn(n)` (a loop of n calls), ns per call."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        t = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t) / n)
    return best


def sync_loop(f: Callable[[int], int]) -> Callable[[int], None]:
    def run(n: int) -> None:
        for i in range(n):
            f(i)

    return run


def rejected_loop(f: Callable[[int], int], errors: Any) -> Callable[[int], None]:
    def run(n: int) -> None:
        for i in range(n):
            try:
                f(i)
            except errors:
                pass

    return run


def async_loop(f: Callable[[int], Awaitable[int]]) -> Callable[[int], None]:
    async def body(n: int) -> None:
        for i in range(n):
            await f(i)

    def run(n: int) -> None:
        asyncio.run(body(n))

    return run


def async_rejected_loop(f: Callable[[int], Awaitable[int]], errors: Any) -> Callable[[int], None]:
    async def body(n: int) -> None:
        for i in range(n):
            try:
                await f(i)
            except errors:
                pass

    def run(n: int) -> None:
        asyncio.run(body(n))

    return run


def plain(x: int) -> int:
    return x


async def aplain(x: int) -> int:
    return x


def failing(x: int) -> int:
    raise ConnectionError("down")


async def afailing(x: int) -> int:
    raise ConnectionError("down")


def open_by_failures(f: Callable[[int], Any], times: int = 20) -> None:
    for i in range(times):
        try:
            f(i)
        except Exception:
            pass


async def aopen_by_failures(f: Callable[[int], Awaitable[Any]], times: int = 20) -> None:
    for i in range(times):
        try:
            await f(i)
        except Exception:
            pass


def peers_sync() -> dict[str, tuple[Optional[Callable[[int], int]], Optional[Callable[[int], None]]]]:
    """name -> (closed decorated function, rejected loop)."""
    out: dict[str, Any] = {}
    b = tripline.CircuitBreaker("bench")
    rb = tripline.CircuitBreaker("bench-rejected")
    rb.force_open()
    out["tripline"] = (b(plain), rejected_loop(rb(plain), tripline.CircuitOpenError))
    try:
        import pybreaker

        pb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
        pr = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
        pr.open()
        out["pybreaker"] = (pb(plain), rejected_loop(pr(plain), pybreaker.CircuitBreakerError))
    except ImportError:
        pass
    try:
        import circuitbreaker

        cb = circuitbreaker.CircuitBreaker(failure_threshold=5, recovery_timeout=3600)
        cr = circuitbreaker.CircuitBreaker(failure_threshold=5, recovery_timeout=3600, expected_exception=ConnectionError)
        cr_fail = cr(failing)
        open_by_failures(cr_fail)
        out["circuitbreaker"] = (cb(plain), rejected_loop(cr(plain), circuitbreaker.CircuitBreakerError))
    except ImportError:
        pass
    return out


def peers_async() -> dict[str, tuple[Callable[[int], Awaitable[int]], Callable[[int], None]]]:
    out: dict[str, Any] = {}
    b = tripline.CircuitBreaker("abench")
    rb = tripline.CircuitBreaker("abench-rejected")
    rb.force_open()
    out["tripline"] = (b(aplain), async_rejected_loop(rb(aplain), tripline.CircuitOpenError))
    try:
        import aiobreaker

        ab = aiobreaker.CircuitBreaker(fail_max=5, timeout_duration=datetime.timedelta(hours=1))
        ar = aiobreaker.CircuitBreaker(fail_max=5, timeout_duration=datetime.timedelta(hours=1))
        ar.open()
        out["aiobreaker"] = (ab(aplain), async_rejected_loop(ar(aplain), aiobreaker.CircuitBreakerError))
    except ImportError:
        pass
    try:
        import purgatory
        from purgatory.domain.model import OpenedState

        factory = purgatory.AsyncCircuitBreakerFactory(default_threshold=5, default_ttl=3600)
        rfactory = purgatory.AsyncCircuitBreakerFactory(default_threshold=5, default_ttl=3600)
        rfail = rfactory("rejected")(afailing)
        asyncio.run(aopen_by_failures(rfail))
        out["purgatory"] = (factory("closed")(aplain), async_rejected_loop(rfactory("rejected")(aplain), OpenedState))
    except ImportError:
        pass
    return out


def threads_per_call_ns(f: Callable[[int], int], threads: int, n: int) -> float:
    """Wall time per call, all threads' calls together."""
    barrier = threading.Barrier(threads + 1)

    def body() -> None:
        barrier.wait()
        for i in range(n):
            f(i)

    ts = [threading.Thread(target=body) for _ in range(threads)]
    for t in ts:
        t.start()
    start = time.perf_counter_ns()
    barrier.wait()
    for t in ts:
        t.join()
    return (time.perf_counter_ns() - start) / (threads * n)


def leak_forms() -> dict[str, Callable[[int], None]]:
    """Each wrapping form as a loop of n calls, for the RSS measurement."""
    b = tripline.CircuitBreaker("leak")
    failing_breaker = tripline.CircuitBreaker("leak-failing")
    failing_breaker.disable()  # records every failure, never opens
    rejecting = tripline.CircuitBreaker("leak-rejected")
    rejecting.force_open()
    guarded, aguarded, failing_guarded = b(plain), b(aplain), failing_breaker(failing)

    def with_block(n: int) -> None:
        for _ in range(n):
            with b:
                pass

    def permits(n: int) -> None:
        for i in range(n):
            failing_breaker.try_acquire().record(success=bool(i & 1))

    def dropped_permits(n: int) -> None:
        for _ in range(n):
            b.try_acquire()

    async def async_with(n: int) -> None:
        for _ in range(n):
            async with b:
                pass

    return {
        "@breaker def": sync_loop(guarded),
        "@breaker def, raising": rejected_loop(failing_guarded, ConnectionError),
        "@breaker async def": async_loop(aguarded),
        "with breaker": with_block,
        "async with breaker": lambda n: asyncio.run(async_with(n)),
        "try_acquire + record": permits,
        "try_acquire, dropped": dropped_permits,
        "rejected (CircuitOpenError)": rejected_loop(rejecting(plain), tripline.CircuitOpenError),
    }


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    args = parser.parse_args()
    n, rounds = (200_000, 3) if args.quick else (1_000_000, 7)
    slow_n = n // 5  # the pure-Python peers are ~20x slower

    print(f"CPU: {cpu_model()}")
    print(f"Python: {platform.python_implementation()} {platform.python_version()} ({sys.platform})")
    versions = []
    for name in ("pybreaker", "circuitbreaker", "aiobreaker", "purgatory"):
        try:
            from importlib.metadata import version

            versions.append(f"{name} {version(name)}")
        except Exception:
            pass
    print("peers: " + (", ".join(versions) or "none installed"))
    print()

    # First, while the process holds nothing else (the peers' own memory
    # would blur it): RSS must stay flat across a million calls.
    print("RSS across 1,000,000 calls of each form (after 100,000 to warm up):")
    for form, run in leak_forms().items():
        run(100_000)
        gc.collect()
        before = rss_kib()
        run(1_000_000)
        gc.collect()
        after = rss_kib()
        print(f"  {form:<28} {before} KiB -> {after} KiB ({after - before:+d} KiB)")
    print()

    bare = per_call_ns(sync_loop(plain), n, rounds)
    print(f"sync, closed path (bare call {bare:.0f} ns)")
    print(f"  {'breaker':<16} {'ns/call':>9} {'overhead':>9} {'rejected':>9}")
    sync = peers_sync()
    results: dict[str, tuple[float, float]] = {}
    for name, (closed, rejected) in sync.items():
        count = n if name == "tripline" else slow_n
        t = per_call_ns(sync_loop(closed), count, rounds)  # type: ignore[arg-type]
        r = per_call_ns(rejected, count, rounds)  # type: ignore[arg-type]
        results[name] = (t - bare, r)
        print(f"  {name:<16} {t:9.0f} {t - bare:9.0f} {r:9.0f}")
    if len(results) > 1:
        peers = {k: v for k, v in results.items() if k != "tripline"}
        closed_ratio = results["tripline"][0] / min(v[0] for v in peers.values())
        rejected_ratio = results["tripline"][1] / min(v[1] for v in peers.values())
        print(f"  tripline / fastest peer: closed overhead {closed_ratio:.3f}x, rejected {rejected_ratio:.3f}x")
    # What any breaker that raises pays at least: a C function raising an
    # exception that the loop catches (a dict miss), with no breaker at all.
    floor = per_call_ns(rejected_loop({}.__getitem__, KeyError), n, rounds)
    print(f"  floor of a rejection: a C function raising KeyError, caught: {floor:.0f} ns/call")
    print(f"  tripline's rejected path above that floor: {results['tripline'][1] - floor:.0f} ns")
    print()

    abare = per_call_ns(async_loop(aplain), n, rounds)
    print(f"async, closed path (bare awaited coroutine {abare:.0f} ns)")
    print(f"  {'breaker':<16} {'ns/call':>9} {'overhead':>9} {'rejected':>9}")
    aresults: dict[str, tuple[float, float]] = {}
    for name, (closed, rejected) in peers_async().items():
        count = n if name == "tripline" else slow_n
        t = per_call_ns(async_loop(closed), count, rounds)
        r = per_call_ns(rejected, count, rounds)
        aresults[name] = (t - abare, r)
        print(f"  {name:<16} {t:9.0f} {t - abare:9.0f} {r:9.0f}")
    if len(aresults) > 1:
        peers = {k: v for k, v in aresults.items() if k != "tripline"}
        closed_ratio = aresults["tripline"][0] / min(v[0] for v in peers.values())
        rejected_ratio = aresults["tripline"][1] / min(v[1] for v in peers.values())
        print(f"  tripline / fastest peer: closed overhead {closed_ratio:.3f}x, rejected {rejected_ratio:.3f}x")
    print()

    guarded = tripline.CircuitBreaker("threads")(plain)
    one = min(threads_per_call_ns(guarded, 1, n // 4) for _ in range(3))
    eight = min(threads_per_call_ns(guarded, 8, n // 8) for _ in range(3))
    print(f"one breaker from threads: 1 thread {one:.0f} ns/call, 8 threads {eight:.0f} ns/call (wall time per call)")


if __name__ == "__main__":
    main()
