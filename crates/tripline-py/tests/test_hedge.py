"""`tripline.Hedge`: the Rust library's hedging over coroutines on asyncio —
a late attempt is hedged and the first success wins, the losers are
cancelled and closed, a failure hedges at once, the budget stops hedging,
cancellation of the caller closes every attempt.

Hedge delays fire on the loop's timer against attempts that wait on
events nobody sets, so outcomes never depend on the machine's speed."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from prometheus_client import CollectorRegistry, generate_latest

import tripline
import tripline.prometheus

pytestmark = pytest.mark.asyncio


class Replicas:
    """Attempt n waits forever if n is in `stuck`, fails if n is in `failing`,
    else answers `n`; records how each attempt ended."""

    def __init__(self, stuck: set[int] = set(), failing: set[int] = set()) -> None:
        self.stuck, self.failing = stuck, failing
        self.started = 0
        self.ended: dict[int, str] = {}

    async def __call__(self, query: str) -> str:
        self.started += 1
        n = self.started
        try:
            if n in self.stuck:
                await asyncio.Event().wait()
            await asyncio.sleep(0)
            if n in self.failing:
                raise ConnectionError(f"replica {n} down")
            self.ended[n] = "answered"
            return f"{query} from {n}"
        except GeneratorExit:
            self.ended[n] = "closed"
            raise
        except asyncio.CancelledError:
            self.ended[n] = "cancelled"
            raise
        except ConnectionError:
            self.ended[n] = "failed"
            raise


async def test_a_late_attempt_is_hedged_and_the_hedge_wins():
    hedge = tripline.Hedge(delay="10ms")
    replicas = Replicas(stuck={1})
    assert await hedge.acall(replicas, "q") == "q from 2"
    assert replicas.ended[1] in ("closed", "cancelled"), replicas.ended  # the loser is ended
    assert hedge.stats() == {"calls": 1, "hedges": 1, "hedge_wins": 1, "refused_budget": 0}


async def test_a_quick_answer_sends_no_hedge():
    hedge = tripline.Hedge(delay="5s")
    replicas = Replicas()
    assert await hedge.acall(replicas, "q") == "q from 1"
    assert replicas.started == 1
    assert hedge.stats()["hedges"] == 0


async def test_a_failed_attempt_hedges_at_once_and_every_failure_raises_the_last():
    hedge = tripline.Hedge(delay="5s", max_hedges=2)  # never waits for the delay
    replicas = Replicas(failing={1})
    assert await hedge.acall(replicas, "q") == "q from 2"
    all_down = Replicas(failing={1, 2, 3})
    with pytest.raises(ConnectionError, match="replica 3 down"):
        await hedge.acall(all_down, "q")
    assert all_down.started == 3


async def test_the_budget_stops_hedging():
    hedge = tripline.Hedge(delay="5s", budget={"ratio": 0.0, "min_retries_per_second": 0})
    replicas = Replicas(failing={1})
    with pytest.raises(ConnectionError, match="replica 1 down"):
        await hedge.acall(replicas, "q")
    assert replicas.started == 1
    assert hedge.stats()["refused_budget"] == 1


async def test_cancelling_the_caller_closes_every_attempt():
    hedge = tripline.Hedge(delay="1ms", max_hedges=2)
    replicas = Replicas(stuck={1, 2, 3})
    task = asyncio.ensure_future(hedge.acall(replicas, "q"))
    for _ in range(10_000):  # bounded: a hedge that never came fails below
        if replicas.started == 3:
            break
        await asyncio.sleep(0.001)  # the hedge delays pass on the loop's timer
    assert replicas.started == 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(replicas.ended) == [1, 2, 3]
    assert set(replicas.ended.values()) <= {"closed", "cancelled"}


async def test_the_decorator_keeps_metadata_and_the_delay_may_be_a_moving_quantile():
    hedge = tripline.Hedge(name="search", delay={"quantile": 0.9, "min_samples": 10, "initial": "20ms"}, samples=10)
    assert hedge.current_delay == pytest.approx(0.02)

    @hedge
    async def search(query: str) -> str:
        """Searches."""
        await asyncio.sleep(0)
        return query.upper()

    assert search.__name__ == "search" and search.__doc__ == "Searches."
    assert inspect.signature(search).parameters["query"].annotation in (str, "str")
    assert await search("x") == "X"
    assert hedge.name == "search"
    assert "search" in repr(hedge)


async def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="max_hedges"):
        tripline.Hedge(delay="10ms", max_hedges=0)
    with pytest.raises(ValueError, match="quantile"):
        tripline.Hedge(delay={"quantile": 1.5, "min_samples": 10, "initial": "10ms"}, samples=10)
    with pytest.raises(ValueError, match="delay"):
        tripline.Hedge(delay="soon")
    with pytest.raises(ValueError, match="unknown field"):
        tripline.Hedge(delay="10ms", max_hedge=2)
    with pytest.raises(TypeError, match="async def"):
        tripline.Hedge(delay="10ms")(lambda: None)


async def test_the_budget_is_exported_under_the_hedges_name():
    hedge = tripline.Hedge(name="search-export", delay="5s", budget={"ratio": 0.5})
    await hedge.acall(Replicas(failing={1}), "q")
    registry = CollectorRegistry()
    tripline.prometheus.register(registry)
    text = generate_latest(registry).decode()
    assert 'tripline_retry_budget_withdrawals_total{name="search-export"} 1.0' in text
    assert 'tripline_retry_budget_requests_total{name="search-export"} 1.0' in text


async def test_a_thousand_concurrent_hedged_calls_each_get_their_own_answer():
    hedge = tripline.Hedge(delay="1ms", max_hedges=1)
    slow_first: dict[int, int] = {}

    async def replica(i: int) -> int:
        # Each call's first attempt waits for a hedge that answers.
        n = slow_first[i] = slow_first.get(i, 0) + 1
        if n == 1:
            await asyncio.Event().wait()
        await asyncio.sleep(0)
        return i

    results = await asyncio.gather(*(hedge.acall(replica, i) for i in range(1000)))
    assert results == list(range(1000))
    stats = hedge.stats()
    assert stats["calls"] == 1000 and stats["hedges"] == 1000 and stats["hedge_wins"] == 1000
