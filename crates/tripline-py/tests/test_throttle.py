"""Client-side adaptive throttling through `tripline.AdaptiveThrottle`."""

from __future__ import annotations

import asyncio
import functools

import pytest

import tripline


class Overloaded(Exception):
    """What a client raises for an HTTP 503 or 429."""


def make(clock: tripline.ManualClock, **config: object) -> tripline.AdaptiveThrottle:
    defaults: dict[str, object] = {
        "k": 2.0,
        "window": {"length": "10s", "buckets": 10},
        "minimum_requests_per_second": 0.0,
    }
    defaults.update(config)
    return tripline.AdaptiveThrottle(
        "search", overloaded=(Overloaded,), clock=clock, seed=7, **defaults
    )


def overloaded_backend() -> str:
    raise Overloaded("503")


def test_a_backend_that_refuses_everything_gets_most_requests_shed_here(clock):
    throttle = make(clock)
    shed = sent = 0
    for _ in range(1000):
        try:
            throttle.call(overloaded_backend)
        except tripline.ThrottledError as e:
            shed += 1
            assert e.throttle == "search"
            assert 0.0 < e.rejection_probability <= 0.9
            assert isinstance(e, tripline.Rejected)
        except Overloaded:
            sent += 1
    assert shed > 700, (shed, sent)
    m = throttle.metrics()
    assert m["totals"]["accepts"] == 0
    assert m["totals"]["throttled"] == shed
    # The formula, from the window's counts.
    r, a = m["window"]["requests"], m["window"]["accepts"]
    assert throttle.rejection_probability == pytest.approx(min(0.9, (r - 2 * a) / (r + 1)))


def test_answers_and_other_errors_are_accepts_and_nothing_is_shed(clock):
    throttle = make(clock)

    def business_error() -> None:
        raise ValueError("404")

    for i in range(100):
        if i % 2:
            assert throttle.call(lambda: "ok") == "ok"
        else:
            with pytest.raises(ValueError):
                throttle.call(business_error)
    m = throttle.metrics()
    assert (m["totals"]["requests"], m["totals"]["accepts"]) == (100, 100)
    assert throttle.rejection_probability == 0.0


def test_the_window_forgets_an_old_overload(clock):
    throttle = make(clock)
    for _ in range(200):
        try:
            throttle.call(overloaded_backend)
        except (Overloaded, tripline.ThrottledError):
            pass
    assert throttle.rejection_probability > 0.5
    clock.advance(11)
    assert throttle.rejection_probability == 0.0
    assert throttle.call(lambda: "back") == "back"


def test_a_permit_reports_once_and_an_unreported_one_says_nothing(clock):
    # Too little traffic for the throttle to act: no request is shed.
    throttle = make(clock, minimum_requests_per_second=1000.0)
    permit = throttle.try_acquire()
    permit.rejected_by_backend()
    with pytest.raises(RuntimeError, match="already reported"):
        permit.accepted()
    dropped = throttle.try_acquire()
    del dropped
    assert throttle.metrics()["totals"]["requests"] == 1


def test_an_interrupted_call_reports_nothing(clock):
    throttle = make(clock)

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        throttle.call(interrupted)
    assert throttle.metrics()["totals"]["requests"] == 0


def test_the_decorator_keeps_metadata_and_guards_def_and_async_def(clock):
    throttle = make(clock)

    @throttle
    def fetch(x: int) -> int:
        """Fetches."""
        return x * 2

    @throttle
    async def afetch(x: int) -> int:
        await asyncio.sleep(0)
        return x * 3

    assert (fetch.__name__, fetch.__doc__) == ("fetch", "Fetches.")
    assert fetch(2) == 4
    assert asyncio.run(afetch(2)) == 6
    assert asyncio.run(throttle.acall(functools.partial(fetch.__wrapped__, 5))) == 10
    assert throttle.metrics()["totals"]["accepts"] == 3


def test_a_cancelled_async_call_reports_nothing(clock):
    throttle = make(clock)

    async def main() -> None:
        started = asyncio.Event()

        async def slow() -> None:
            started.set()
            await asyncio.sleep(60)

        task = asyncio.ensure_future(throttle.acall(slow))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert throttle.metrics()["totals"]["requests"] == 0


@pytest.mark.parametrize(
    ("config", "error", "names"),
    [
        ({"k": 0.5}, ValueError, "`k`"),
        ({"max_rejection_probability": 1.5}, ValueError, "`max_rejection_probability`"),
        ({"window": {"length": "0s", "buckets": 10}}, ValueError, "`window.length`"),
        ({"kk": 2}, ValueError, "kk"),
        ({"k": "two"}, TypeError, "`k`"),
    ],
)
def test_bad_config_names_the_field(clock, config, error, names):
    with pytest.raises(error, match=names):
        tripline.AdaptiveThrottle("t", clock=clock, **config)


def test_overloaded_must_be_exception_types():
    with pytest.raises(TypeError, match="overloaded"):
        tripline.AdaptiveThrottle("t", overloaded=(503,))  # type: ignore[arg-type]


def test_a_throttle_is_exported_under_the_rust_exporters_names(clock):
    from prometheus_client import CollectorRegistry, generate_latest

    import tripline.prometheus

    throttle = tripline.AdaptiveThrottle("exported-throttle", clock=clock)
    throttle.call(lambda: "ok")
    permit = throttle.try_acquire()
    permit.rejected_by_backend()
    registry = CollectorRegistry()
    tripline.prometheus.register(registry)
    text = generate_latest(registry).decode()
    assert 'tripline_throttle_requests_total{name="exported-throttle"} 2.0' in text
    assert 'tripline_throttle_accepts_total{name="exported-throttle"} 1.0' in text
    assert 'tripline_throttle_throttled_total{name="exported-throttle"} 0.0' in text
    assert 'tripline_throttle_drop_probability{name="exported-throttle"}' in text
    del throttle, permit
    import gc

    gc.collect()
    registry = CollectorRegistry()
    tripline.prometheus.register(registry)
    assert "exported-throttle" not in generate_latest(registry).decode(), "a freed throttle leaves"
