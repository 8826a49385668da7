"""Many threads on one breaker: exact counts, the probe quota held."""

from __future__ import annotations

import threading

import tripline
from conftest import trip


def run_threads(n: int, target) -> None:
    barrier = threading.Barrier(n)

    def body(i: int) -> None:
        barrier.wait()
        target(i)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_eight_threads_count_exactly(make_breaker):
    b = make_breaker(window={"kind": "count", "size": 1000}, minimum_calls=1000)

    @b
    def work(i: int) -> int:
        if i % 4 == 0:
            raise TimeoutError
        return i

    def loop(t: int) -> None:
        for i in range(2000):
            try:
                work(i)
            except TimeoutError:
                pass

    run_threads(8, loop)
    m = b.metrics()
    assert (m.successful, m.failed, m.rejected) == (12000, 4000, 0)


def test_eight_threads_respect_the_half_open_quota(make_breaker, clock):
    b = make_breaker(half_open={"policy": "permits", "calls": 3, "failure_rate_threshold": 0.5})
    trip(b)
    clock.advance(5)
    admitted: list[tripline.Permit] = []
    rejected = []
    lock = threading.Lock()

    def grab(_: int) -> None:
        for _ in range(100):
            try:
                p = b.try_acquire()
            except tripline.CircuitOpenError:
                with lock:
                    rejected.append(1)
            else:
                with lock:
                    admitted.append(p)

    run_threads(8, grab)
    assert len(admitted) == 3 and all(p.is_probe for p in admitted)
    assert len(rejected) == 797
    for p in admitted:
        p.record(success=True)
    assert b.state == "closed"


def test_threads_with_with_blocks(make_breaker):
    b = make_breaker(window={"kind": "count", "size": 100}, minimum_calls=100, failure_rate_threshold=1.0)

    def loop(t: int) -> None:
        for i in range(500):
            try:
                with b:
                    if (t + i) % 2:
                        raise ValueError
            except ValueError:
                pass

    run_threads(8, loop)
    m = b.metrics()
    assert (m.successful, m.failed) == (2000, 2000)
