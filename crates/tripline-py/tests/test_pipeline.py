"""The composed policies: retry, budget, breaker, bulkhead, deadlines, fallback."""

from __future__ import annotations

import threading

import pytest

import tripline


class Flaky:
    """Fails `failures` times, then answers."""

    def __init__(self, failures: int, exc: type[BaseException] = ConnectionError) -> None:
        self.failures, self.exc, self.calls = failures, exc, 0

    def __call__(self, value: str = "ok") -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc("flaky")
        return value


def test_retries_then_succeeds_and_the_breaker_counts_one_logical_call(make_breaker, clock):
    b = make_breaker()
    p = tripline.pipeline(
        breaker=b, retry={"max_attempts": 3, "backoff": {"kind": "constant", "delay": 0.1}}, clock=clock
    )
    f = Flaky(2)
    assert p.call(f, "pong") == "pong"
    assert f.calls == 3
    m = b.metrics()
    assert (m.successful, m.failed) == (1, 0)


def test_gives_up_after_max_attempts_with_the_last_error(clock):
    p = tripline.pipeline(retry={"max_attempts": 2, "backoff": {"kind": "none"}}, clock=clock)
    f = Flaky(5)
    with pytest.raises(ConnectionError):
        p.call(f)
    assert f.calls == 2


def test_only_retry_exceptions_are_retried(clock):
    p = tripline.pipeline(
        retry={"max_attempts": 3, "backoff": {"kind": "none"}}, retry_exceptions=(TimeoutError,), clock=clock
    )
    f = Flaky(5, ConnectionError)
    with pytest.raises(ConnectionError):
        p.call(f)
    assert f.calls == 1


def test_an_open_breaker_stops_retries(make_breaker, clock):
    b = make_breaker()
    b.force_open()
    p = tripline.pipeline(breaker=b, retry={"max_attempts": 3}, clock=clock)
    f = Flaky(0)
    with pytest.raises(tripline.CircuitOpenError):
        p.call(f)
    assert f.calls == 0


def test_fallback_answers_for_any_error(make_breaker, clock):
    b = make_breaker()
    b.force_open()
    seen = []
    p = tripline.pipeline(breaker=b, fallback=lambda e: seen.append(e) or "cached", clock=clock)
    assert p.call(Flaky(0)) == "cached"
    assert isinstance(seen[0], tripline.CircuitOpenError)


def test_bulkhead_refuses_beyond_its_limit(clock):
    p = tripline.pipeline(bulkhead={"max_concurrent": 1, "max_queue": 0}, clock=clock)
    inside, release = threading.Event(), threading.Event()
    errors = []

    def hold() -> None:
        inside.set()
        release.wait(5)

    t = threading.Thread(target=lambda: p.call(hold))
    t.start()
    inside.wait(5)
    try:
        p.call(lambda: None)
    except tripline.BulkheadFullError as e:
        errors.append(e)
    release.set()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], tripline.Rejected)


def test_per_attempt_timeout_is_a_failure(make_breaker, clock):
    b = make_breaker()
    p = tripline.pipeline(
        breaker=b, retry={"max_attempts": 1}, timeout={"per_attempt": "1s"}, clock=clock
    )

    def slow() -> str:
        clock.advance(2)
        return "late"

    with pytest.raises(tripline.AttemptTimeoutError):
        p.call(slow)
    assert b.metrics().failed == 1


def test_decorator(clock):
    p = tripline.pipeline(retry={"max_attempts": 2, "backoff": {"kind": "none"}}, clock=clock)
    f = Flaky(1)

    @p
    def call(value: str) -> str:
        """Doc."""
        return f(value)

    assert call("x") == "x" and call.__doc__ == "Doc."


def test_bad_policy_config_names_the_field():
    with pytest.raises(ValueError, match="max_attempts"):
        tripline.pipeline(retry={"max_attempts": 0})
    with pytest.raises(ValueError, match="retry.*max_attemps|max_attemps"):
        tripline.pipeline(retry={"max_attemps": 2})
    with pytest.raises(TypeError, match="bulkhead"):
        tripline.pipeline(bulkhead=3)
    with pytest.raises(TypeError, match="fallback"):
        tripline.pipeline(fallback="cached")


class Throttled(Exception):
    """What an HTTP client raises on a 503 with Retry-After."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"retry after {retry_after}s")
        self.retry_after = retry_after


def test_retry_waits_at_least_the_servers_retry_after(clock):
    p = tripline.pipeline(retry={"max_attempts": 2, "backoff": {"kind": "constant", "delay": "10ms"}}, clock=clock)
    times = []

    def pushed_back() -> str:
        times.append(clock.now)
        if len(times) == 1:
            raise Throttled(3.0)
        return "ok"

    assert p.call(pushed_back) == "ok"
    assert times[1] - times[0] >= 3.0


def test_overall_deadline_stops_the_retries(clock):
    p = tripline.pipeline(
        retry={"max_attempts": 5, "backoff": {"kind": "constant", "delay": "400ms"}},
        timeout={"overall": "1s"},
        clock=clock,
    )
    f = Flaky(10)
    with pytest.raises((tripline.DeadlineExceededError, ConnectionError)):
        p.call(f)
    assert f.calls < 5


def test_retry_budget_caps_retries(clock):
    p = tripline.pipeline(
        retry={"max_attempts": 3, "backoff": {"kind": "none"}},
        budget={"ratio": 0.1, "min_retries_per_second": 0.1},
        clock=clock,
    )
    calls = 0

    def down() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError

    for _ in range(50):
        with pytest.raises(ConnectionError):
            p.call(down)
    assert calls < 50 * 3 / 2  # without a budget: 150 attempts
