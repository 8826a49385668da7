"""Keyed breakers: isolation per key, the bound, eviction."""

from __future__ import annotations

import pytest

import tripline
from conftest import trip


def small(clock, **kw):
    return tripline.BreakerRegistry(
        "tenants",
        clock=clock,
        window={"kind": "count", "size": 4},
        minimum_calls=4,
        half_open={"policy": "consecutive", "successes": 1},
        **kw,
    )


def test_a_breaker_per_key(clock):
    reg = small(clock)
    a, b = reg.get("a"), reg["b"]
    trip(a)
    assert reg.get("a").state == "open"
    assert b.state == "closed"
    assert a.name == "tenants:a"
    assert "a" in reg and "c" not in reg
    assert len(reg) == 2 and sorted(reg.keys()) == ["a", "b"]
    with pytest.raises(tripline.CircuitOpenError) as info:
        reg.get("a").call(lambda: 1)
    assert "failure rate" in (info.value.reason or "")
    assert reg.metrics()["a"].failed == 4


def test_bounded_with_shared_overflow(clock):
    reg = small(clock, max_breakers=2)
    reg.get("a"), reg.get("b")
    overflow = reg.get("c")
    assert len(reg) == 2 and "c" not in reg
    assert overflow.call(lambda: 5) == 5


def test_bounded_with_reject(clock):
    reg = small(clock, max_breakers=2, overflow="reject")
    reg.get("a"), reg.get("b")
    with pytest.raises(tripline.RegistryFullError) as info:
        reg.get("c")
    assert isinstance(info.value, tripline.Rejected)
    assert "max_breakers = 2" in str(info.value)
    assert reg.remove("a") and not reg.remove("a")
    reg.get("c")


def test_idle_breakers_are_evicted(clock):
    reg = small(clock, idle_ttl="10s")
    reg.get("a").call(lambda: 1)
    trip(reg.get("b"))
    reg.evict_idle()
    clock.advance(11)
    assert reg.evict_idle() == 1  # the open one is kept
    assert reg.keys() == ["b"]


def test_registry_classification_applies_to_every_key(clock):
    reg = small(clock, ignore_exceptions=(KeyError,))

    def miss() -> None:
        raise KeyError

    with pytest.raises(KeyError):
        reg.get("a").call(miss)
    assert reg.get("a").metrics().ignored == 1


def test_registry_config_errors():
    with pytest.raises(ValueError, match="overflow"):
        tripline.BreakerRegistry("t", overflow="drop")
    with pytest.raises(ValueError, match="max_breakers"):
        tripline.BreakerRegistry("t", max_breakers=0)
    with pytest.raises(TypeError, match="key must be a str"):
        tripline.BreakerRegistry("t").get(3)


def test_a_hold_on_the_family_covers_every_key_present_and_future(clock):
    reg = small(clock)
    a = reg.get("a")
    reg.hold_family("forced_open")
    assert reg.family_hold == "forced_open"
    for key in ("a", "first-seen-during-the-hold"):
        with pytest.raises(tripline.CircuitOpenError):
            reg.get(key).call(lambda: 1)
    reg.hold_family(None)
    assert reg.family_hold is None
    assert a.state == "closed"
    assert reg.get("later").call(lambda: 7) == 7
    with pytest.raises(ValueError, match='`state`.*not "open"'):
        reg.hold_family("open")  # type: ignore[arg-type]
    assert reg.family_hold is None
