"""`AdaptiveThrottle`: client-side adaptive throttling around calls.

The throttle and its permits are the Rust library's; this module adds the
ways to wrap a call, classifying its answer by the exception types the
caller names.
"""

from __future__ import annotations

import functools
import inspect
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, Optional, TypeVar, Union, cast

from ._tripline import ManualClock, ThrottlePermit, _AdaptiveThrottle

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class AdaptiveThrottle:
    """Sheds requests here, before they reach a backend that has been
    refusing them as overloaded: the SRE book's client-side throttling.
    Over its window the throttle counts ``requests`` and ``accepts``, and
    sheds each new request with probability
    ``max(0, (requests - k * accepts) / (requests + 1))``, capped by
    ``max_rejection_probability``.

    Keyword arguments are the Rust config's: ``k`` (≥ 1, default 2),
    ``window={"length": "2m", "buckets": 12}``,
    ``max_rejection_probability`` (default 0.9) and
    ``minimum_requests_per_second`` (below it nothing is shed).

    ``overloaded`` names the exception types that mean the backend refused
    the request as overloaded (an HTTP 429 or 503, gRPC
    ``RESOURCE_EXHAUSTED``; add timeouts and refused connections if they
    should count against it too). Any other answer, an exception included,
    is an accept: the backend took the request. A call interrupted by a
    ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
    ``asyncio.CancelledError``) reports nothing.
    """

    def __init__(
        self,
        name: str = "throttle",
        *,
        overloaded: tuple[type[BaseException], ...] = (),
        clock: Optional[ManualClock] = None,
        seed: Optional[int] = None,
        **config: Any,
    ) -> None:
        if not isinstance(overloaded, tuple) or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in overloaded
        ):
            raise TypeError(
                "invalid throttle config: `overloaded` must be a tuple of exception types, "
                f"got {overloaded!r}"
            )
        self._native = _AdaptiveThrottle(name, clock=clock, seed=seed, **config)
        self._overloaded = overloaded

    @property
    def name(self) -> str:
        """The throttle's name."""
        return self._native.name

    @property
    def rejection_probability(self) -> float:
        """The probability with which the next request would be shed."""
        return self._native.rejection_probability

    def try_acquire(self) -> ThrottlePermit:
        """A permit for one request; raises `tripline.ThrottledError` when
        the request is shed. Report the answer on the permit."""
        return self._native.try_acquire()

    def metrics(self) -> dict[str, Any]:
        """The live window's and the lifetime's counts (``requests``,
        ``accepts``, ``throttled``), the probability in force, and whether
        the request rate is high enough for the throttle to act."""
        return self._native.metrics()

    @contextmanager
    def _reported(self) -> Iterator[None]:
        """Admits one call and reports how its body ended: an exception
        listed in ``overloaded`` as the backend's refusal, any other
        answer as an accept. A ``BaseException`` that is not an
        ``Exception`` passes through unreported."""
        permit = self._native.try_acquire()
        try:
            yield
        except Exception as error:
            if isinstance(error, self._overloaded):
                permit.rejected_by_backend()
            else:
                permit.accepted()
            raise
        permit.accepted()

    def call(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Runs ``func(*args, **kwargs)`` if the throttle admits it."""
        with self._reported():
            return func(*args, **kwargs)

    async def acall(
        self, func: Callable[..., Union[Awaitable[T], T]], /, *args: Any, **kwargs: Any
    ) -> T:
        """Awaits ``func(*args, **kwargs)`` (an ``async def``, or a ``def``)
        if the throttle admits it."""
        with self._reported():
            result = func(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return cast(T, result)

    def __call__(self, func: F) -> F:
        """Decorates a ``def`` or an ``async def``."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                return await self.acall(func, *args, **kwargs)

            return cast(F, guarded_async)

        @functools.wraps(func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            return self.call(func, *args, **kwargs)

        return cast(F, guarded)

    def __repr__(self) -> str:
        return f"tripline.AdaptiveThrottle({self.name!r})"
