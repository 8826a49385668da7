"""Every state transition, driven through the public API."""

from __future__ import annotations

import pytest

import tripline
from conftest import trip


def ok() -> str:
    return "pong"


def fail() -> None:
    raise ConnectionError("refused")


def test_closed_to_open_on_failure_rate(make_breaker):
    b = make_breaker()
    assert b.state == "closed"
    for _ in range(2):
        assert b.call(ok) == "pong"
    for _ in range(2):
        with pytest.raises(ConnectionError):
            b.call(fail)
    assert b.state == "open"


def test_open_rejects_with_retry_after_and_reason(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(1)
    with pytest.raises(tripline.CircuitOpenError) as info:
        b.call(ok)
    err = info.value
    assert isinstance(err, tripline.Rejected)
    assert err.retry_after == pytest.approx(4.0)
    assert err.reason is not None and "failure rate" in err.reason
    assert err.breaker == "dep" and err.state == "open"
    assert "dep" in str(err)
    assert b.metrics().rejected == 1


def test_open_to_half_open_to_closed(make_breaker, clock):
    b = make_breaker()
    events = []
    b.on_event(lambda e: events.append((e.from_state, e.to_state)))
    trip(b)
    clock.advance(5)
    assert b.call(ok) == "pong"  # the probe
    assert b.state == "closed"
    assert events == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]


def test_half_open_probe_failure_reopens(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(5)
    with pytest.raises(ConnectionError):
        b.call(fail)
    assert b.state == "open"


def test_half_open_admits_only_its_probes(make_breaker, clock):
    b = make_breaker()
    trip(b)
    clock.advance(5)
    probe = b.try_acquire()
    assert probe.is_probe
    assert b.state == "half_open"
    with pytest.raises(tripline.CircuitOpenError) as info:
        b.try_acquire()
    assert info.value.state == "half_open"
    probe.record(success=True)
    assert b.state == "closed"


def test_half_open_timeout_reopens(make_breaker, clock):
    b = make_breaker(max_half_open_duration="10s")
    trip(b)
    clock.advance(5)
    probe = b.try_acquire()
    clock.advance(11)
    with pytest.raises(tripline.CircuitOpenError):
        b.call(ok)
    assert b.state == "open"
    probe.release()


def test_operator_states(make_breaker):
    b = make_breaker()
    b.force_open()
    assert b.state == "forced_open"
    with pytest.raises(tripline.CircuitOpenError) as info:
        b.call(ok)
    assert info.value.retry_after is None
    b.disable()
    assert b.state == "disabled"
    for _ in range(10):
        with pytest.raises(ConnectionError):
            b.call(fail)
    assert b.state == "disabled"
    b.metrics_only()
    assert b.state == "metrics_only"
    b.reset()
    assert b.state == "closed"


def test_open_for_then_probe(make_breaker, clock):
    b = make_breaker()
    b.open_for(2)
    assert b.state == "open"
    with pytest.raises(tripline.CircuitOpenError) as info:
        b.call(ok)
    assert info.value.retry_after == pytest.approx(2.0)
    clock.advance(2)
    assert b.call(ok) == "pong"
    assert b.state == "closed"


def test_reset_empties_the_window(make_breaker):
    b = make_breaker()
    for _ in range(3):
        with pytest.raises(ConnectionError):
            b.call(fail)
    b.reset()
    assert b.metrics().window_calls == 0


def test_slow_calls_trip(make_breaker, clock):
    b = make_breaker(slow_call_duration="1s", slow_call_rate_threshold=0.5, failure_rate_threshold=1.0)

    def slow() -> str:
        clock.advance(2)
        return "late"

    for _ in range(4):
        assert b.call(slow) == "late"
    assert b.state == "open"
    assert b.metrics().slow == 4


def test_metrics_and_snapshot(make_breaker):
    b = make_breaker()
    b.call(ok)
    with pytest.raises(ConnectionError):
        b.call(fail)
    m = b.metrics()
    assert (m.name, m.state, m.successful, m.failed) == ("dep", "closed", 1, 1)
    assert m.window_calls == 2 and m.failure_rate == pytest.approx(0.5)
    assert m.as_dict()["calls"]["failed"] == 1
    assert m == b.metrics()
    snap = b.snapshot()
    assert snap["name"] == "dep" and snap["state"] == "closed"


def test_reconfigure_keeps_state(make_breaker, clock):
    b = make_breaker()
    trip(b)
    b.reconfigure(open_duration="30s", minimum_calls=2)
    assert b.state == "open"
    assert b.config["minimum_calls"] == 2
    assert b.metrics().config_version == 1
    with pytest.raises(ValueError, match="failure_rate_threshold"):
        b.reconfigure(failure_rate_threshold=1.5)
    assert b.config["minimum_calls"] == 2
