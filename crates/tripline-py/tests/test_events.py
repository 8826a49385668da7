"""Event callbacks: explanations, raising callbacks, re-entrancy."""

from __future__ import annotations

import logging

import pytest

import tripline
from conftest import trip


def test_event_text_is_the_library_explanation(make_breaker):
    b = make_breaker("payments")
    events: list[tripline.Event] = []
    b.on_event(events.append)
    trip(b)
    (e,) = events
    assert e.kind == "transition" and e.breaker == "payments"
    assert (e.from_state, e.to_state) == ("closed", "open")
    assert str(e) == "payments: closed → open (failure rate 100% ≥ 50% over 4 calls; open for 5.0s)"
    assert e.reason == "failure rate 100% ≥ 50% over 4 calls"
    assert e.as_dict()["kind"]["type"] == "transition"


def test_raising_callback_is_logged_and_never_breaks_the_call(make_breaker, caplog):
    b = make_breaker()

    @b.on_event
    def broken(event: tripline.Event) -> None:
        raise RuntimeError("observer bug")

    seen = []
    b.on_event(seen.append)
    with caplog.at_level(logging.ERROR, logger="tripline"):
        trip(b)  # the fourth call's ConnectionError still reaches the caller
    assert "on_event callback raised" in caplog.text and "observer bug" in caplog.text
    assert len(seen) == 1 and b.state == "open"


def test_callback_reentering_the_breaker_does_not_deadlock(make_breaker, clock):
    b = make_breaker()
    seen = []

    def reenter(event: tripline.Event) -> None:
        seen.append((event.to_state, b.state, b.metrics().state))
        if event.to_state == "open":
            b.reset()  # an operation that itself emits an event

    b.on_event(reenter)
    trip_calls = 0

    def fail() -> None:
        raise ConnectionError

    for _ in range(4):
        trip_calls += 1
        with pytest.raises(ConnectionError):
            b.call(fail)
    assert b.state == "closed"
    assert seen[0][0] == "open" and seen[-1][0] == "closed"


def test_on_event_rejects_non_callables(make_breaker):
    with pytest.raises(TypeError, match="callback"):
        make_breaker().on_event(3)


def test_config_change_event(make_breaker):
    b = make_breaker()
    events = []
    b.on_event(events.append)
    b.reconfigure(minimum_calls=2)
    assert [e.kind for e in events] == ["config_changed"]
