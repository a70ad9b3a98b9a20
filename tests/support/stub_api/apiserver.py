"""The stub Kubernetes API: an aiohttp server on 127.0.0.1 (plain http) that speaks what
the operator and kopf need of kube-apiserver, over the Store.

* Discovery: /version, /api, /api/v1, /apis, /apis/GROUP, /apis/GROUP/VERSION.
* LIST with labelSelector, ``limit``/``continue`` and the list's resourceVersion, as JSON
  or as PartialObjectMetadataList (``Accept: ...;as=PartialObjectMetadataList``).
* WATCH (``watch=true``) from a resourceVersion, with BOOKMARKs every few seconds when
  ``allowWatchBookmarks``, ``sendInitialEvents``, ``timeoutSeconds``; newline-delimited
  JSON over chunked HTTP; a resourceVersion too old is an ERROR event with 410, as the
  watch cache sends it.
* GET, POST, PUT, PATCH (merge and strategic merge) and DELETE of single objects, with
  resourceVersion and uid preconditions; the ``status`` subresource writes the status
  only, the object itself everything but its status. Each write answers the object as
  stored, with its new resourceVersion, and is sent to the watches.

Anything else is answered 404 and recorded (Recorder.unknown), so that a new request of
the operator's shows in the results instead of passing unnoticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from . import resources
from .labels import SelectorError, parse
from .objects import created_pod, running_status, succeeded_status
from .patch import merge_patch, strategic_merge_patch
from .record import Listing, Recorder
from .store import (
    BOOKMARK,
    INITIAL_EVENTS_END,
    ApiStatus,
    Json,
    Kind,
    Store,
    Stored,
    WatchItem,
    dumps,
)

log = logging.getLogger(__name__)

#: How often an idle watch is sent a BOOKMARK (kube-apiserver: about once a minute;
#: shorter here so that a run of a minute sees several).
BOOKMARK_SECONDS = 10.0
#: kube-apiserver's watch cache also sends a bookmark this long before a watch's deadline
#: (cache_watcher.go, nextBookmarkTime), none once that time has passed: the operator's
#: catch-up after a takeover (informer.py) relies on it.
PRE_TIMEOUT_BOOKMARK_SECONDS = 2.0
#: A watch without timeoutSeconds ends after this long (kube-apiserver's
#: --min-request-timeout, 1800 s, is longer than any run).
WATCH_SECONDS = 1800.0
#: Objects joined into one write of a LIST body or of a watch's initial events.
WRITE_BATCH = 500
_PARTIAL = "as=PartialObjectMetadata"
_JOB_KINDS = ("Job", "ParallelJob")


def next_bookmark_time(now: float, end: float, period: float) -> float:
    """When a watch ending at ``end`` is next sent a bookmark: every ``period``, and
    PRE_TIMEOUT_BOOKMARK_SECONDS before its end; never again once that has passed."""
    at = min(now + period, end - PRE_TIMEOUT_BOOKMARK_SECONDS)
    return at if at >= now else math.inf


@dataclass(frozen=True)
class Target:
    """What a resource path names: a kind, and a namespace, object and subresource
    (each "" when not named)."""

    kind: Kind
    namespace: str = ""
    name: str = ""
    sub: str = ""


def resolve(path: str, kinds: Iterable[Kind]) -> Target | None:
    """The target of ``/api/v1/...`` or ``/apis/GROUP/VERSION/...``; None for a path that
    names no resource served."""
    index = {(k.group, k.version, k.plural): k for k in kinds}
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        inner = index.get((group, version, rest[2]))
        if inner is not None and inner.namespaced:
            namespace, rest = rest[1], rest[2:]
    kind = index.get((group, version, rest[0]))
    if kind is None or len(rest) > 3:
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in kind.subresources:
        return None
    return Target(kind, namespace, name, sub)


def watch_line(item: WatchItem, kind: Kind, partial: bool) -> bytes:
    """One watch event as a line of JSON."""
    if item.type == BOOKMARK:
        meta: Json = {"resourceVersion": str(item.rv)}
        if item.initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        if partial:
            head: Json = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"}
        else:
            head = {"kind": kind.kind, "apiVersion": kind.api_version}
        obj = dumps({**head, "metadata": meta})
    else:
        assert item.obj is not None
        obj = item.obj.metadata_only() if partial else item.obj.full(kind)
    return b'{"type":"' + item.type.encode() + b'","object":' + obj + b"}\n"


def _flag(query: Any, name: str) -> bool:
    return str(query.get(name, "")).lower() in ("true", "1")


def _owner_uid(obj: Json) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return ""


class StubServer:
    def __init__(
        self,
        store: Store,
        recorder: Recorder,
        *,
        bookmark_seconds: float = BOOKMARK_SECONDS,
        run_pods_after: float | None = None,
        succeed_pods_after: float | None = None,
    ) -> None:
        self.store = store
        self.recorder = recorder
        self.bookmark_seconds = bookmark_seconds
        #: Seconds after its creation a pod runs, ready, as a kubelet would start it
        #: (None: created pods stay as created; the seeded pods run already).
        self.run_pods_after = run_pods_after
        #: Seconds after it runs a pod's container exits 0 (None: it runs on).
        self.succeed_pods_after = succeed_pods_after
        self.kinds = store.kinds()
        self.port = 0
        self._runner: web.AppRunner | None = None
        #: Awaited with each request's path before it is served (the memory mode holds
        #: the first discovery request until the operator's baseline is taken).
        self.gate: Callable[[str], Awaitable[None]] | None = None

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self, port: int = 0) -> int:
        app = web.Application(client_max_size=16 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        address = self._runner.addresses[0]
        self.port = int(address[1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- dispatch ----------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if self.gate is not None:
            await self.gate(path)
        discovery = self._discovery(path)
        if discovery is not None and request.method == "GET":
            self.recorder.request("GET", "discovery", 200)
            return web.json_response(discovery)
        target = resolve(path, self.kinds)
        if target is None:
            self.recorder.unknown_path(request.method, path)
            log.warning("stub: no such path: %s %s", request.method, request.path_qs)
            return self._status(
                ApiStatus(404, "NotFound", "the server could not find the requested resource")
            )
        verb = self._verb(request, target)
        resource = target.kind.plural + (f"/{target.sub}" if target.sub else "")
        try:
            response = await self._serve(verb, request, target)
        except ApiStatus as exc:
            self.recorder.request(verb, resource, exc.code)
            return self._status(exc)
        self.recorder.request(verb, resource, response.status)
        return response

    def _discovery(self, path: str) -> Json | None:
        path = path.rstrip("/") or "/"
        if path == "/version":
            return resources.version_info()
        if path == "/api":
            return resources.core_versions()
        if path == "/apis":
            return resources.group_list(self.kinds)
        parts = path.strip("/").split("/")
        if parts == ["api", "v1"]:
            return resources.resource_list("v1", self.kinds)
        if len(parts) == 2 and parts[0] == "apis":
            return resources.group(parts[1], self.kinds)
        if len(parts) == 3 and parts[0] == "apis":
            group_version = f"{parts[1]}/{parts[2]}"
            if any(k.api_version == group_version for k in self.kinds):
                return resources.resource_list(group_version, self.kinds)
        return None

    @staticmethod
    def _verb(request: web.Request, target: Target) -> str:
        if request.method == "GET" and not target.name:
            return "WATCH" if _flag(request.query, "watch") else "LIST"
        return request.method

    async def _serve(self, verb: str, request: web.Request, target: Target) -> web.StreamResponse:
        if verb == "WATCH":
            return await self._watch(request, target)
        if verb == "LIST":
            return await self._list(request, target)
        if verb == "GET":
            return self._object(self.store.get(target.kind, target.namespace, target.name), target)
        if verb == "POST" and not target.name:
            return await self._create(request, target)
        if verb in ("PUT", "PATCH") and target.name:
            return await self._write(verb, request, target)
        if verb == "DELETE" and target.name:
            return await self._delete(request, target)
        raise ApiStatus(405, "MethodNotAllowed", f"{verb} is not supported here")

    @staticmethod
    def _status(exc: ApiStatus) -> web.Response:
        return web.Response(
            status=exc.code, body=dumps(exc.body()), content_type="application/json"
        )

    @staticmethod
    def _object(stored: Stored, target: Target, status: int = 200) -> web.Response:
        return web.Response(
            status=status, body=stored.full(target.kind), content_type="application/json"
        )

    @staticmethod
    def _selector(request: web.Request) -> Any:
        if request.query.get("fieldSelector"):
            # Not needed by the operator: refused loudly rather than ignored.
            raise ApiStatus(400, "BadRequest", "the stub does not serve fieldSelector")
        try:
            return parse(request.query.get("labelSelector"))
        except SelectorError as exc:
            raise ApiStatus(400, "BadRequest", str(exc)) from exc

    # -- reads --------------------------------------------------------------------------
    async def _list(self, request: web.Request, target: Target) -> web.StreamResponse:
        kind = target.kind
        selector = self._selector(request)
        try:
            limit = int(request.query.get("limit") or 0)
        except ValueError as exc:
            raise ApiStatus(400, "BadRequest", f"invalid limit: {exc}") from exc
        token = request.query.get("continue", "")
        page = self.store.list_page(kind, target.namespace, selector, limit, token)
        partial = _PARTIAL in request.headers.get("Accept", "")
        meta: Json = {"resourceVersion": str(page.rv)}
        if page.continue_token:
            meta["continue"] = page.continue_token
            if not request.query.get("labelSelector"):
                meta["remainingItemCount"] = page.remaining
        if partial:
            head = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1"}
            items = [o.metadata_only() for o in page.items]
        else:
            head = {"kind": f"{kind.kind}List", "apiVersion": kind.api_version}
            items = [o.bare if kind.typed_list else o.full(kind) for o in page.items]
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        prefix = dumps({**head, "metadata": meta})[:-1] + b',"items":['
        await response.write(prefix)
        nbytes = len(prefix)
        for start in range(0, len(items), WRITE_BATCH):
            chunk = (b"," if start else b"") + b",".join(items[start : start + WRITE_BATCH])
            nbytes += len(chunk)
            await response.write(chunk)
        await response.write(b"]}")
        await response.write_eof()
        paged = bool(limit or token)
        self.recorder.listed(
            Listing(
                self.recorder.clock(),
                kind.plural,
                len(items),
                nbytes,
                paged,
                not page.continue_token,
            )
        )
        return response

    async def _watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        kind, query = target.kind, request.query
        selector = self._selector(request)
        partial = _PARTIAL in request.headers.get("Accept", "")
        self.recorder.watched(kind.plural, request.query_string)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            watcher = self.store.watch(
                kind,
                target.namespace,
                selector,
                since=query.get("resourceVersion"),
                send_initial=_flag(query, "sendInitialEvents"),
            )
        except ApiStatus as exc:
            if exc.code != 410:
                raise
            # The watch cache answers 200 and sends the error as the stream's one event.
            await response.prepare(request)
            await response.write(dumps({"type": "ERROR", "object": exc.body()}) + b"\n")
            await response.write_eof()
            return response
        timeout = float(query.get("timeoutSeconds") or WATCH_SECONDS)
        try:
            await response.prepare(request)
            await self._stream(
                response, watcher, timeout, _flag(query, "allowWatchBookmarks"), partial
            )
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away: the watch ends with it
        finally:
            self.store.unwatch(watcher)
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        watcher: Any,
        timeout: float,
        bookmarks: bool,
        partial: bool,
    ) -> None:
        """Sends what the watcher is owed until the timeout, a bookmark when a
        bookmark period has passed."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        next_bookmark = next_bookmark_time(loop.time(), end, self.bookmark_seconds)
        timed = watcher.kind.kind in _JOB_KINDS
        while (now := loop.time()) < end:
            if bookmarks and now >= next_bookmark:
                watcher.bookmark(self.store.rv)
                next_bookmark = next_bookmark_time(now, end, self.bookmark_seconds)
            items = watcher.take()
            if not items:
                wait = min(end, next_bookmark if bookmarks else end) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watcher.ready.wait(), max(wait, 0.0))
                continue
            for start in range(0, len(items), WRITE_BATCH):
                batch = items[start : start + WRITE_BATCH]
                await response.write(b"".join(watch_line(i, watcher.kind, partial) for i in batch))
            if timed:
                for item in items:
                    if item.obj is not None and item.type == "ADDED":
                        self.recorder.job_delivered(item.obj.uid)

    # -- writes ----------------------------------------------------------------------
    async def _body(self, request: web.Request) -> Json:
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError as exc:
            raise ApiStatus(400, "BadRequest", f"invalid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiStatus(400, "BadRequest", "the body must be a JSON object")
        return body

    async def _create(self, request: web.Request, target: Target) -> web.Response:
        body = await self._body(request)
        kind = target.kind
        if kind.namespaced:
            self.store.get(resources.NAMESPACE, "", target.namespace)  # 404 if there is none
        if kind is resources.POD:
            manager = (
                request.query.get("fieldManager")
                or request.headers.get("User-Agent", "").split("/")[0]
            )
            # The name only seeds the token volume's suffix: generateName is resolved later.
            name = (body.get("metadata") or {}).get("name") or str(uuid.uuid4())
            body = created_pod(body, name, _rfc3339(), manager or "unknown")
        stored = self.store.create(kind, target.namespace, body)
        if kind is resources.POD:
            # generateName is resolved by the store: the stored pod's name is the real one.
            self.recorder.pod_created(_owner_uid(json.loads(stored.bare)))
            if self.run_pods_after is not None:
                asyncio.get_running_loop().call_later(
                    self.run_pods_after, self._run_pod, stored.namespace, stored.name
                )
        return self._object(stored, target, 201)

    def _run_pod(self, namespace: str, name: str) -> None:
        """A kubelet's status update: the pod runs, its container ready."""

        def running(pod: Json) -> Json:
            spec = {**pod["spec"], "nodeName": "kwok-node-0"}
            status = running_status(name, spec, _rfc3339(), 0)
            return {**pod, "spec": spec, "status": status}

        with contextlib.suppress(ApiStatus):  # deleted meanwhile
            self.store.update(resources.POD, namespace, name, running)
            if self.succeed_pods_after is not None:
                asyncio.get_running_loop().call_later(
                    self.succeed_pods_after, self._succeed_pod, namespace, name
                )

    def _succeed_pod(self, namespace: str, name: str) -> None:
        """A kubelet's status update: the pod's container exited 0."""

        def succeeded(pod: Json) -> Json:
            return {**pod, "status": succeeded_status(pod["status"], _rfc3339())}

        with contextlib.suppress(ApiStatus):  # deleted meanwhile
            self.store.update(resources.POD, namespace, name, succeeded)

    async def _write(self, verb: str, request: web.Request, target: Target) -> web.Response:
        body = await self._body(request)
        meta = body.get("metadata") or {}
        precondition_rv = str(meta.get("resourceVersion") or "") or None
        precondition_uid = str(meta.get("uid") or "") or None
        apply = self._patcher(verb, request.headers.get("Content-Type", ""), body)
        keep_status = "status" in target.kind.subresources and target.sub != "status"

        def mutate(current: Json) -> Json:
            patched = apply(current)
            if target.sub == "status":
                # The status subresource changes the status only.
                return {**current, "status": patched.get("status", {})}
            if keep_status:
                patched["status"] = current.get("status", {})
            return patched

        stored = self.store.update(
            target.kind,
            target.namespace,
            target.name,
            mutate,
            precondition_rv=precondition_rv,
            precondition_uid=precondition_uid,
        )
        if target.kind.kind in _JOB_KINDS:
            if target.sub == "status":
                self.recorder.status_written(stored.uid)
            else:
                self.recorder.job_written(stored.uid)
        return self._object(stored, target)

    @staticmethod
    def _patcher(verb: str, content_type: str, body: Json) -> Callable[[Json], Json]:
        """How the write turns the stored object into the new one."""
        cleaned = dict(body)
        if isinstance(cleaned.get("metadata"), dict):
            # Preconditions, not changes.
            meta = {
                k: v for k, v in cleaned["metadata"].items() if k not in ("resourceVersion", "uid")
            }
            cleaned["metadata"] = meta
        if verb == "PUT":
            # A replacement: the store keeps what a client cannot change (name, uid, ...).
            return lambda current: dict(cleaned)
        media = content_type.split(";")[0].strip()
        if media == "application/merge-patch+json":
            return lambda current: dict(merge_patch(current, cleaned))
        if media == "application/strategic-merge-patch+json":
            return lambda current: dict(strategic_merge_patch(current, cleaned))
        raise ApiStatus(
            415, "UnsupportedMediaType", f"the stub does not apply {media or 'this'} patches"
        )

    async def _delete(self, request: web.Request, target: Target) -> web.Response:
        body = await self._body(request) if request.can_read_body else {}
        pre = body.get("preconditions") or {}
        stored = self.store.delete(
            target.kind,
            target.namespace,
            target.name,
            precondition_rv=pre.get("resourceVersion"),
            precondition_uid=pre.get("uid"),
        )
        return self._object(stored, target)


def _rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
