"""Type stubs of the native module (`tripline._tripline`)."""

from __future__ import annotations

import datetime
import os
from types import TracebackType
from typing import Any, Awaitable, Callable, Coroutine, Generator, Mapping, Optional, Sequence, TypeVar, Union, overload

from typing_extensions import Literal, ParamSpec

P = ParamSpec("P")
R = TypeVar("R")

#: A duration: a `timedelta`, seconds, or config text such as ``"5s"``.
Duration = Union[datetime.timedelta, int, float, str]
State = Literal["closed", "open", "half_open", "forced_open", "disabled", "metrics_only"]
OutcomeName = Literal["success", "failure", "ignored"]
ExceptionTypes = Union[type[BaseException], tuple[type[BaseException], ...]]
Classifier = Callable[[Any], Optional[OutcomeName]]

class ManualClock:
    """A virtual clock for tests: time moves only when `advance` is called."""

    def __init__(self) -> None: ...
    def advance(self, duration: Duration) -> None:
        """Moves time forward by `duration`."""
    @property
    def now(self) -> float:
        """The current reading, in seconds since the clock's epoch."""

class Event:
    """An event of a breaker; `str(event)` is the library's explanation."""

    @property
    def breaker(self) -> str: ...
    @property
    def kind(self) -> Literal["transition", "would_trip", "open_deadline_changed", "window_reset", "config_changed", "other"]: ...
    @property
    def from_state(self) -> Optional[State]: ...
    @property
    def to_state(self) -> Optional[State]: ...
    @property
    def reason(self) -> Optional[str]: ...
    def as_dict(self) -> dict[str, Any]: ...

class Metrics:
    """A snapshot of one breaker's state and cumulative counters."""

    name: str
    state: State
    generation: int
    probe_due: bool
    window_calls: int
    window_failures: int
    window_slow: int
    failure_rate: float
    slow_call_rate: float
    successful: int
    failed: int
    slow: int
    ignored: int
    rejected: int
    cancelled: int
    late: int
    probes_in_flight: int
    probes_succeeded: int
    probes_failed: int
    backoff_round: int
    config_version: int
    def as_dict(self) -> dict[str, Any]: ...

class Permit:
    """Permission for one call; record its outcome once, or release it."""

    def record(
        self,
        success: Optional[bool] = None,
        *,
        outcome: Optional[OutcomeName] = None,
        duration: Optional[Duration] = None,
    ) -> None: ...
    def release(self) -> None: ...
    @property
    def is_probe(self) -> bool: ...
    @property
    def settled(self) -> bool: ...

class Guarded:
    """A `def` decorated with a breaker."""

    breaker: CircuitBreaker
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class AsyncGuarded:
    """An `async def` decorated with a breaker."""

    breaker: CircuitBreaker
    def __call__(self, *args: Any, **kwargs: Any) -> GuardedAwaitable: ...

class GuardedAwaitable:
    """One awaited call of a guarded `async def` (a coroutine)."""

    def __await__(self) -> Generator[Any, None, Any]: ...
    def send(self, value: Any) -> Any: ...
    def throw(self, typ: Any, val: Any = ..., tb: Any = ...) -> Any: ...
    def close(self) -> None: ...

