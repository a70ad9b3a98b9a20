"""The Lease's other holder in the stub's store (tests/support/stub_api/lease.py): it renews
until the standby is warm, then releases, and the takeover is the first other holder."""

from __future__ import annotations

import asyncio

from tests.support.stub_api import lease, resources
from tests.support.stub_api.store import Store

NAMESPACE = "paralleljob-system"


def _store() -> Store:
    store = Store(list(resources.builtin_kinds()))
    store.create(resources.NAMESPACE, "", {"metadata": {"name": NAMESPACE}})
    lease.seed_lease(store, NAMESPACE)
    return store


def test_the_old_holder_renews_until_the_standby_is_warm_then_releases() -> None:
    async def run() -> tuple[bool, str, str]:
        store = _store()
        before = store.get(resources.LEASE, NAMESPACE, lease.LEASE_NAME).rv
        looks = iter([False, False, True])
        warm = await lease.hold_until(store, NAMESPACE, lambda: next(looks), timeout=30)
        renewed = store.get(resources.LEASE, NAMESPACE, lease.LEASE_NAME).rv > before
        held = lease.holder(store, NAMESPACE)
        lease.release(store, NAMESPACE)
        return warm and renewed, held, lease.holder(store, NAMESPACE)

    renewed, held, after = asyncio.run(run())
    assert renewed
    assert (held, after) == (lease.OLD_LEADER, "")


def test_the_takeover_is_the_first_other_holder_and_none_within_the_timeout() -> None:
    async def run() -> tuple[float | None, float | None]:
        store = _store()
        nobody = await lease.takeover(store, NAMESPACE, timeout=0.1)
        lease.release(store, NAMESPACE)
        store.update(
            resources.LEASE,
            NAMESPACE,
            lease.LEASE_NAME,
            lambda obj: {**obj, "spec": {**obj["spec"], "holderIdentity": "standby"}},
        )
        return nobody, await lease.takeover(store, NAMESPACE, timeout=1)

    nobody, taken = asyncio.run(run())
    assert nobody is None
    assert taken is not None
