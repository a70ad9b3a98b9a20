"""Another replica holding the operator's leader election Lease in the stub's store, for
the scale harness's failover mode: it renews the Lease so that the operator stands by,
then releases it as a stopping leader does, and tells when the standby took it over."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from . import resources
from .store import Store

LEASE_NAME = "paralleljob-operator"
OLD_LEADER = "old-leader"
#: How often the old holder renews while the standby warms up, and how often
#: ``takeover`` looks for the new holder (seconds).
RENEW_EVERY = 1.0
LOOK_EVERY = 0.02


def _micro(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(holder: str, now: datetime, duration: int = 9) -> dict[str, Any]:
    return {
        "metadata": {"name": LEASE_NAME, "namespace": "paralleljob-system"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": _micro(now),
            "renewTime": _micro(now),
            "leaseTransitions": 0,
        },
    }


def seed_lease(store: Store, namespace: str) -> None:
    """The Lease, held by another replica that has just renewed it."""
    store.create(resources.LEASE, namespace, lease_body(OLD_LEADER, datetime.now(UTC)))


def holder(store: Store, namespace: str) -> str:
    spec = store.get(resources.LEASE, namespace, LEASE_NAME).load().get("spec") or {}
    return str(spec.get("holderIdentity") or "")


def _set_spec(store: Store, namespace: str, **spec: Any) -> None:
    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "spec": {**(obj.get("spec") or {}), **spec}}

    store.update(resources.LEASE, namespace, LEASE_NAME, mutate)


async def hold_until(
    store: Store, namespace: str, warm: Callable[[], bool], timeout: float
) -> bool:
    """Renews the Lease as the old holder until ``warm()`` (False: timed out)."""
    deadline = time.monotonic() + timeout
    while not warm():
        if time.monotonic() > deadline:
            return False
        _set_spec(store, namespace, renewTime=_micro(datetime.now(UTC)))
        await asyncio.sleep(RENEW_EVERY)
    return True


async def takeover(store: Store, namespace: str, timeout: float) -> float | None:
    """When the Lease first named a holder other than the old one (None: timed out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if holder(store, namespace) not in ("", OLD_LEADER):
            return time.monotonic()
        await asyncio.sleep(LOOK_EVERY)
    return None


def release(store: Store, namespace: str) -> None:
    """What a stopping leader writes: no holder, so that a standby takes it at once."""
    _set_spec(store, namespace, holderIdentity="", renewTime=_micro(datetime.now(UTC)))
