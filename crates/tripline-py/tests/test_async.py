"""`async def` decorators and `async with`, on asyncio."""

from __future__ import annotations

import asyncio
import gc
import inspect
import typing

import pytest

import tripline
from conftest import trip

pytestmark = pytest.mark.asyncio


async def test_async_decorator_awaits_and_records(make_breaker):
    b = make_breaker()

    @b
    async def fetch(key: str) -> int:
        """Fetches."""
        await asyncio.sleep(0)
        return len(key)

    assert await fetch("abcd") == 4
    assert fetch.__name__ == "fetch" and fetch.__doc__ == "Fetches."
    assert inspect.iscoroutinefunction(fetch.__wrapped__)
    assert typing.get_type_hints(fetch) == {"key": str, "return": int}
    assert b.metrics().successful == 1


async def test_async_failure_and_rejection(make_breaker):
    b = make_breaker()

    @b
    async def boom() -> None:
        await asyncio.sleep(0)
        raise ConnectionError("down")

    for _ in range(4):
        with pytest.raises(ConnectionError):
            await boom()
    assert b.state == "open"
    with pytest.raises(tripline.CircuitOpenError):
        await boom()


async def test_create_task_and_gather_accept_guarded_calls(make_breaker):
    b = make_breaker()

    @b
    async def one() -> int:
        return 1

    assert await asyncio.create_task(one()) == 1
    assert await asyncio.gather(one(), one()) == [1, 1]
    assert await asyncio.wait_for(one(), 1) == 1


async def test_cancellation_is_neutral(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(5)
    started = asyncio.Event()

    @b
    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(hang())
    await started.wait()
    assert b.state == "half_open"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    m = b.metrics()
    assert (m.cancelled, m.failed) == (1, 4)  # the four that tripped it
    # The probe slot was returned: the next call probes and closes.
    assert await b.call(asyncio.sleep, 0) is None
    assert b.state == "closed"


async def test_unawaited_call_releases_its_permit(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(5)

    @b
    async def f() -> None:
        return None

    aw = f()  # admitted (the probe): the permit is held by the awaitable
    assert b.state == "half_open"
    aw.close()
    del aw
    gc.collect()
    m = b.metrics()
    assert (m.successful, m.cancelled) == (0, 1)
    assert b.try_acquire().is_probe


async def test_rejected_call_raises_when_awaited(make_breaker):
    b = make_breaker()
    b.force_open()
    created = []

    @b
    async def f() -> None:
        created.append(1)

    aw = f()
    with pytest.raises(tripline.CircuitOpenError):
        await aw
    assert created == []


async def test_dropped_awaitable_releases_its_permit(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(5)

    @b
    async def waits() -> None:
        await asyncio.sleep(3600)

    aw = waits()  # the probe permit is taken
    fut = aw.send(None)
    assert fut is not None and b.state == "half_open"
    del aw, fut
    gc.collect()
    assert b.metrics().cancelled == 1
    assert b.try_acquire().is_probe


async def test_async_with(make_breaker):
    b = make_breaker()
    async with b as permit:
        assert isinstance(permit, tripline.Permit)
        await asyncio.sleep(0)
    with pytest.raises(TimeoutError):
        async with b:
            raise TimeoutError
    m = b.metrics()
    assert (m.successful, m.failed) == (1, 1)


async def test_async_with_in_concurrent_tasks_settles_each_permit(make_breaker):
    b = make_breaker(window={"kind": "count", "size": 100}, minimum_calls=100)

    async def worker(i: int) -> None:
        async with b:
            await asyncio.sleep(0)
            if i % 2:
                raise ValueError(i)

    results = await asyncio.gather(*(worker(i) for i in range(50)), return_exceptions=True)
    assert sum(isinstance(r, ValueError) for r in results) == 25
    m = b.metrics()
    assert (m.successful, m.failed) == (25, 25)


async def test_a_thousand_concurrent_tasks(make_breaker):
    b = make_breaker(window={"kind": "count", "size": 1000}, minimum_calls=1000)

    @b
    async def work(i: int) -> int:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        if i % 10 == 0:
            raise TimeoutError
        return i

    results = await asyncio.gather(*(work(i) for i in range(1000)), return_exceptions=True)
    assert sum(isinstance(r, TimeoutError) for r in results) == 100
    m = b.metrics()
    assert (m.successful, m.failed, m.cancelled, m.window_calls) == (900, 100, 0, 1000)
    assert b.state == "closed"


async def test_call_with_async_function(make_breaker):
    b = make_breaker()

    async def add(a: int, b_: int) -> int:
        return a + b_

    assert await b.call(add, 2, b_=3) == 5


async def test_classify_sees_async_results(make_breaker):
    b = make_breaker(classify=lambda r: "failure" if r == "bad" else "success")

    @b
    async def answer(x: str) -> str:
        return x

    await answer("bad")
    await answer("good")
    m = b.metrics()
    assert (m.successful, m.failed) == (1, 1)
