"""The ceiling: a bare asyncio client doing only what a Job controller must do per pod,
as fast as the cluster lets it, with bounded concurrency.

Per pod: create it on the kwok node holding a finalizer, wait for Succeeded through
its own watch, remove the finalizer, delete it. One aiohttp session, its own service
account (so the audit log counts its calls, and API Priority and Fairness treats it as
it treats the operator).
"""

from __future__ import annotations

import asyncio
import time

import yaml

from .kube import Kube, tolerating
from .observer import Observer, RoundFailed
from .runner import Bench, Outcome
from .stats import window_rate
from .workloads import bare_pod, pods_path

NAMESPACE = "paralleljob-bench"
SERVICE_ACCOUNT = "ceiling"
ROLE = "paralleljob-bench-ceiling"
FINALIZER = "bench.paralleljob.dev/hold"


#: The ceiling's ServiceAccount and its permission on pods, by the collection each is
#: created in.
IDENTITY = yaml.safe_load(
    f"""
/api/v1/namespaces:
  metadata: {{name: {NAMESPACE}}}
/api/v1/namespaces/{NAMESPACE}/serviceaccounts:
  metadata: {{name: {SERVICE_ACCOUNT}}}
/apis/rbac.authorization.k8s.io/v1/clusterroles:
  metadata: {{name: {ROLE}}}
  rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [create, get, list, watch, patch, delete]
/apis/rbac.authorization.k8s.io/v1/clusterrolebindings:
  metadata: {{name: {ROLE}}}
  roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ROLE}}}
  subjects: [{{kind: ServiceAccount, name: {SERVICE_ACCOUNT}, namespace: {NAMESPACE}}}]
"""
)


async def ensure_identity(kube: Kube) -> None:
    """The ceiling's ServiceAccount and its permission on pods (idempotent)."""
    for path, body in IDENTITY.items():
        with tolerating(409):
            await kube.create(path, body)


async def token(kube: Kube) -> str:
    """A short-lived token of the ceiling's ServiceAccount (TokenRequest API)."""
    answer = await kube.create(
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(answer["status"]["token"])


class _Succeeded:
    """The client's own watch: a future per pod name, resolved when it is Succeeded."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.path = pods_path(namespace)
        self.waiting: dict[str, asyncio.Future[None]] = {}

    def expect(self, name: str) -> asyncio.Future[None]:
        return self.waiting.setdefault(name, asyncio.get_running_loop().create_future())

    async def run(self, ready: asyncio.Event) -> None:
        listing = await self.kube.get(self.path)
        ready.set()
        async for event in self.kube.watch(self.path, listing["metadata"]["resourceVersion"]):
            if (event.object.get("status") or {}).get("phase") == "Succeeded":
                future = self.expect(event.object["metadata"]["name"])
                if not future.done():
                    future.set_result(None)


async def _one_pod(kube: Kube, namespace: str, name: str, succeeded: _Succeeded) -> None:
    done = succeeded.expect(name)
    await kube.create(pods_path(namespace), bare_pod(name, FINALIZER))
    await done
    await kube.patch(pods_path(namespace, name), {"metadata": {"finalizers": None}})
    await kube.delete(pods_path(namespace, name))


async def run(
    bench: Bench, namespace: str, seen: Observer, *, pods: int, concurrency: int, timeout: float
) -> Outcome:
    """``pods`` pods through the ceiling client, at most ``concurrency`` at a time."""
    credentials = bench.kube.credentials.with_token(await token(bench.kube))
    async with Kube(credentials, connections=concurrency + 1) as client:
        succeeded = _Succeeded(client, namespace)
        ready = asyncio.Event()
        watcher = asyncio.create_task(succeeded.run(ready))
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with slots:
                await _one_pod(client, namespace, f"ceiling-{i:05d}", succeeded)

        try:
            await asyncio.wait_for(ready.wait(), 60)
            started = time.monotonic()
            try:
                await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(pods))), timeout)
            except TimeoutError:
                raise RoundFailed(
                    f"the ceiling client did not finish {pods} pods in {timeout:.0f}s; "
                    f"seen: {seen.progress()}"
                ) from None
            finished = time.monotonic()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
    times = seen.succeeded_times()
    return Outcome(
        metrics={"pods_per_s": window_rate(times), "makespan_s": finished - started},
        finished_pods=len(times),
        series={"succeeded": [t - started for t in times]},
    )
