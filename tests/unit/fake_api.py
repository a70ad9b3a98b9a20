"""An in-memory stand-in for ``kube.Kube``: the calls the Controller makes, on dicts.

Only for unit tests of the shell's ordering and bookkeeping; everything that talks to
a real API server is tested against one (tests/e2e, tests/deploy).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from paralleljob import constants as c
from paralleljob.kube import ApiError
from paralleljob.model import PodInfo, parse_pod

JsonDict = dict[str, Any]


class FakeKube:
    def __init__(self, job: JsonDict) -> None:
        self.job = copy.deepcopy(job)
        self.job["metadata"].setdefault("resourceVersion", "1")
        self.pods: dict[str, JsonDict] = {}
        self.calls: list[tuple[str, str]] = []
        self._rv = itertools.count(int(self.job["metadata"]["resourceVersion"]) + 1)
        self._uid = itertools.count(1)

    # -- what the operator's pod index would hold ------------------------------------
    def pods_of(self, uid: str) -> list[PodInfo]:
        return [
            parse_pod(p)
            for p in self.pods.values()
            if p["metadata"]["labels"].get(c.LABEL_CONTROLLER_UID) == uid
        ]

    # -- Kube's calls ----------------------------------------------------------------
    async def get_job(self, namespace: str, name: str) -> JsonDict:
        self.calls.append(("GET", "paralleljobs"))
        return copy.deepcopy(self.job)

    def _patch_job(self, patch: JsonDict, what: str) -> JsonDict:
        self.calls.append(("PATCH", what))
        meta = patch.get("metadata", {})
        if meta.get("resourceVersion") not in (None, self.job["metadata"]["resourceVersion"]):
            raise ApiError(409, "Conflict", "the object has been modified")
        for key, value in patch.items():
            if key == "metadata":
                for mk, mv in value.items():
                    if mk == "resourceVersion":
                        continue
                    if mv is None:
                        self.job["metadata"].pop(mk, None)
                    else:
                        self.job["metadata"][mk] = mv
            elif key == "status":
                self.job["status"] = {k: v for k, v in value.items() if v is not None}
            else:
                self.job.setdefault(key, {}).update(value)
        self.job["metadata"]["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(self.job)

    async def patch_job(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        return self._patch_job(patch, "paralleljobs")

    async def patch_job_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        return self._patch_job(patch, "paralleljobs/status")

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        self.calls.append(("DELETE", "paralleljobs"))

    async def create_pod(self, namespace: str, pod: JsonDict) -> JsonDict:
        self.calls.append(("POST", "pods"))
        pod = copy.deepcopy(pod)
        n = next(self._uid)
        pod["metadata"].update(name=f"{pod['metadata']['generateName']}{n}", uid=f"pod-{n}")
        self.pods[pod["metadata"]["name"]] = pod
        return copy.deepcopy(pod)

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        self.calls.append(("DELETE", "pods"))
        self.pods.pop(name, None)

    async def remove_pod_finalizer(self, namespace: str, name: str) -> None:
        self.calls.append(("PATCH", "pods"))
        pod = self.pods.get(name)
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        kept = [f for f in pod["metadata"]["finalizers"] if f != c.TRACKING_FINALIZER]
        pod["metadata"]["finalizers"] = kept

    async def create_event(self, namespace: str, event: JsonDict) -> None:
        self.calls.append(("POST", "events"))

    # -- the kubelet -----------------------------------------------------------------
    def finish_all(self, phase: str = c.SUCCEEDED) -> None:
        for pod in self.pods.values():
            pod["status"] = {"phase": phase}
