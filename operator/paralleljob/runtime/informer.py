"""The operator's own list and watch of one resource: client-go's reflector and
informer store in one, for the pods (50,000 at scale) and for which jobs exist.

kopf's watch keeps about 1 KB and a worker task per object, and the barrier its indexes
need (no handler runs before every object is indexed) costs CPU quadratic in the
objects: minutes before the first handler at 6,000 objects (issue 23). This keeps one
projection per object (a PodInfo, or nothing but the key), and:

* lists in pages (``limit``/``continue``), each page projected and applied before the
  next is fetched, so that no whole LIST is ever held;
* watches from the list's resourceVersion, with bookmarks, so that a reconnect resumes
  where it stopped;
* lists again when the watch answers 410 Gone, applying what changed and dropping
  what is no longer listed (the reflector's Replace);
* says when the first listing is in (:attr:`Informer.synced`): job syncs and orphan
  checks wait for it, as upstream's controllers wait for their caches to sync;
* catches up with the API server on demand (:meth:`Informer.catch_up`): a replica that
  becomes leader with caches it filled while standing by must not act on them before
  they show what the API server holds now, the last writes of the leader it replaces
  included (issue 34).

Every change is handed to ``on_change(old, new, gone)`` in the order the API server
gave: ``old`` the projection kept (None: new to the store), ``new`` the object's
projection now (None: not kept, as it is out of scope or gone), ``gone`` whether the
object was deleted or no longer listed; and, to ``on_object``, each object listed, added or
modified, whole, before it is projected (the jobs' loops read their bodies from the one
watch of their kind: nothing else watches them). Between pages, every :data:`YIELD_EVERY`
objects of a page, and every :data:`TURN_SECONDS` of watch events, the informer lets the
event loop run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Generic, Protocol, TypeVar

from ..core import version_number
from ..json_types import JsonDict
from .api import ApiError
from .retry import Retry

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Objects per LIST page: client-go's reflector pages its lists by 500.
PAGE_SIZE = 500
#: How long the server keeps one watch request open (client-go picks 5-10 minutes).
WATCH_SECONDS = 300
#: Objects projected between two turns of the event loop (a page of 500 pods in one go
#: would hold it for some 20 ms).
YIELD_EVERY = 100
#: How long a watch's events are handled at most before the event loop gets a turn
#: (seconds). Events already received are read without a wait, so a burst (kwok starting
#: thousands of pods at once, while the operator was busy) would otherwise be handled in
#: one go: a pause of 0.5-1 s at 5,000 running jobs x 5 pods (scenario 8).
TURN_SECONDS = 0.01
#: Only the metadata of each object (PartialObjectMetadata), for an informer that needs
#: no more; a server that cannot send it sends the object.
#: How long each watch lasts while the informer catches up: the API server's watch cache
#: sends a bookmark 2 s before a watch's deadline (cache_watcher.go, nextBookmarkTime), so
#: a 3 s watch brings the cache's resourceVersion within about a second even when nothing
#: changes, where a long watch's first bookmark comes after a minute.
CATCH_UP_WATCH_SECONDS = 3
#: How long catching up may take before the informer lists afresh instead (a list is as
#: new as the API server at once, but costs what a listing of every object costs).
CATCH_UP_RELIST_SECONDS = 20.0


class Expired(Exception):
    """The resourceVersion watched from, or a list's continue token, is too old."""


class ListWatch(Protocol):
    """The two calls an informer makes of one resource (KubeListWatch; faked in tests)."""

    async def list_page(self, query: list[tuple[str, str]]) -> JsonDict: ...

    def watch(self, query: list[tuple[str, str]]) -> AsyncIterator[JsonDict]: ...


