"""tripline: circuit breakers and the fault-tolerance policies around them.

The Rust library itself, in-process: every decision (admit, reject, trip,
probe) is made by the same code as in Rust. See the package README.
"""

from __future__ import annotations

from ._errors import CircuitOpenError, Rejected, RegistryFullError
from ._tripline import (
    AsyncGuarded,
    BreakerRegistry,
    CircuitBreaker,
    Event,
    Guarded,
    GuardedAwaitable,
    ManualClock,
    Metrics,
    Permit,
)

__all__ = [
    "AsyncGuarded",
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
