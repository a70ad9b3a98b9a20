"""The failover mode's Lease moves against the stub's store (bench/scale/failover.py)."""

from __future__ import annotations

import asyncio

from bench.scale import failover, resources
from bench.scale.store import Store

NAMESPACE = "paralleljob-system"


def _store() -> Store:
    store = Store(list(resources.builtin_kinds()))
    store.create(resources.NAMESPACE, "", {"metadata": {"name": NAMESPACE}})
    failover.seed_lease(store, NAMESPACE)
    return store


def test_the_old_holder_renews_until_the_standby_is_warm_then_releases() -> None:
    async def run() -> tuple[bool, str, str]:
        store = _store()
        before = store.get(resources.LEASE, NAMESPACE, failover.LEASE_NAME).rv
        looks = iter([False, False, True])
        warm = await failover.hold_until(store, NAMESPACE, lambda: next(looks), timeout=30)
        renewed = store.get(resources.LEASE, NAMESPACE, failover.LEASE_NAME).rv > before
        held = failover.holder(store, NAMESPACE)
        failover.release(store, NAMESPACE)
        return warm and renewed, held, failover.holder(store, NAMESPACE)

    renewed, held, after = asyncio.run(run())
    assert renewed
    assert (held, after) == (failover.OLD_LEADER, "")


def test_the_takeover_is_the_first_other_holder_and_none_within_the_timeout() -> None:
    async def run() -> tuple[float | None, float | None]:
        store = _store()
        nobody = await failover.takeover(store, NAMESPACE, timeout=0.1)
        failover.release(store, NAMESPACE)
        store.update(
            resources.LEASE,
            NAMESPACE,
            failover.LEASE_NAME,
            lambda obj: {**obj, "spec": {**obj["spec"], "holderIdentity": "standby"}},
        )
        return nobody, await failover.takeover(store, NAMESPACE, timeout=1)

    nobody, taken = asyncio.run(run())
    assert nobody is None
    assert taken is not None
