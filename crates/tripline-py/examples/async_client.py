"""Guarding `asyncio` calls: a decorator, `async with`, and a per-tenant
registry, with typed results (`mypy --strict` checks this file).

    python examples/async_client.py
"""

from __future__ import annotations

import asyncio
import random

import tripline

inventory = tripline.CircuitBreaker(
    "inventory",
    window={"kind": "count", "size": 20},
    minimum_calls=10,
    failure_rate_threshold=0.5,
    open_duration=2.0,
    failure_exceptions=(ConnectionError, TimeoutError),
    ignore_exceptions=(KeyError,),
)
tenants = tripline.BreakerRegistry("tenants", max_breakers=1000, minimum_calls=5)


@inventory
async def stock(sku: str) -> int:
    """A flaky dependency: fails 60% of the time."""
    await asyncio.sleep(0.001)
    if random.random() < 0.6:
        raise ConnectionError("inventory unreachable")
    return len(sku)


# Retries with backoff, a bulkhead that queues, and a per-attempt timeout
# that abandons a slow attempt, around the breaker — the Rust pipeline's
# async loop on this task.
prices = tripline.pipeline(
    name="prices",
    breaker=tripline.CircuitBreaker("prices", minimum_calls=5),
    retry={"max_attempts": 3, "backoff": {"kind": "exponential", "initial": "10ms", "multiplier": 2.0, "max": "100ms"}},
    bulkhead={"max_concurrent": 8, "max_queue": 32, "max_wait": "1s"},
    timeout={"per_attempt": "200ms", "overall": "1s"},
    fallback=lambda e: -1.0,
)


@prices
async def price(sku: str) -> float:
    """Another flaky dependency, behind the pipeline."""
    await asyncio.sleep(0.001)
    if random.random() < 0.3:
        raise ConnectionError("prices unreachable")
    return 9.99


@tripline.timeout("50ms")
async def quick_lookup(sku: str) -> str:
    """A call that must answer fast or not at all."""
    await asyncio.sleep(0)
    return sku.upper()


async def tenant_call(tenant: str) -> str:
    """One breaker per tenant: a failing tenant cannot open the others'."""
    async with tenants.get(tenant):
        await asyncio.sleep(0)
        return f"hello {tenant}"


async def main() -> None:
    """Calls until the breaker opens, then shows the rejection."""
    inventory.on_event(lambda e: print("event:", e))
    for _ in range(30):
        try:
            count: int = await stock("sku-1")
            print("stock", count)
        except ConnectionError:
            print("failed")
        except tripline.CircuitOpenError as e:
            print(f"rejected, retry in {e.retry_after:.1f}s" if e.retry_after else "rejected")
            break
    print(await tenant_call("acme"))
    quotes: list[float] = await asyncio.gather(*(price(f"sku-{i}") for i in range(10)))
    print("prices", quotes, prices.stats()["retry"])
    print(await quick_lookup("sku-1"))
    print(inventory.metrics())


if __name__ == "__main__":
    asyncio.run(main())
