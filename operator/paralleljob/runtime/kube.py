"""The operator's one Kubernetes API client: ``kubernetes.aio`` over one aiohttp session.

Requests take and return plain dicts (no model classes: no deserialisation cost), a
semaphore bounds how many are in flight so that a burst of pod creations cannot swamp
the API server, and an optional token bucket (``PJ_API_QPS`` / ``PJ_API_BURST``) paces
them as client-go's rate limiter paces kube-controller-manager's controllers.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config

from .. import constants as c
from ..core import (
    PARALLELJOB,
    WORKLOAD_PLURAL,
    WORKLOAD_PRIORITY_CLASS_PLURAL,
    JobKind,
    PodInfo,
    cron_path,
    kueue_path,
    parse_pod,
)
from ..json_types import JsonDict
from . import metrics
from .api import ApiError as ApiError  # re-exported: callers of Kube catch it
from .api import Fence
from .ratelimit import TokenBucket

log = logging.getLogger(__name__)


MERGE_PATCH = "application/merge-patch+json"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


DEFAULT_KUBECONFIG = "~/.kube/config"
USER_AGENT = "paralleljob-operator"


def user_agent(identity: str) -> str:
    """client-go's ``name/version`` shape, the replica's identity in the version's place:
    the API server's audit log then tells which replica made each request."""
    return f"{USER_AGENT}/{identity}" if identity else USER_AGENT


async def _readline(content: Any) -> bytes:
    """The stream's next line (b"" at its end); a broken stream is an ApiError."""
    try:
        line: bytes = await content.readline()
    except Exception as exc:  # aiohttp.ClientPayloadError, TimeoutError, OSError
        raise ApiError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
    return line


def _answer(status: int, reason: str | None, raw: bytes) -> JsonDict:
    """A response's JSON body; an ApiError for an error status."""
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = {"message": raw.decode("utf-8", "replace")[:500]}
    if not isinstance(parsed, dict):
        parsed = {"items": parsed}
    if status >= 400:
        message = str(parsed.get("message") or reason or "")
        raise ApiError(status, str(parsed.get("reason") or reason), message, parsed)
    return parsed


class ConfigError(Exception):
    """No usable client configuration; the message is one line."""


async def load_configuration(kubeconfig: str | None = None) -> Any:
    """The client configuration, chosen as controller-runtime chooses it: the kubeconfig
    named (``kubeconfig``, else $KUBECONFIG, a path list); else, in a pod
    ($KUBERNETES_SERVICE_HOST set), the service account; else ~/.kube/config.

    Decided up front, so that nothing is tried in vain (the client library logs
    ``Config not found: PATH`` for a missing kubeconfig). Raises ConfigError.
    """
    configuration = aio_client.Configuration()
    named = kubeconfig or os.environ.get("KUBECONFIG", "")
    if not named and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            aio_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except aio_config.ConfigException as exc:
            raise ConfigError(f"in-cluster configuration: {exc}") from exc
        return configuration
    paths = named or DEFAULT_KUBECONFIG
    found = [p for p in paths.split(os.pathsep) if p and os.path.isfile(os.path.expanduser(p))]
    if not found:
        if named:
            raise ConfigError(f"KUBECONFIG={paths}: no such file")
        raise ConfigError(
            f"no {DEFAULT_KUBECONFIG}, no $KUBECONFIG, and not in a cluster "
            "($KUBERNETES_SERVICE_HOST is unset)"
        )
    try:
        await aio_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.pathsep.join(found), client_configuration=configuration
        )
    except aio_config.ConfigException as exc:
        raise ConfigError(f"kubeconfig {os.pathsep.join(found)}: {exc}") from exc
    return configuration


