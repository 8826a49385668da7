"""Which results and exceptions count against the dependency."""

from __future__ import annotations

import logging

import pytest

import tripline


def raise_(exc: BaseException):
    def f() -> None:
        raise exc

    return f


def counts(b: tripline.CircuitBreaker) -> tuple[int, int, int]:
    m = b.metrics()
    return m.successful, m.failed, m.ignored


def test_every_exception_is_a_failure_by_default(make_breaker):
    b = make_breaker()
    with pytest.raises(KeyError):
        b.call(raise_(KeyError("k")))
    assert counts(b) == (0, 1, 0)


def test_failure_and_ignore_tuples(make_breaker):
    b = make_breaker(failure_exceptions=(TimeoutError, ConnectionError), ignore_exceptions=(ValueError,))
    for exc in (TimeoutError(), ConnectionResetError(), ValueError(), KeyError()):
        with pytest.raises(type(exc)):
            b.call(raise_(exc))
    # KeyError is in neither tuple: the dependency answered.
    assert counts(b) == (1, 2, 1)


def test_classify_callable_sees_results_and_exceptions(make_breaker):
    seen = []

    def classify(r):
        seen.append(r)
        if isinstance(r, dict) and r.get("status") == 503:
            return "failure"
        if isinstance(r, LookupError):
            return "ignored"
        return None  # default rules

    b = make_breaker(classify=classify)
    b.call(lambda: {"status": 503})
    b.call(lambda: {"status": 200})
    with pytest.raises(KeyError):
        b.call(raise_(KeyError("k")))
    with pytest.raises(OSError):
        b.call(raise_(OSError()))
    assert counts(b) == (1, 2, 1)
    assert len(seen) == 4


def test_classify_that_raises_is_logged_and_defaults(make_breaker, caplog):
    def classify(r):
        raise RuntimeError("classifier bug")

    b = make_breaker(classify=classify)
    with caplog.at_level(logging.ERROR, logger="tripline"):
        assert b.call(lambda: 7) == 7
    assert counts(b) == (1, 0, 0)
    assert "classify raised" in caplog.text and "classifier bug" in caplog.text


def test_classify_with_a_bad_answer_is_logged(make_breaker, caplog):
    b = make_breaker(classify=lambda r: "fine")
    with caplog.at_level(logging.ERROR, logger="tripline"):
        b.call(lambda: 1)
    assert "must return" in caplog.text
    assert counts(b) == (1, 0, 0)


def test_cancellations_are_neutral(make_breaker):
    import asyncio

    b = make_breaker(failure_exceptions=(Exception,))
    for exc in (asyncio.CancelledError(), SystemExit(), GeneratorExit()):
        with pytest.raises(type(exc)):
            b.call(raise_(exc))
    assert counts(b) == (0, 0, 0)
    assert b.metrics().cancelled == 3


def test_bad_classification_arguments():
    with pytest.raises(TypeError, match="failure_exceptions"):
        tripline.CircuitBreaker("x", failure_exceptions=(ValueError, 3))
    with pytest.raises(TypeError, match="ignore_exceptions"):
        tripline.CircuitBreaker("x", ignore_exceptions="ValueError")
    with pytest.raises(TypeError, match="classify"):
        tripline.CircuitBreaker("x", classify=5)
