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
    Rejected,
    RegistryFullError,
)
from ._tripline import (
    AsyncGuarded,
    BreakerRegistry,
    CircuitBreaker,
    Cluster,
    Event,
    Guarded,
    GuardedAwaitable,
    ManualClock,
    Metrics,
    Permit,
    Pipeline,
    Served,
)

try:
    __version__ = _version("tripline")
except PackageNotFoundError:  # imported from a source tree
    __version__ = "0+unknown"

__all__ = [
    "AsyncGuarded",
    "AttemptTimeoutError",
    "BroadcastError",
    "Cluster",
    "ClusterUnavailableError",
    "Served",
    "BulkheadFullError",
    "DeadlineExceededError",
    "Pipeline",
    "pipeline",
    "BreakerRegistry",
    "CircuitBreaker",
    "CircuitOpenError",
    "Event",
    "Guarded",
    "GuardedAwaitable",
    "ManualClock",
    "Metrics",
    "Permit",
    "Rejected",
    "RegistryFullError",
]


def pipeline(**policies: Any) -> Pipeline:
    """Composes policies around calls in the one safe order (fallback →
    overall deadline → retry with budget → breaker → bulkhead →
    per-attempt timeout → call); keyword arguments as `Pipeline`'s."""
    return Pipeline(**policies)
