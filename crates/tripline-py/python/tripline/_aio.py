"""Helpers of the native asyncio driver (``tripline._tripline.AsyncCall``).

Private: the few steps that are plain asyncio future callbacks.
"""

from __future__ import annotations

import asyncio
from typing import Any


def wake(future: "asyncio.Future[Any]") -> None:
    """Completes a timer's future (a ``loop.call_later`` callback)."""
    if not future.done():
        future.set_result(None)


class AnyOf:
    """One future the task waits on for several: completed when any of
    ``futures`` is done, or when the library's waker fires (from any
    thread, through ``wake_threadsafe``)."""

    __slots__ = ("loop", "futures", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, futures: list[Any]) -> None:
        self.loop = loop
        self.futures = futures
        self.waiter = loop.create_future()
        # Yielded to the task directly, as ``await future`` would.
        self.waiter._asyncio_future_blocking = True
        for f in futures:
            f.add_done_callback(self._done)

    def _done(self, _future: Any = None) -> None:
        if not self.waiter.done():
            self.waiter.set_result(None)

    def wake_threadsafe(self) -> None:
        """Completes the waiter from any thread."""
        try:
            self.loop.call_soon_threadsafe(self._done)
        except RuntimeError:  # the loop is closed: nothing waits any more
            pass

    def detach(self) -> None:
        """Unhooks from the futures (they may outlive this wait)."""
        for f in self.futures:
            f.remove_done_callback(self._done)
