"""Shared fixtures: small breakers on a manual clock, so every
time-dependent behaviour is tested without sleeping."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import tripline


@pytest.fixture
def clock() -> tripline.ManualClock:
    return tripline.ManualClock()


@pytest.fixture
def make_breaker(clock: tripline.ManualClock) -> Callable[..., tripline.CircuitBreaker]:
    """A breaker that trips on 2 failures of 4 calls, opens for 5 s and
    closes after one successful probe; keyword arguments override."""

    def make(name: str = "dep", **overrides: Any) -> tripline.CircuitBreaker:
        config: dict[str, Any] = dict(
            window={"kind": "count", "size": 4},
            minimum_calls=4,
            failure_rate_threshold=0.5,
            open_duration="5s",
            half_open={"policy": "consecutive", "successes": 1},
            clock=clock,
        )
        config.update(overrides)
        return tripline.CircuitBreaker(name, **config)

    return make


def trip(breaker: tripline.CircuitBreaker) -> None:
    """Four failed calls: opens a breaker made by `make_breaker`."""

    def fail() -> None:
        raise ConnectionError("refused")

    for _ in range(4):
        with pytest.raises(ConnectionError):
            breaker.call(fail)
    assert breaker.state == "open"
