"""Properties over random call sequences (hypothesis)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

import tripline

outcomes = st.lists(st.sampled_from(["ok", "fail", "ignored", "cancel"]), max_size=60)


def run(b: tripline.CircuitBreaker, seq: list[str]) -> tuple[int, int, int, int, int]:
    """Drives `seq` through the decorator; returns what was admitted by kind
    and how many calls were rejected."""
    admitted = {"ok": 0, "fail": 0, "ignored": 0, "cancel": 0}
    rejected = 0

    @b
    def call(kind: str) -> str:
        admitted[kind] += 1
        if kind == "fail":
            raise ConnectionError
        if kind == "ignored":
            raise KeyError
        if kind == "cancel":
            raise KeyboardInterrupt
        return kind

    for kind in seq:
        try:
            call(kind)
        except tripline.CircuitOpenError:
            rejected += 1
        except (ConnectionError, KeyError, KeyboardInterrupt):
            pass
    return admitted["ok"], admitted["fail"], admitted["ignored"], admitted["cancel"], rejected


@settings(max_examples=150, deadline=None)
@given(seq=outcomes, size=st.integers(1, 10), threshold=st.sampled_from([0.2, 0.5, 1.0]))
def test_counts_are_exact_and_every_call_is_admitted_or_rejected(seq, size, threshold):
    clock = tripline.ManualClock()
    b = tripline.CircuitBreaker(
        "prop",
        clock=clock,
        window={"kind": "count", "size": size},
        minimum_calls=size,
        failure_rate_threshold=threshold,
        ignore_exceptions=(KeyError,),
    )
    ok, fail, ignored, cancel, rejected = run(b, seq)
    m = b.metrics()
    assert (m.successful, m.failed, m.ignored, m.cancelled, m.rejected) == (ok, fail, ignored, cancel, rejected)
    assert ok + fail + ignored + cancel + rejected == len(seq)
    # An open breaker explains itself; a closed one rejected nothing since
    # it last closed (no probe ever ran here: the clock never moved).
    if m.state == "closed":
        assert rejected == 0
    else:
        assert m.state == "open"


@settings(max_examples=100, deadline=None)
@given(seq=outcomes)
def test_a_disabled_breaker_never_rejects(seq):
    b = tripline.CircuitBreaker("prop-disabled", window={"kind": "count", "size": 2}, minimum_calls=1)
    b.disable()
    assert run(b, seq)[4] == 0
    assert b.state == "disabled"


failures = st.lists(st.booleans(), min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(script=failures, max_attempts=st.integers(1, 5), ratio=st.sampled_from([0.0, 0.1, 0.5, 1.0]), calls=st.integers(1, 8))
def test_a_pipeline_never_attempts_more_than_max_attempts_and_its_budget_never_goes_negative(
    script, max_attempts, ratio, calls
):
    """Sync and async: each logical call makes 1..max_attempts attempts;
    the retry budget's level stays ≥ 0 and grants no more than it holds."""
    clock = tripline.ManualClock()
    p = tripline.pipeline(
        retry={"max_attempts": max_attempts, "backoff": {"kind": "constant", "delay": "10ms"}},
        budget={"ratio": ratio, "min_retries_per_second": 0.1},
        clock=clock,
    )
    attempts: list[int] = []
    position = 0

    def attempt() -> str:
        nonlocal position
        attempts[-1] += 1
        fail = script[position % len(script)]
        position += 1
        if fail:
            raise ConnectionError("scripted")
        return "ok"

    async def attempt_async() -> str:
        await asyncio.sleep(0)
        return attempt()

    async def run_async() -> None:
        for _ in range(calls):
            attempts.append(0)
            try:
                await p.acall(attempt_async)
            except ConnectionError:
                pass
            budget = p.stats()["budget"]
            assert budget["available"] >= 0

    for _ in range(calls):
        attempts.append(0)
        try:
            p.call(attempt)
        except ConnectionError:
            pass
        assert p.stats()["budget"]["available"] >= 0
    asyncio.run(run_async())
    assert all(1 <= n <= max_attempts for n in attempts)
    stats = p.stats()
    assert stats["retry"]["attempts"] == sum(attempts)
    assert stats["retry"]["retries"] == sum(attempts) - len(attempts)
    budget = stats["budget"]
    assert budget["withdrawals"] == stats["retry"]["retries"]
    assert budget["deposits"] == len(attempts)
