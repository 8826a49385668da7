"""`Pipeline.acall` and `tripline.timeout`: the Rust pipeline's async loop
over coroutines on asyncio — retries, Retry-After, budgets, a bulkhead
that queues, timeouts that abandon an attempt, fallback, cancellation.

Backoff waits run on a ManualClock (advanced, never slept). Timeouts fire
on the loop's timer against coroutines that would otherwise wait forever,
so their outcome never depends on the machine's speed."""

from __future__ import annotations

import asyncio
import gc
import inspect
import typing

import pytest

import tripline

pytestmark = pytest.mark.asyncio

NO_WAIT = {"kind": "none"}


class AsyncFlaky:
    """An `async def` that fails `failures` times, then answers."""

    def __init__(self, failures: int, exc: type[BaseException] = ConnectionError) -> None:
        self.failures, self.exc, self.calls = failures, exc, 0

    async def __call__(self, value: str = "ok") -> str:
        self.calls += 1
        await asyncio.sleep(0)
        if self.calls <= self.failures:
            raise self.exc("flaky")
        return value


async def forever(started: asyncio.Event | None = None, finished: list[str] | None = None) -> None:
    """Waits on an event nobody sets; records how it ended."""
    try:
        if started is not None:
            started.set()
        await asyncio.Event().wait()
    finally:
        if finished is not None:
            finished.append("closed")


async def test_async_retries_then_succeeds_as_one_logical_call(make_breaker, clock):
    b = make_breaker()
    p = tripline.pipeline(
        breaker=b, retry={"max_attempts": 3, "backoff": {"kind": "constant", "delay": "100ms"}}, clock=clock
    )
    f = AsyncFlaky(2)
    start = clock.now
    assert await p.acall(f, "pong") == "pong"
    assert f.calls == 3
    assert clock.now - start == pytest.approx(0.2)  # two backoff waits, on the manual clock
    m = b.metrics()
    assert (m.successful, m.failed) == (1, 0)
    assert p.stats()["retry"]["retries"] == 2


async def test_async_gives_up_after_max_attempts_and_honours_retry_after(clock):
    class Throttled(Exception):
        retry_after = 3.0

    p = tripline.pipeline(retry={"max_attempts": 2, "backoff": {"kind": "constant", "delay": "10ms"}}, clock=clock)
    f = AsyncFlaky(5, Throttled)
    start = clock.now
    with pytest.raises(Throttled):
        await p.acall(f)
    assert f.calls == 2
    assert clock.now - start >= 3.0


async def test_async_open_breaker_rejects_without_calling(make_breaker, clock):
    b = make_breaker()
    b.force_open()
    p = tripline.pipeline(breaker=b, retry={"max_attempts": 3}, clock=clock)
    f = AsyncFlaky(0)
    with pytest.raises(tripline.CircuitOpenError):
        await p.acall(f)
    assert f.calls == 0


async def test_per_attempt_timeout_abandons_the_attempt_and_counts_a_failure(make_breaker, clock):
    b = make_breaker()
    p = tripline.pipeline(breaker=b, retry={"max_attempts": 2, "backoff": NO_WAIT}, timeout={"per_attempt": "20ms"})
    finished: list[str] = []
    with pytest.raises(tripline.AttemptTimeoutError) as e:
        await p.acall(forever, None, finished)
    assert isinstance(e.value, TimeoutError)
    assert finished == ["closed", "closed"]  # both attempts abandoned and closed
    assert b.metrics().failed == 1  # one logical call, failed


async def test_overall_deadline_ends_the_call(clock):
    p = tripline.pipeline(retry={"max_attempts": 5, "backoff": NO_WAIT}, timeout={"overall": "30ms"})
    with pytest.raises(tripline.DeadlineExceededError):
        await p.acall(forever)


async def test_fallback_sync_or_async_answers_for_any_error(make_breaker, clock):
    b = make_breaker()
    b.force_open()
    seen: list[BaseException] = []

    async def cached(e: BaseException) -> str:
        seen.append(e)
        await asyncio.sleep(0)
        return "cached"

    assert await tripline.pipeline(breaker=b, fallback=cached, clock=clock).acall(AsyncFlaky(0)) == "cached"
    assert isinstance(seen[0], tripline.CircuitOpenError)
    assert await tripline.pipeline(breaker=b, fallback=lambda e: "sync", clock=clock).acall(AsyncFlaky(0)) == "sync"


async def test_decorating_an_async_def_keeps_its_metadata(clock):
    p = tripline.pipeline(retry={"max_attempts": 2, "backoff": NO_WAIT}, clock=clock)
    f = AsyncFlaky(1)

    @p
    async def fetch(key: str) -> str:
        """Fetches."""
        return await f(key)

    assert await fetch("k") == "k"
    assert fetch.__doc__ == "Fetches." and fetch.__name__ == "fetch"
    assert inspect.iscoroutinefunction(fetch.__wrapped__)
    assert typing.get_type_hints(fetch) == {"key": str, "return": str}
    assert await asyncio.create_task(fetch("t")) == "t"  # a task accepts the awaitable


async def test_bulkhead_queues_then_refuses(clock):
    p = tripline.pipeline(bulkhead={"max_concurrent": 1, "max_queue": 1, "max_wait": "10s"})
    release = asyncio.Event()
    order: list[str] = []

    async def hold(tag: str) -> str:
        order.append(tag)
        await release.wait()
        return tag

    first = asyncio.create_task(p.acall(hold, "first"))
    await asyncio.sleep(0)
    second = asyncio.create_task(p.acall(hold, "second"))
    await asyncio.sleep(0)
    assert p.stats()["bulkhead"]["waiting"] == 1
    with pytest.raises(tripline.BulkheadFullError):
        await p.acall(hold, "third")
    release.set()
    assert await asyncio.gather(first, second) == ["first", "second"]
    assert order == ["first", "second"]
    stats = p.stats()["bulkhead"]
    assert (stats["in_flight"], stats["waiting"], stats["rejected"]) == (0, 0, 1)


