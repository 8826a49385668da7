"""Each way of wrapping a call: decorator, `with`, `call`, permits."""

from __future__ import annotations

import gc
import functools
import inspect
import typing

import pytest

import tripline
from conftest import trip


def test_decorator_keeps_metadata_and_hints(make_breaker):
    b = make_breaker()

    @b
    def lookup(key: str, default: int = 0) -> int:
        """Finds a key."""
        return len(key) + default

    assert lookup("abc", default=1) == 4
    assert lookup.__name__ == "lookup"
    assert lookup.__doc__ == "Finds a key."
    assert lookup.__wrapped__ is not None
    assert typing.get_type_hints(lookup) == {"key": str, "default": int, "return": int}
    assert inspect.signature(lookup) == inspect.signature(lookup.__wrapped__)
    assert list(inspect.signature(lookup).parameters) == ["key", "default"]
    assert lookup.breaker is b
    assert b.metrics().successful == 1


def test_decorator_on_methods(make_breaker):
    b = make_breaker()

    class Client:
        def __init__(self) -> None:
            self.base = 10

        @b
        def get(self, n: int) -> int:
            return self.base + n

    assert Client().get(5) == 15
    assert Client.get.__name__ == "get"


def test_decorator_rejects_when_open(make_breaker):
    b = make_breaker()
    calls = []

    @b
    def f() -> None:
        calls.append(1)

    trip(b)
    with pytest.raises(tripline.CircuitOpenError):
        f()
    assert calls == []


def test_with_block_records_success_and_failure(make_breaker):
    b = make_breaker()
    with b as permit:
        assert isinstance(permit, tripline.Permit)
    with pytest.raises(TimeoutError):
        with b:
            raise TimeoutError("slow")
    m = b.metrics()
    assert (m.successful, m.failed) == (1, 1)


def test_nested_with_blocks_each_settle_their_permit(make_breaker):
    b = make_breaker()
    with b as outer:
        with b as inner:
            pass
        assert inner.settled and not outer.settled
    assert outer.settled
    assert b.metrics().successful == 2


def test_with_block_rejects_when_open(make_breaker):
    b = make_breaker()
    trip(b)
    ran = []
    with pytest.raises(tripline.CircuitOpenError):
        with b:
            ran.append(1)
    assert ran == []


def test_exit_without_enter_is_an_error(make_breaker):
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        make_breaker().__exit__(None, None, None)


def test_call_passes_arguments(make_breaker):
    b = make_breaker()
    assert b.call(functools.partial(pow, 2), 10) == 1024
    assert b.call(dict, a=1) == {"a": 1}


def test_explicit_permit(make_breaker, clock):
    b = make_breaker(slow_call_duration="1s")
    p = b.try_acquire()
    assert not p.is_probe and not p.settled
    p.record(success=False, duration=2.5)
    assert p.settled
    p.record(success=True)  # a second record is ignored
    m = b.metrics()
    assert (m.failed, m.successful, m.slow) == (1, 0, 1)
    q = b.try_acquire()
    q.record(outcome="ignored")
    assert b.metrics().ignored == 1
    with pytest.raises(TypeError, match="exactly one"):
        b.try_acquire().record()
    with pytest.raises(ValueError, match="outcome"):
        b.try_acquire().record(outcome="maybe")


def test_unrecorded_permit_is_released_when_collected(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(5)
    p = b.try_acquire()
    assert p.is_probe
    del p
    gc.collect()
    # The probe slot came back: a new probe is admitted.
    q = b.try_acquire()
    assert q.is_probe
    q.record(success=True)
    assert b.state == "closed"
    assert b.metrics().cancelled == 1


def test_keyboard_interrupt_releases_the_permit(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(5)

    @b
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert b.state == "half_open"
    assert b.metrics().cancelled == 1
    assert b.call(lambda: 1) == 1
    assert b.state == "closed"


def test_keyboard_interrupt_in_with_block_releases(make_breaker):
    b = make_breaker()
    with pytest.raises(KeyboardInterrupt):
        with b:
            raise KeyboardInterrupt
    m = b.metrics()
    assert (m.cancelled, m.failed, m.successful) == (1, 0, 0)


def test_decorating_a_non_callable_is_a_type_error(make_breaker):
    with pytest.raises(TypeError, match="callable"):
        make_breaker()(42)
