"""getPodsForJob: the pods a job owns, after adopting the orphans that match it and
releasing its pods that no longer do (which pods, ref_manager.py decides)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..core import PodInfo
from ..json_types import JsonDict
from ..runtime.api import ApiError, PodControl
from ..runtime.consistency import PODS
from .ref_manager import claim_pods

if TYPE_CHECKING:
    from .job_runtime import JobRuntime

log = logging.getLogger(__name__)

#: The pods the cache holds for a job uid (the pod index).
PodsOf = Callable[[str], Iterable[PodInfo]]


async def claim(api: PodControl, rt: JobRuntime, pods_of: PodsOf) -> list[PodInfo]:
    """The job's pods. A refused adoption or release fails the sync (retried), as
    upstream's does.

    The pods returned are the cache as it is when this returns: the caller checks
    the expectations against them with no await in between, since a pod event
    handled meanwhile settles an expectation that an older snapshot would not show
    (and the sync would create that pod again)."""
    deleting = rt.job.deleting
    claims = claim_pods(rt.uid, rt.namespace, deleting, pods_of(rt.uid))
    if not (claims.adopt or claims.release):
        return list(claims.owned)
    owner = rt.kind.owner_reference(rt.name, rt.uid)
    finalizer = rt.kind.pod_finalizer(rt.spec)
    adopted, released = await asyncio.gather(
        asyncio.gather(*(_adopt(api, rt, p, owner, finalizer) for p in claims.adopt)),
        asyncio.gather(*(_release(api, rt, p) for p in claims.release)),
    )
    errors = [e for e in (*adopted, *released) if isinstance(e, ApiError)]
    if errors:
        raise errors[0]
    # A fresh snapshot; the pods just adopted as the adoption left them until the
    # cache shows it.
    now_adopted = {p.uid: p for p in adopted if isinstance(p, PodInfo)}
    fresh = claim_pods(rt.uid, rt.namespace, deleting, pods_of(rt.uid))
    owned = {p.uid: p for p in fresh.owned}
    return list({**owned, **{u: p for u, p in now_adopted.items() if u not in owned}}.values())


async def _adopt(
    api: PodControl, rt: JobRuntime, pod: PodInfo, owner: JsonDict, finalizer: str
) -> PodInfo | ApiError | None:
    try:
        adopted = await api.adopt_pod(rt.namespace, pod.name, pod.uid, owner, finalizer)
    except ApiError as exc:
        return None if exc.not_found else exc
    rt.own_writes.wrote(PODS, adopted.get("metadata", {}).get("resourceVersion"))
    log.info("%s/%s: adopted pod %s", rt.namespace, rt.name, pod.name)
    return replace(pod, controller_uid=rt.uid, has_finalizer=True)


async def _release(api: PodControl, rt: JobRuntime, pod: PodInfo) -> ApiError | None:
    try:
        released = await api.release_pod(rt.namespace, pod.name, pod.uid, rt.uid)
    except ApiError as exc:
        # Gone, or no longer the pod of that uid (422/409): nothing left to release.
        return None if exc.status in (404, 409, 422) else exc
    rt.own_writes.wrote(PODS, released.get("metadata", {}).get("resourceVersion"))
    log.info("%s/%s: released pod %s (it no longer matches)", rt.namespace, rt.name, pod.name)
    return None