async def test_a_thousand_tasks_hold_the_bulkhead_quota(make_breaker):
    b = make_breaker(window={"kind": "count", "size": 100})
    p = tripline.pipeline(breaker=b, bulkhead={"max_concurrent": 10, "max_queue": 1000, "max_wait": "60s"})
    running = peak = 0

    async def work(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        running -= 1
        return i

    results = await asyncio.gather(*(p.acall(work, i) for i in range(1000)))
    assert results == list(range(1000))
    assert peak == 10
    assert b.metrics().successful == 1000
    assert p.stats()["bulkhead"]["admitted"] == 1000


async def test_cancelling_a_running_attempt_is_neutral(make_breaker):
    b = make_breaker()
    p = tripline.pipeline(breaker=b, bulkhead={"max_concurrent": 1, "max_queue": 0})
    started = asyncio.Event()
    finished: list[str] = []
    task = asyncio.create_task(p.acall(forever, started, finished))
    await started.wait()
    assert p.stats()["bulkhead"]["in_flight"] == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == ["closed"]
    m = b.metrics()
    assert (m.successful, m.failed, m.cancelled) == (0, 0, 1)
    assert p.stats()["bulkhead"]["in_flight"] == 0  # the slot came back
    assert await p.acall(AsyncFlaky(0)) == "ok"


async def test_cancelling_during_a_backoff_wait_or_in_the_queue_is_neutral():
    b = tripline.CircuitBreaker("backoff-cancel")  # the real clock: the wait is on the loop
    slow = tripline.pipeline(breaker=b, retry={"max_attempts": 3, "backoff": {"kind": "constant", "delay": "60s"}})
    f = AsyncFlaky(5)
    task = asyncio.create_task(slow.acall(f))
    while f.calls == 0:
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)  # now in the 60 s backoff
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert f.calls == 1  # no attempt after the cancellation
    # As in Rust, the logical call settles its breaker permit with the last
    # attempt that ended (a failure); only an unfinished attempt is neutral.
    assert (b.metrics().failed, b.metrics().cancelled) == (1, 0)

    q = tripline.pipeline(bulkhead={"max_concurrent": 1, "max_queue": 5, "max_wait": "60s"})
    started = asyncio.Event()
    holder = asyncio.create_task(q.acall(forever, started))
    await started.wait()
    queued = asyncio.create_task(q.acall(AsyncFlaky(0)))
    await asyncio.sleep(0)
    assert q.stats()["bulkhead"]["waiting"] == 1
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert q.stats()["bulkhead"]["waiting"] == 0
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    assert q.stats()["bulkhead"]["in_flight"] == 0


async def test_wait_for_cancels_through_the_pipeline(make_breaker):
    b = make_breaker()
    p = tripline.pipeline(breaker=b)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(p.acall(forever), 0.02)
    assert b.metrics().cancelled == 1 and b.metrics().failed == 0


async def test_an_unawaited_call_leaves_nothing_behind(make_breaker):
    b = make_breaker()
    p = tripline.pipeline(breaker=b)
    call = p.acall(AsyncFlaky(0))
    del call
    gc.collect()
    assert b.metrics().successful == 0
    assert await p.acall(AsyncFlaky(0)) == "ok"


async def test_an_awaited_call_cannot_be_awaited_again(clock):
    call = tripline.pipeline(clock=clock).acall(AsyncFlaky(0))
    assert await call == "ok"
    with pytest.raises(RuntimeError, match="already awaited"):
        await call


async def test_nested_pipelines_await_each_other(clock):
    inner = tripline.pipeline(retry={"max_attempts": 2, "backoff": NO_WAIT}, timeout={"per_attempt": "5s"})
    outer = tripline.pipeline(timeout={"per_attempt": "5s"})
    f = AsyncFlaky(1)

    async def via_inner() -> str:
        return await inner.acall(f, "nested")

    assert await outer.acall(via_inner) == "nested"


async def test_timeout_policy():
    t = tripline.timeout("20ms")
    assert t.after == pytest.approx(0.02)
    finished: list[str] = []
    with pytest.raises(tripline.AttemptTimeoutError):
        await t.acall(forever, None, finished)
    assert finished == ["closed"]

    @tripline.timeout(5)
    async def quick(x: int) -> int:
        """Quick."""
        await asyncio.sleep(0)
        return x + 1

    assert await quick(1) == 2 and quick.__doc__ == "Quick."


async def test_timeout_policy_bad_input():
    with pytest.raises(ValueError, match="after"):
        tripline.timeout(0)
    with pytest.raises((TypeError, ValueError), match="after"):
        tripline.timeout("soon")
    with pytest.raises(TypeError, match="async def"):
        tripline.timeout(1)(lambda: None)


async def test_an_awaited_futures_exception_fails_only_its_own_attempt(clock):
    """asyncio throws a failed future's exception into the awaiting task:
    it belongs to the attempt that awaited it, not to the retry started
    after it in the same step."""
    p = tripline.pipeline(retry={"max_attempts": 2, "backoff": NO_WAIT}, clock=clock)
    started: list[int] = []

    async def call() -> str:
        started.append(len(started) + 1)
        if len(started) == 1:
            loop = asyncio.get_running_loop()
            failed: asyncio.Future[None] = loop.create_future()
            loop.call_soon(failed.set_exception, ConnectionResetError("reset"))
            await failed
        return "second"

    assert await p.acall(call) == "second"
    assert started == [1, 2]
