"""tripline: circuit breakers and the fault-tolerance policies around them.

The Rust library itself, in-process: every decision (admit, reject, trip,
probe) is made by the same code as in Rust. See the package README.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import Any

from ._errors import (
    AttemptTimeoutError,
    BroadcastError,
    BulkheadFullError,
    CircuitOpenError,
    ClusterUnavailableError,
    DeadlineExceededError,
    FailbackFullError,
    Rejected,
    RegistryFullError,
    ThrottledError,
)
from ._throttle import AdaptiveThrottle
from ._tripline import (
    AsyncCall,
    AsyncGuarded,
    BreakerRegistry,
    CircuitBreaker,
    Cluster,
    Event,
    Guarded,
    GuardedAwaitable,
    Hedge,
    ManualClock,
    Metrics,
    Permit,
    Pipeline,
    Served,
    ThrottlePermit,
    Timeout,
)

try:
    __version__ = _version("tripline")
except PackageNotFoundError:  # imported from a source tree
    __version__ = "0+unknown"

__all__ = [
    "AdaptiveThrottle",
    "AsyncCall",
    "AsyncGuarded",
    "AttemptTimeoutError",
    "BroadcastError",
    "Cluster",
    "ClusterUnavailableError",
    "Served",
    "BulkheadFullError",
    "DeadlineExceededError",
    "FailbackFullError",
    "Pipeline",
    "pipeline",
    "BreakerRegistry",
    "CircuitBreaker",
    "CircuitOpenError",
    "Event",
    "Guarded",
    "GuardedAwaitable",
    "Hedge",
    "ManualClock",
    "Metrics",
    "Permit",
    "Rejected",
    "RegistryFullError",
    "ThrottlePermit",
    "ThrottledError",
    "Timeout",
    "timeout",
]


def pipeline(**policies: Any) -> Pipeline:
    """Composes policies around calls in the one safe order (fallback →
    overall deadline → retry with budget → breaker → bulkhead →
    per-attempt timeout → call); keyword arguments as `Pipeline`'s.
    ``call`` runs a ``def``, ``acall`` awaits an ``async def`` (the
    timeouts then abandon a slow attempt, and the bulkhead queues)."""
    return Pipeline(**policies)


def timeout(after: Any) -> Timeout:
    """An asyncio timeout of ``after`` (seconds, a ``timedelta`` or a
    duration string such as ``"250ms"``) for ``async def`` calls:
    ``await tripline.timeout(2).acall(fetch, url)`` or as a decorator. A
    call still running then is abandoned (its coroutine cancelled and
    closed) and raises ``tripline.AttemptTimeoutError``."""
    return Timeout(after)
