"""Exceptions raised by tripline.

They are built natively from an argument tuple (no Python ``__init__``
runs), so a rejection stays cheap; the attributes read that tuple.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "Rejected",
    "CircuitOpenError",
    "RegistryFullError",
    "BulkheadFullError",
    "DeadlineExceededError",
    "AttemptTimeoutError",
    "ClusterUnavailableError",
    "BroadcastError",
    "FailbackFullError",
    "ThrottledError",
]


class Rejected(Exception):
    """A call refused locally by a tripline policy, before it reached the
    dependency: tells "rejected here" apart from "failed there"."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class CircuitOpenError(Rejected):
    """A circuit breaker refused the call (it is open, forced open, or its
    half-open probes are all taken).

    Attributes: ``retry_after`` (seconds until a call may be admitted, or
    ``None`` when unknown), ``reason`` (why the breaker opened, in the
    library's words, e.g. ``"failure rate 62% ≥ 50% over 20 calls"``),
    ``breaker`` (its name) and ``state``. The message is composed from them
    when it is read, so raising costs no string formatting.
    """

    # No __init__: built as CircuitOpenError(breaker, retry_after, reason,
    # state), BaseException stores the tuple and nothing else runs.

    @property
    def breaker(self) -> str:
        """The name of the breaker that refused the call."""
        return str(self.args[0]) if self.args else ""

    @property
    def retry_after(self) -> Optional[float]:
        """Seconds until the breaker admits a call, if known."""
        return self.args[1] if len(self.args) > 1 else None

    @property
    def reason(self) -> Optional[str]:
        """Why the breaker opened, as the library explains it."""
        return self.args[2] if len(self.args) > 2 else None

    @property
    def state(self) -> str:
        """The state that refused the call."""
        return str(self.args[3]) if len(self.args) > 3 else "open"

    def __str__(self) -> str:
        text = f"{self.breaker}: call rejected: circuit breaker is {self.state}"
        if self.retry_after is not None:
            text += f" (retry after {self.retry_after:.3g}s)"
        if self.reason:
            text += f"; opened on {self.reason}"
        return text


class RegistryFullError(Rejected):
    """A `BreakerRegistry` with ``overflow="reject"`` holds ``max_breakers``
    breakers and refused to create one for a new key."""


class BulkheadFullError(Rejected):
    """A pipeline's bulkhead had no free slot (and no queue room) for the
    call: refused locally, never counted against the dependency."""


class DeadlineExceededError(Rejected, TimeoutError):
    """The call's overall deadline left too little time to try (again)."""


class AttemptTimeoutError(TimeoutError):
    """An attempt ran longer than the pipeline's per-attempt timeout; the
    breaker and the retry saw it as a failure."""


class ClusterUnavailableError(Rejected):
    """No endpoint of a `tripline.Cluster` could take the call: every
    breaker open, every endpoint ejected or tried, or none configured."""


class FailbackFullError(Rejected):
    """A failback cluster's delivery failed and its queue could not take the
    payload (``max_entries`` or ``max_bytes`` reached, or the payload alone
    exceeds ``max_bytes``): nothing was stored, the caller still holds it."""


class ThrottledError(Rejected):
    """An `AdaptiveThrottle` shed the request here, before it reached the
    backend, because the backend has been refusing requests as overloaded.

    Attributes: ``throttle`` (its name) and ``rejection_probability`` (the
    probability in force when the request was shed).
    """

    # No __init__: built as ThrottledError(throttle, rejection_probability).

    @property
    def throttle(self) -> str:
        """The name of the throttle that shed the request."""
        return str(self.args[0]) if self.args else ""

    @property
    def rejection_probability(self) -> float:
        """The probability of shedding when the request was shed."""
        return float(self.args[1]) if len(self.args) > 1 else 0.0

    def __str__(self) -> str:
        return (
            f"{self.throttle}: request throttled locally: backend overloaded "
            f"(rejection probability {self.rejection_probability:.2f})"
        )


class BroadcastError(Exception):
    """A broadcast failed on too many endpoints; ``results`` maps every
    endpoint id to its answer or its exception."""

    @property
    def results(self) -> dict[str, Any]:
        """Every endpoint's answer or exception, by endpoint id."""
        return dict(self.args[1]) if len(self.args) > 1 else {}

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
