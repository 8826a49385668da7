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
    print(inventory.metrics())


if __name__ == "__main__":
    asyncio.run(main())
