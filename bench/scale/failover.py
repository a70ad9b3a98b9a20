"""The failover mode (``--failover``): the operator starts under leader election while
another holder renews the Lease, so it stands by (and lists and watches the pods: its
warm caches); once the stub has sent it every pod, the harness releases the Lease as a
stopping leader does and creates a probe job. Timed from the takeover (the standby's
write of the Lease naming itself): the probe's first pod, and every job's status written
once (the seeded jobs' statuses all need a write, so this is the upper bound of a real
failover's resync, whose jobs need none)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from . import objects, procfs, resources
from .objects import JobSeed
from .record import Recorder
from .store import Store

LEASE_NAME = "paralleljob-operator"
#: The probe sorts after every seeded job (in the last namespace, as listed by key),
#: as a job created during a failover sorts after jobs listed long before: kopf hands
#: the listing on in that order, and it is queued last.
PROBE_NAME = "zz-failover-probe"
OLD_LEADER = "old-leader"
#: How often the old holder renews while the standby warms up, and how often the
#: harness looks for the takeover (seconds).
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


def create_probe(store: Store, crd: resources.CustomResource, namespace: str, pods: int) -> str:
    job = JobSeed(
        namespace,
        PROBE_NAME,
        str(uuid.uuid4()),
        pods,
        objects.parallel_job_type(crd.storage.api_version),
    )
    store.create(crd.storage, namespace, objects.job_body(job, datetime.now(UTC), running=False))
    return job.uid


async def measure(
    store: Store,
    crd: resources.CustomResource,
    recorder: Recorder,
    pid: int,
    *,
    namespace: str,
    probe_namespace: str,
    pods: int,
    timeout: float,
) -> dict[str, Any]:
    """The takeover, once the standby has been sent every pod (see the module)."""
    standby = procfs.sample(pid)
    released_at = time.monotonic()
    release(store, namespace)
    probe = create_probe(store, crd, probe_namespace, pods)
    recorder.timed.add(probe)
    took = await takeover(store, namespace, 30.0)
    if took is None:
        return {"error": "no takeover within 30 s of the release"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (
        probe in recorder.first_pod_post and recorder.all_synced.is_set()
    ):
        await asyncio.sleep(0.05)
    after = procfs.sample(pid)
    first = recorder.first_pod_post.get(probe)
    synced = recorder.synced_at
    return {
        "standby_rss_mib": round(standby.rss_bytes / procfs.MIB, 1) if standby else None,
        "standby_cpu_s": round(standby.cpu_seconds, 2) if standby else None,
        "takeover_after_release_s": round(took - released_at, 2),
        "first_pod_after_takeover_s": round(first - took, 2) if first else None,
        "synced_after_takeover_s": round(synced - took, 2) if synced else None,
        "jobs_synced": recorder.synced(),
        "leader_cpu_s": (
            round(after.cpu_seconds - standby.cpu_seconds, 2) if after and standby else None
        ),
        "peak_rss_mib": round(after.hwm_bytes / procfs.MIB, 1) if after else None,
    }