class Kube:
    """Thin async access to the few API calls the operator makes: the real
    :class:`~paralleljob.api.ControllerApi` and :class:`~paralleljob.api.EventSink`."""

    def __init__(
        self,
        configuration: Any,
        *,
        concurrency: int = 64,
        qps: float = 0.0,
        burst: int = 1,
        kind: JobKind = PARALLELJOB,
        fence: Fence | None = None,
        user_agent: str = USER_AGENT,
    ) -> None:
        #: The kind whose jobs the job calls address, and whose finalizer the pod
        #: calls remove (core/job/kind.py).
        self.kind = kind
        #: Under a leader election, what every write asks last (fence.py); None: alone.
        self.fence = fence
        configuration.connection_pool_maxsize = max(concurrency, 1)
        # trust_env would make aiohttp look for ~/.netrc credentials on a worker thread
        # before every request that carries no aiohttp auth object (all of ours: the
        # token is a header); the proxy, if any, comes from the kubeconfig.
        configuration.client_session_kwargs = {"trust_env": False}
        self.api = aio_client.ApiClient(configuration)
        self.api.user_agent = user_agent
        # Watches get a client of their own, its connections unlimited (aiohttp's limit
        # 0): a watch holds its connection for minutes, and in the requests' pool
        # PJ_API_CONCURRENCY watches (3 kinds per namespace) left every request waiting
        # for a connection until its timeout. The requests' limit stays theirs.
        watching = copy.copy(configuration)
        watching.connection_pool_maxsize = 0
        self._watch_api = aio_client.ApiClient(watching)
        self._watch_api.user_agent = user_agent
        self.host: str = configuration.host
        self._slots = asyncio.Semaphore(max(concurrency, 1))
        self._bucket = TokenBucket(qps, burst) if qps > 0 else None

    def for_kind(self, kind: JobKind) -> Kube:
        """The same client, connections and rate limit, addressing another kind's jobs
        and pods' finalizers (one budget for every kind, as one client-go client)."""
        view = copy.copy(self)
        view.kind = kind
        return view

    def has_spare_budget(self) -> bool:
        """No rate limit, or at least half the burst unused: nothing is queueing."""
        if self._bucket is None:
            return True
        return self._bucket.available(time.monotonic()) >= self._bucket.burst / 2

    async def _wait_for_token(self) -> None:
        """client-go's rate limiter: each request waits for its token, in order."""
        if self._bucket is None:
            return
        delay = self._bucket.reserve(time.monotonic())
        metrics.API_RATE_LIMITER_WAIT.observe(delay)
        if delay > 0:
            await asyncio.sleep(delay)

    async def close(self) -> None:
        await self.api.close()  # type: ignore[no-untyped-call]
        await self._watch_api.close()  # type: ignore[no-untyped-call]

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float = 60.0,
    ) -> JsonDict:
        await self._wait_for_token()
        resource = metrics.resource_of(path)
        async with self._slots:
            params = await self.api.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query) or None,
                header_params={"Content-Type": content_type, "Accept": accept},
                body=body,
                auth_settings=["BearerToken"],
            )
            url_method, url, headers, data, post = params
            if self.fence is not None:
                # Its deadline within the fence's validity; the slot held means a free
                # connection (as many as slots; watches have their own): nothing waits
                # between the check and the request going out but a new connection's
                # handshake.
                timeout = min(timeout, self._fenced(method, path, resource))
            try:
                response = await self.api.call_api(
                    url_method, url, headers, data, post, _request_timeout=timeout
                )
                raw: bytes = await response.read()  # type: ignore[no-untyped-call]
            except (OSError, TimeoutError) as exc:
                metrics.API_REQUESTS.labels(method, resource, "0").inc()
                raise ApiError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
            except Exception as exc:  # aiohttp.ClientError and friends
                metrics.API_REQUESTS.labels(method, resource, "0").inc()
                if type(exc).__module__.startswith("aiohttp"):
                    raise ApiError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
                raise
        metrics.API_REQUESTS.labels(method, resource, str(response.status)).inc()
        return _answer(response.status, response.reason, raw)

    def _fenced(self, method: str, path: str, resource: str) -> float:
        """The fence's last word on a write, after every wait (fence.py): the seconds the
        write may take."""
        assert self.fence is not None
        try:
            return self.fence.check(method, path)
        except ApiError:
            metrics.WRITES_FENCED.labels(method, resource).inc()
            raise

    async def watch(
        self,
        path: str,
        query: Sequence[tuple[str, str]],
        *,
        accept: str = "application/json",
        timeout: float = 360.0,
    ) -> AsyncIterator[JsonDict]:
        """A watch's events, decoded one line at a time as they come. It holds a
        connection of the watches' own client but no request slot (it would hold either
        for minutes); it waits for its token like any request, as client-go's
        reflector's do. Raises ApiError for a refused watch (410 Gone: the
        resourceVersion is too old) or a broken stream."""
        await self._wait_for_token()
        resource = metrics.resource_of(path)
        params = await self._watch_api.param_serialize(
            method="GET",
            resource_path=path,
            query_params=[*query, ("watch", "true")],
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        url_method, url, headers, data, post = params
        try:
            response = await self._watch_api.call_api(
                url_method, url, headers, data, post, _request_timeout=timeout
            )
        except Exception as exc:  # OSError, TimeoutError, aiohttp.ClientError
            metrics.API_REQUESTS.labels("WATCH", resource, "0").inc()
            raise ApiError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
        metrics.API_REQUESTS.labels("WATCH", resource, str(response.status)).inc()
        stream = response.response
        try:
            if response.status >= 400:
                _answer(response.status, response.reason, await stream.read())
            while line := await _readline(stream.content):
                if line.strip():
                    yield json.loads(line)
        finally:
            stream.release()

    # -- paths -----------------------------------------------------------------------
    def job_path(self, namespace: str, name: str, sub: str = "") -> str:
        return self.kind.path(namespace, name, sub)

    @staticmethod
    def pods_path(namespace: str, name: str = "") -> str:
        path = f"/api/v1/namespaces/{namespace}/pods"
        return f"{path}/{name}" if name else path

    # -- calls -----------------------------------------------------------------------
    async def get_job(self, namespace: str, name: str) -> JsonDict:
        return await self.request("GET", self.job_path(namespace, name))

    async def patch_job(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        return await self.request(
            "PATCH", self.job_path(namespace, name), body=patch, content_type=MERGE_PATCH
        )

    async def patch_job_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        return await self.request(
            "PATCH", self.job_path(namespace, name, "status"), body=patch, content_type=MERGE_PATCH
        )

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        body = {"propagationPolicy": "Foreground", "preconditions": {"uid": uid}}
        await self.request("DELETE", self.job_path(namespace, name), body=body)

    async def create_job(self, namespace: str, job: JsonDict) -> JsonDict:
        return await self.request("POST", self.job_path(namespace, ""), body=job)

    async def delete_job_in_background(self, namespace: str, name: str) -> None:
        body = {"propagationPolicy": "Background"}
        await self.request("DELETE", self.job_path(namespace, name), body=body)

    async def get_cron(self, namespace: str, name: str) -> JsonDict:
        return await self.request("GET", cron_path(namespace, name))

    async def patch_cron_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        path = cron_path(namespace, name, "status")
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def create_workload(self, namespace: str, workload: JsonDict) -> JsonDict:
        return await self.request("POST", kueue_path(WORKLOAD_PLURAL, namespace), body=workload)

    async def patch_workload(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        path = kueue_path(WORKLOAD_PLURAL, namespace, name)
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def patch_workload_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        path = kueue_path(WORKLOAD_PLURAL, namespace, name, "status")
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete_workload(self, namespace: str, name: str, uid: str) -> None:
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        await self.request("DELETE", kueue_path(WORKLOAD_PLURAL, namespace, name), body=body)

    async def get_workload_priority_class(self, name: str) -> JsonDict:
        return await self.request("GET", kueue_path(WORKLOAD_PRIORITY_CLASS_PLURAL, "", name))

    async def get_priority_class(self, name: str) -> JsonDict:
        return await self.request("GET", f"{PRIORITY_CLASSES}/{name}")

    async def list_priority_classes(self) -> JsonDict:
        return await self.request("GET", PRIORITY_CLASSES)

    async def list_job_pods(self, namespace: str, job_uid: str) -> list[PodInfo]:
        query = [("labelSelector", self.kind.selector(job_uid))]
        listed = await self.request("GET", self.pods_path(namespace), query=query)
        return [parse_pod(body, self.kind) for body in listed.get("items") or []]

    async def create_pod(self, namespace: str, pod: JsonDict) -> JsonDict:
        return await self.request("POST", self.pods_path(namespace), body=pod)

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        body = {"preconditions": {"uid": uid}}
        await self.request("DELETE", self.pods_path(namespace, name), body=body)

    async def remove_pod_finalizer(self, namespace: str, name: str) -> JsonDict:
        """Upstream's removeTrackingFinalizerPatch (a strategic merge patch), for each of
        the kind's tracking finalizers."""
        patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": list(self.kind.finalizers)}}
        return await self._patch_pod(namespace, name, patch)

    async def fail_pod(
        self, namespace: str, name: str, uid: str, resource_version: str, condition: JsonDict
    ) -> JsonDict:
        """utilpod.PatchPodStatus's strategic merge patch of the status subresource, the
        uid in it as precondition (a pod of that name but another uid refuses it), and the
        resourceVersion (a pod changed since refuses it: 409): the phase Failed, and the
        condition merged into the pod's by its type."""
        meta = {"uid": uid, **({"resourceVersion": resource_version} if resource_version else {})}
        patch = {"metadata": meta, "status": {"phase": c.FAILED, "conditions": [condition]}}
        return await self.request(
            "PATCH",
            self.pods_path(namespace, name) + "/status",
            body=patch,
            content_type=STRATEGIC_MERGE_PATCH,
        )

    async def adopt_pod(
        self, namespace: str, name: str, uid: str, owner: JsonDict, finalizer: str
    ) -> JsonDict:
        """Upstream's ownerRefControllerPatch; the API server refuses a second controller."""
        meta = {"uid": uid, "ownerReferences": [owner], "finalizers": [finalizer]}
        return await self._patch_pod(namespace, name, {"metadata": meta})

    async def release_pod(self, namespace: str, name: str, uid: str, owner_uid: str) -> JsonDict:
        """Upstream's GenerateDeleteOwnerRefStrategicMergeBytes with the finalizer."""
        meta = {
            "uid": uid,
            "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
            "$deleteFromPrimitiveList/finalizers": list(self.kind.finalizers),
        }
        return await self._patch_pod(namespace, name, {"metadata": meta})

    async def _patch_pod(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        return await self.request(
            "PATCH", self.pods_path(namespace, name), body=patch, content_type=STRATEGIC_MERGE_PATCH
        )

    async def create_event(self, namespace: str, event: JsonDict) -> None:
        await self.request("POST", f"/api/v1/namespaces/{namespace}/events", body=event)

    async def patch_event(self, namespace: str, name: str, patch: JsonDict) -> None:
        path = f"/api/v1/namespaces/{namespace}/events/{name}"
        await self.request("PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)


class KubeListWatch:
    """A resource's list and watch through the operator's client (an informer's
    source: informer.ListWatch)."""

    def __init__(self, kube: Kube, path: str) -> None:
        self._kube = kube
        self._path = path

    async def list_page(self, query: list[tuple[str, str]]) -> JsonDict:
        return await self._kube.request("GET", self._path, query=query)

    def watch(self, query: list[tuple[str, str]]) -> AsyncIterator[JsonDict]:
        return self._kube.watch(self._path, query)