class Informer(Generic[T]):
    def __init__(
        self,
        source: ListWatch,
        *,
        project: Callable[[JsonDict], T | None],
        on_change: Callable[[T | None, T | None, bool], None],
        name: str,
        on_object: Callable[[JsonDict], None] | None = None,
        label_selector: str = "",
        page_size: int = PAGE_SIZE,
        watch_seconds: int = WATCH_SECONDS,
        retry_base_seconds: float = 1.0,
        retry_max_seconds: float = 30.0,
    ) -> None:
        self._source = source
        self._project = project
        self._on_change = on_change
        #: Handed each object listed, added or modified, whole, before it is projected
        #: (the jobs' bodies, for their loops: what is kept is only the projection).
        self._on_object = on_object
        self.name = name
        self._selector = label_selector
        self._page_size = page_size
        self._watch_seconds = watch_seconds
        self._retry_delays = (retry_base_seconds, retry_max_seconds)
        #: Each object's projection by uid (objects projected to None are not kept).
        self.store: dict[str, T] = {}
        #: Set once the first listing has been applied.
        self.synced = asyncio.Event()
        #: Where the next watch resumes; "" to list again (after a 410 Gone).
        self.resource_version = ""
        #: The newest resourceVersion the store has applied, kept while listing again:
        #: read-your-writes (consistency.py) holds a sync back until the new listing is
        #: in, rather than failing open on the store from before the gap.
        self.applied_version = ""
        #: How many times the informer has listed (the first listing included).
        self.lists = 0
        #: While catching up: the resourceVersion to reach, and whether it is reached.
        self._target: int | None = None
        self._caught_up = asyncio.Event()
        #: The watch request in progress (a catch-up ends it for a shorter one).
        self._watching: asyncio.Future[None] | None = None

    def _query(self) -> list[tuple[str, str]]:
        return [("labelSelector", self._selector)] if self._selector else []

    async def run(self) -> None:
        """Lists, then watches, until cancelled: a watch that ends is resumed from the
        last resourceVersion seen; an expired one lists again; a failure is retried
        with back-off."""
        retry = Retry()
        while True:
            try:
                if not self.resource_version:
                    await self.list_all()
                await self._watch_once()
                retry.succeeded()
            except Expired:
                log.info(
                    "%s: watch expired at resourceVersion %s, listing again",
                    self.name,
                    self.resource_version,
                )
                self.resource_version = ""
            except ApiError as exc:
                delay = retry.failed(*self._retry_delays)
                log.warning("%s: %s; again in %.0fs", self.name, exc, delay)
                await asyncio.sleep(delay)
            except Exception:  # a bug must not end the watch for good: it is retried
                delay = retry.failed(*self._retry_delays)
                log.exception("%s: failed; again in %.0fs", self.name, delay)
                await asyncio.sleep(delay)

    async def _watch_once(self) -> None:
        """One watch, which a catch-up may end early (to start a shorter one)."""
        self._watching = asyncio.ensure_future(self.watch())
        try:
            await self._watching
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the informer itself is cancelled
        finally:
            self._watching = None

    def _end_watch(self) -> None:
        if self._watching is not None:
            self._watching.cancel()

    async def current_version(self) -> int | None:
        """The resourceVersion the API server is at now: a consistent LIST of one object
        (no resourceVersion given: read from etcd's quorum, or from a watch cache that
        waited until it was as new). Retried until it answers."""
        retry = Retry()
        while True:
            try:
                page = await self._source.list_page([*self._query(), ("limit", "1")])
            except ApiError as exc:
                delay = retry.failed(*self._retry_delays)
                log.warning(
                    "%s: reading the current version: %s; again in %.0fs", self.name, exc, delay
                )
                await asyncio.sleep(delay)
                continue
            return version_number(str((page.get("metadata") or {}).get("resourceVersion") or ""))

    def _reached(self, target: int) -> bool:
        """At ``target`` or past it; not while listing again (no version yet: the
        listing's will tell); past it for a version that is no number (fail open)."""
        if not self.resource_version:
            return False
        current = version_number(self.resource_version)
        return current is None or current >= target

    async def catch_up(self) -> None:
        """Returns once the store is at least as new as the API server was when this was
        called: the first listing done, then every event up to the API server's current
        resourceVersion applied (watch events come in resourceVersion order, so one at or
        past it means none before it is missing). A watch with no event to bring is
        replaced by short ones until a bookmark says so (CATCH_UP_WATCH_SECONDS); after
        CATCH_UP_RELIST_SECONDS the informer lists afresh instead."""
        await self.synced.wait()
        target = await self.current_version()
        if target is None or self._reached(target):
            return
        self._target = target
        self._caught_up.clear()
        self._end_watch()
        try:
            try:
                # asyncio.timeout, not wait_for (Python 3.11's can swallow a cancellation).
                async with asyncio.timeout(CATCH_UP_RELIST_SECONDS):
                    await self._caught_up.wait()
            except TimeoutError:
                log.warning(
                    "%s: not at resourceVersion %d after %.0fs (at %s): listing again",
                    self.name,
                    target,
                    CATCH_UP_RELIST_SECONDS,
                    self.resource_version,
                )
                self.resource_version = ""
                self._end_watch()
                await self._caught_up.wait()
        finally:
            self._target = None

    def _at_version(self, resource_version: str) -> None:
        self.resource_version = resource_version
        self.applied_version = resource_version
        if self._target is not None and self._reached(self._target):
            self._caught_up.set()

    async def list_all(self) -> None:
        """One listing, page by page, each applied as it comes; then what was not listed
        is gone."""
        listed: set[str] = set()
        query = [*self._query(), ("limit", str(self._page_size))]
        token = ""
        resource_version = ""
        while True:
            page_query = [*query, ("continue", token)] if token else query
            try:
                page = await self._source.list_page(page_query)
            except ApiError as exc:
                if exc.status == 410:
                    raise Expired from exc
                raise
            meta = page.get("metadata") or {}
            resource_version = resource_version or str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            items = page.get("items") or []
            del page  # this page's objects are freed as they are projected
            await self._apply_listed(items, listed)
            if not token:
                break
        for uid in [uid for uid in self.store if uid not in listed]:
            self._on_change(self.store.pop(uid), None, True)
        self._at_version(resource_version)
        self.lists += 1
        self.synced.set()

    async def _apply_listed(self, items: list[JsonDict], listed: set[str]) -> None:
        for done, raw in enumerate(items):
            uid = _uid(raw)
            listed.add(uid)
            if self._on_object is not None:
                self._on_object(raw)
            self._apply(uid, self._project(raw), gone=False)
            if done % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        items.clear()

    async def watch(self) -> None:
        """One watch request, from the last resourceVersion seen, until the server ends
        it. Raises Expired when the server no longer has that version."""
        query = [
            *self._query(),
            ("resourceVersion", self.resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._watch_timeout())),
        ]
        loop = asyncio.get_running_loop()
        turn = loop.time()
        try:
            async for event in self._source.watch(query):
                self.handle(event)
                if loop.time() - turn >= TURN_SECONDS:
                    await asyncio.sleep(0)
                    turn = loop.time()
        except ApiError as exc:
            if exc.status == 410:
                raise Expired from exc
            raise

    def _watch_timeout(self) -> int:
        if self._target is not None:
            return min(CATCH_UP_WATCH_SECONDS, self._watch_seconds)
        return self._watch_seconds

    def handle(self, event: JsonDict) -> None:
        """One watch event applied."""
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise Expired(str(obj.get("message", "")))
            raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")), obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind != "BOOKMARK":
            if self._on_object is not None and kind != "DELETED":
                self._on_object(obj)
            self._apply(_uid(obj), self._project(obj), gone=kind == "DELETED")
        if rv:
            self._at_version(rv)

    def _apply(self, uid: str, new: T | None, gone: bool) -> None:
        """Keeps ``new`` (unless gone) and hands on the change."""
        if new is not None and not gone:
            old = self.store.get(uid)
            self.store[uid] = new
        else:
            old = self.store.pop(uid, None)
        if old is not None or new is not None:
            self._on_change(old, new, gone)


def _uid(raw: JsonDict) -> str:
    return str((raw.get("metadata") or {}).get("uid") or "")