class CircuitBreaker:
    """A circuit breaker over the Rust library's breaker.

    Keyword arguments are the config-file vocabulary: ``window``,
    ``minimum_calls``, ``failure_rate_threshold``, ``slow_call_duration``,
    ``slow_call_rate_threshold``, ``open_duration``, ``half_open``,
    ``max_half_open_duration``, ``expected_calls_per_second``,
    ``min_state_duration``, ``cooldown``, ``warm_up``, ``slow_call``,
    ``slow_probe_factor``.
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Optional[ManualClock] = None,
        failure_exceptions: Optional[ExceptionTypes] = None,
        ignore_exceptions: Optional[ExceptionTypes] = None,
        classify: Optional[Classifier] = None,
        **config: Any,
    ) -> None: ...
    @staticmethod
    def from_dict(
        data: Mapping[str, Any],
        *,
        name: Optional[str] = None,
        clock: Optional[ManualClock] = None,
        failure_exceptions: Optional[ExceptionTypes] = None,
        ignore_exceptions: Optional[ExceptionTypes] = None,
        classify: Optional[Classifier] = None,
    ) -> CircuitBreaker: ...
    @staticmethod
    def from_file(
        path: Union[str, os.PathLike[str]],
        *,
        clock: Optional[ManualClock] = None,
        failure_exceptions: Optional[ExceptionTypes] = None,
        ignore_exceptions: Optional[ExceptionTypes] = None,
        classify: Optional[Classifier] = None,
    ) -> CircuitBreaker: ...
    @property
    def name(self) -> str: ...
    @property
    def state(self) -> State: ...
    @property
    def config(self) -> dict[str, Any]: ...
    def metrics(self) -> Metrics: ...
    def snapshot(self) -> dict[str, Any]: ...
    def force_open(self) -> None: ...
    def disable(self) -> None: ...
    def metrics_only(self) -> None: ...
    def reset(self) -> None: ...
    def open_for(self, duration: Duration) -> None: ...
    def reconfigure(self, **config: Any) -> None: ...
    def on_event(self, callback: Callable[[Event], object]) -> Callable[[Event], object]: ...
    @overload
    def __call__(self, func: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]: ...
    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R]: ...
    @overload
    def call(self, func: Callable[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]: ...
    @overload
    def call(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...
    def try_acquire(self) -> Permit: ...
    def __enter__(self) -> Permit: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]: ...
    async def __aenter__(self) -> Permit: ...
    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]: ...

class BreakerRegistry:
    """A family of breakers, one per key, bounded by ``max_breakers``."""

    def __init__(
        self,
        family: str,
        *,
        max_breakers: int = 10000,
        overflow: Literal["shared_overflow", "reject"] = "shared_overflow",
        idle_ttl: Optional[Duration] = None,
        clock: Optional[ManualClock] = None,
        failure_exceptions: Optional[ExceptionTypes] = None,
        ignore_exceptions: Optional[ExceptionTypes] = None,
        classify: Optional[Classifier] = None,
        **config: Any,
    ) -> None: ...
    def get(self, key: str) -> CircuitBreaker: ...
    def __getitem__(self, key: str) -> CircuitBreaker: ...
    def __contains__(self, key: object) -> bool: ...
    def __len__(self) -> int: ...
    def remove(self, key: str) -> bool: ...
    def evict_idle(self) -> int: ...
    def keys(self) -> list[str]: ...
    def metrics(self) -> dict[str, Metrics]: ...
    def hold_family(self, state: Optional[Literal["forced_open", "disabled", "metrics_only"]]) -> None: ...
    @property
    def family_hold(self) -> Optional[str]: ...
    @property
    def family(self) -> str: ...

class AsyncCall(Coroutine[Any, Any, R]):
    """An awaitable tripline call (``Pipeline.acall``, ``Cluster.acall``,
    ``Timeout.acall``): the Rust library's async policy, stepped by the
    awaiting asyncio task. Await it once, or pass it to
    ``asyncio.create_task``. Cancelling the task releases breaker permits
    and bulkhead slots unrecorded and closes the coroutines it runs."""

    def __await__(self) -> Generator[Any, None, R]: ...
    def send(self, value: Any) -> Any: ...
    def throw(self, typ: Any, val: Any = ..., tb: Any = ...) -> Any: ...
    def close(self) -> None: ...

class Timeout:
    """An asyncio timeout for ``async def`` calls (``tripline.timeout``): a
    call still running after ``after`` is abandoned and raises
    ``tripline.AttemptTimeoutError``."""

    def __init__(self, after: Duration) -> None: ...
    @property
    def after(self) -> float: ...
    def acall(self, func: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs) -> AsyncCall[R]: ...
    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, AsyncCall[R]]: ...

class Hedge:
    """Hedging for ``async def`` calls: while no answer has come, the call
    is made again after ``delay`` (or at once when an attempt fails), up to
    ``max_hedges`` more times; the first success wins and the others are
    cancelled. Hedges spend from ``budget`` when one is given."""

    def __init__(
        self,
        *,
        name: str = "hedge",
        budget: Optional[dict[str, Any]] = None,
        clock: Optional[ManualClock] = None,
        delay: Union[Duration, dict[str, Any]] = ...,
        max_hedges: int = 1,
        samples: int = 1000,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def current_delay(self) -> float: ...
    def stats(self) -> dict[str, int]: ...
    def acall(self, func: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs) -> AsyncCall[R]: ...
    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, AsyncCall[R]]: ...

class ThrottlePermit:
    """Permission to send one request: report the backend's answer once,
    with ``accepted()`` or ``rejected_by_backend()``. Dropped unreported,
    it says nothing."""

    def accepted(self) -> None: ...
    def rejected_by_backend(self) -> None: ...

class _AdaptiveThrottle:
    """The native throttle behind ``tripline.AdaptiveThrottle``."""

    def __init__(
        self,
        name: str,
        *,
        clock: Optional[ManualClock] = None,
        seed: Optional[int] = None,
        **config: Any,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def rejection_probability(self) -> float: ...
    def try_acquire(self) -> ThrottlePermit: ...
    def metrics(self) -> dict[str, Any]: ...

class Pipeline:
    """Policies composed around calls, in the library's one safe order:
    fallback → overall deadline → retry (with budget) → circuit breaker →
    bulkhead → per-attempt timeout → call. ``call`` runs a ``def``,
    ``acall`` awaits an ``async def``."""

    def __init__(
        self,
        *,
        name: str = "pipeline",
        breaker: Optional[CircuitBreaker] = None,
        retry: Optional[Mapping[str, Any]] = None,
        budget: Optional[Mapping[str, Any]] = None,
        bulkhead: Optional[Mapping[str, Any]] = None,
        timeout: Optional[Mapping[str, Any]] = None,
        fallback: Optional[Callable[[BaseException], Any]] = None,
        retry_exceptions: Optional[ExceptionTypes] = None,
        clock: Optional[ManualClock] = None,
        seed: Optional[int] = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    def stats(self) -> dict[str, Any]: ...
    def call(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...
    def acall(self, func: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs) -> AsyncCall[R]: ...
    @overload
    def __call__(self, func: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, AsyncCall[R]]: ...
    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R]: ...

class Served:
    """A failsafe cluster's answer: the endpoint's, or the default
    (``degraded``), with why (``reason``: "rejected", "failed", "timed_out")."""

    value: Any
    degraded: bool
    reason: Optional[str]

class Cluster:
    """One dependency, many endpoints: a breaker per endpoint, balancing,
    outlier ejection, and a strategy (failover, failfast, failsafe,
    broadcast, forking, failback). ``call(address, *args, **kwargs)``
    calls one endpoint (a ``def``, or an ``async def`` for ``acall``);
    failback's is ``call(address, payload: bytes)``."""

    def __init__(
        self,
        endpoints: Sequence[Union[str, Mapping[str, Any]]],
        *,
        call: Callable[..., Any],
        strategy: Literal["failover", "failfast", "failsafe", "broadcast", "forking", "failback"] = "failover",
        name: str = "cluster",
        balancer: Optional[Literal["round_robin", "weighted_random", "least_outstanding"]] = None,
        breaker: Optional[Mapping[str, Any]] = None,
        outlier: Optional[Mapping[str, Any]] = None,
        retries: int = 2,
        idempotent: bool = True,
        budget: Optional[Mapping[str, Any]] = None,
        fail_percent: Optional[int] = None,
        forks: int = 2,
        failback: Optional[Mapping[str, Any]] = None,
        default: Any = None,
        failure_exceptions: Optional[ExceptionTypes] = None,
        ignore_exceptions: Optional[ExceptionTypes] = None,
        connect_exceptions: Optional[ExceptionTypes] = None,
        classify: Optional[Classifier] = None,
        clock: Optional[ManualClock] = None,
        seed: Optional[int] = None,
    ) -> None: ...
    def call(self, *args: Any, **kwargs: Any) -> Any: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def acall(self, *args: Any, **kwargs: Any) -> AsyncCall[Any]: ...
    @property
    def strategy(self) -> str: ...
    def stats(self) -> dict[str, Any]: ...
    def run_due(self) -> dict[str, int]: ...
    @property
    def pending(self) -> int: ...
    def dead_letters(self) -> list[bytes]: ...
    def run_failback(self) -> AsyncCall[None]: ...
    @property
    def endpoints(self) -> list[dict[str, Any]]: ...
    @property
    def name(self) -> str: ...
    def mark_unhealthy(self, id: str, unhealthy: bool = True) -> bool: ...
    def analyze(self) -> None: ...

# Private: what `tripline.prometheus` reads at scrape time.
_OUTLIER_DETECTORS: list[str]

def _breaker_samples() -> list[dict[str, Any]]: ...
def _registry_stats() -> list[dict[str, Any]]: ...
def _pipeline_stats() -> list[dict[str, Any]]: ...
def _cluster_stats() -> list[dict[str, Any]]: ...
def _throttle_metrics() -> list[dict[str, Any]]: ...
def _hedge_budgets() -> list[tuple[str, dict[str, Any]]]: ...
