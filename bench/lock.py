"""One bench run at a time per cluster: a Lease held (and renewed) while a run lasts.

Two runs would measure each other, and the second would delete the first's namespaces
as leftovers; the cluster may be shared, so the second one stops instead.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from .ceiling import NAMESPACE
from .kube import JsonDict, Kube, tolerating

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
NAME = "bench-run"
DURATION_SECONDS = 120
RENEW_SECONDS = 30


class BenchBusy(Exception):
    """Another bench run holds the lease."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _expired(lease: JsonDict) -> bool:
    spec = lease.get("spec") or {}
    renewed = spec.get("renewTime")
    if not renewed:
        return True
    last = datetime.fromisoformat(renewed.replace("Z", "+00:00"))
    return datetime.now(UTC) > last + timedelta(seconds=spec.get("leaseDurationSeconds", 0))


def _lease(identity: str, resource_version: str = "") -> JsonDict:
    metadata: JsonDict = {"name": NAME, "namespace": NAMESPACE}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": DURATION_SECONDS,
            "renewTime": _now(),
        },
    }


async def _acquire(kube: Kube, identity: str) -> None:
    with tolerating(409):
        await kube.create(LEASE, _lease(identity))
        return
    current = await kube.get(f"{LEASE}/{NAME}")
    if not _expired(current):
        holder = current["spec"].get("holderIdentity")
        raise BenchBusy(f"another bench run ({holder}) is using this cluster")
    # A run that died without releasing it: take over (the resourceVersion makes a
    # race with a third run fail instead of both winning).
    rv = current["metadata"]["resourceVersion"]
    await kube.request("PUT", f"{LEASE}/{NAME}", _lease(identity, rv))


async def _renew(kube: Kube, identity: str) -> None:
    while True:
        await asyncio.sleep(RENEW_SECONDS)
        current = await kube.get(f"{LEASE}/{NAME}")
        rv = current["metadata"]["resourceVersion"]
        await kube.request("PUT", f"{LEASE}/{NAME}", _lease(identity, rv))


@asynccontextmanager
async def exclusive(kube: Kube) -> AsyncIterator[None]:
    """Holds the bench lease for the block; BenchBusy if another run holds it."""
    identity = f"{socket.gethostname()} pid {os.getpid()}"
    await _acquire(kube, identity)
    renewer = asyncio.create_task(_renew(kube, identity))
    try:
        yield
    finally:
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
        with tolerating(404):
            await kube.delete(f"{LEASE}/{NAME}")
