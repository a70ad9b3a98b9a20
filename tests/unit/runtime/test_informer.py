"""The operator's own list and watch (informer.py), against an in-memory resource that
pages its lists and serves watches from a resourceVersion, as the API server does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest

from paralleljob.config import MANAGE_JOBS_OFF, OperatorConfig
from paralleljob.core import PARALLELJOB, version_number
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.caches import Caches
from paralleljob.runtime.consistency import PODS
from paralleljob.runtime.informer import Informer
from paralleljob.runtime.kube import Kube
from tests.support.wait import wait_until_async

Change = tuple[str | None, str | None, bool]


def _obj(uid: str, rv: int, value: str = "") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": str(rv)}, "value": value or uid}


class Resource:
    """Objects with resourceVersions; lists in pages; watches answer the events after
    the version asked for, or 410 when it is older than what is kept."""

    def __init__(self) -> None:
        self.rv = 0
        self.objects: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.oldest_watchable = 0
        self.pages: list[list[tuple[str, str]]] = []
        self.watches: list[list[tuple[str, str]]] = []
        #: Raised by the next watch request (then cleared).
        self.refuse_watch: ApiError | None = None

    def put(self, uid: str, value: str = "") -> None:
        self.rv += 1
        kind = "MODIFIED" if uid in self.objects else "ADDED"
        self.objects[uid] = _obj(uid, self.rv, value)
        self.events.append({"type": kind, "object": self.objects[uid]})

    def delete(self, uid: str) -> None:
        self.rv += 1
        obj = {**self.objects.pop(uid), "metadata": {"uid": uid, "resourceVersion": str(self.rv)}}
        self.events.append({"type": "DELETED", "object": obj})

    async def list_page(self, query: list[tuple[str, str]]) -> dict[str, Any]:
        self.pages.append(query)
        args = dict(query)
        limit = int(args["limit"])
        start = int(args.get("continue", "0"))
        uids = sorted(self.objects)
        items = [self.objects[u] for u in uids[start : start + limit]]
        more = start + limit < len(uids)
        meta = {"resourceVersion": str(self.rv), "continue": str(start + limit) if more else ""}
        return {"metadata": meta, "items": items}

    def watch(self, query: list[tuple[str, str]]) -> AsyncIterator[dict[str, Any]]:
        self.watches.append(query)
        return self._watch(int(dict(query)["resourceVersion"]))

    async def _watch(self, since: int) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(0)  # a real watch waits on its connection
        if self.refuse_watch is not None:
            error, self.refuse_watch = self.refuse_watch, None
            raise error
        if since < self.oldest_watchable:
            raise ApiError(410, "Expired", "too old resource version")
        for event in self.events:
            meta = event["object"].get("metadata") or {}
            if int(meta.get("resourceVersion", since + 1)) > since:  # an ERROR has none
                yield event
        yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}


async def _run_until(informer: Informer[str], done: Callable[[], bool]) -> None:
    """Runs the informer until ``done``, then cancels it."""
    task = asyncio.create_task(informer.run())
    while not done():
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _informer(resource: Resource, changes: list[Change], page_size: int = 2) -> Informer[str]:
    def project(raw: dict[str, Any]) -> str | None:
        value = str(raw["value"])
        return None if value == "out" else value

    def on_change(old: str | None, new: str | None, gone: bool) -> None:
        changes.append((old, new, gone))

    return Informer(
        resource, project=project, on_change=on_change, name="things", page_size=page_size
    )


def test_the_listing_comes_in_pages_each_applied_and_then_it_is_synced() -> None:
    resource = Resource()
    for uid in "abcde":
        resource.put(uid)
    changes: list[Change] = []
    informer = _informer(resource, changes)
    asyncio.run(informer.list_all())
    assert [dict(q).get("continue") for q in resource.pages] == [None, "2", "4"]
    assert changes == [(None, uid, False) for uid in "abcde"]
    assert informer.synced.is_set()
    assert informer.resource_version == "5"


def test_a_watch_resumes_from_the_last_version_and_applies_each_event() -> None:
    resource = Resource()
    resource.put("a")
    resource.put("b")
    changes: list[Change] = []
    informer = _informer(resource, changes)

    async def run() -> None:
        await informer.list_all()
        resource.put("a", "a2")
        resource.delete("b")
        resource.put("c")
        await informer.watch()

    asyncio.run(run())
    assert changes[2:] == [("a", "a2", False), ("b", "b", True), (None, "c", False)]
    assert informer.store == {"a": "a2", "c": "c"}
    assert dict(resource.watches[0])["resourceVersion"] == "2"
    assert dict(resource.watches[0])["allowWatchBookmarks"] == "true"
    assert informer.resource_version == "5", "the bookmark's version"


def test_a_burst_of_watch_events_lets_the_event_loop_run_between_turns() -> None:
    resource = Resource()
    changes: list[Change] = []
    informer = _informer(resource, changes)
    handled_when_the_loop_ran: list[int] = []

    def slow_change(old: str | None, new: str | None, gone: bool) -> None:
        if not changes:  # the burst's first event: a callback waits for the loop's turn
            asyncio.get_running_loop().call_soon(
                lambda: handled_when_the_loop_ran.append(len(changes))
            )
        changes.append((old, new, gone))
        time.sleep(0.002)  # each event's handling holds the loop, as a busy operator's

    informer._on_change = slow_change

    async def run() -> None:
        await informer.list_all()
        for i in range(30):  # received at once: read without a wait (60 ms of handling)
            resource.put(f"p{i}")
        await informer.watch()

    asyncio.run(run())
    assert len(changes) == 30
    assert handled_when_the_loop_ran and handled_when_the_loop_ran[0] < 30, (
        "the loop ran only once the whole burst was handled"
    )


def test_an_object_out_of_scope_leaves_the_store_as_not_gone() -> None:
    resource = Resource()
    resource.put("a")
    changes: list[Change] = []
    informer = _informer(resource, changes)

    async def run() -> None:
        await informer.list_all()
        resource.put("a", "out")
        await informer.watch()

    asyncio.run(run())
    assert changes == [(None, "a", False), ("a", None, False)]
    assert informer.store == {}


def test_an_expired_watch_lists_again_and_drops_what_is_no_longer_listed() -> None:
    """410 Gone: the events missed are lost; the new listing says what is there now
    (the reflector's Replace): changed objects are applied, vanished ones are gone."""
    resource = Resource()
    for uid in "abc":
        resource.put(uid)
    changes: list[Change] = []
    informer = _informer(resource, changes)

    async def run() -> None:
        await informer.list_all()
        resource.delete("b")
        resource.put("c", "c2")
        resource.oldest_watchable = resource.rv  # compacted: the watch gets 410
        await _run_until(informer, lambda: informer.lists >= 2)

    asyncio.run(run())
    assert changes[3:] == [("a", "a", False), ("c", "c2", False), ("b", None, True)]
    assert informer.store == {"a": "a", "c": "c2"}


def test_an_error_event_with_410_is_an_expired_watch() -> None:
    resource = Resource()
    changes: list[Change] = []
    informer = _informer(resource, changes)
    resource.events.append({"type": "ERROR", "object": {"code": 410, "message": "too old"}})
    resource.rv = 1

    async def run() -> None:
        await _run_until(informer, lambda: informer.lists >= 2)

    asyncio.run(run())
    assert informer.lists >= 2


def test_a_failed_watch_is_retried_from_the_same_version() -> None:
    resource = Resource()
    resource.put("a")
    changes: list[Change] = []
    informer = _informer(resource, changes)
    informer._retry_delays = (0.0, 0.0)

    async def run() -> None:
        await informer.list_all()
        resource.refuse_watch = ApiError(0, "Unreachable", "connection reset")
        resource.put("b")
        await _run_until(informer, lambda: "b" in informer.store)

    asyncio.run(run())
    assert [dict(q)["resourceVersion"] for q in resource.watches[:2]] == ["1", "1"]
    assert informer.lists == 1, "a broken watch is resumed, not listed again"


# -- catching up with the API server (issue 34: a takeover trusts nothing stale) ----------


class QuietResource(Resource):
    """As the API server's watch cache: a long watch brings the events after its version
    and then nothing for a minute, not even a bookmark; a watch of at most 3 s ends with
    one, at the resourceVersion of the last change. A watch brings only what was there
    when it started: a standby whose watch lags behind a change."""

    def __init__(self) -> None:
        super().__init__()
        #: Set once a long watch has brought what it had and waits.
        self.idle = asyncio.Event()

    async def _watch(self, since: int) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(0)
        timeout = int(dict(self.watches[-1])["timeoutSeconds"])
        for event in list(self.events):
            if int(event["object"]["metadata"]["resourceVersion"]) > since:
                yield event
        if timeout <= 3:
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
            return
        self.idle.set()
        await asyncio.Event().wait()  # a minute of nothing, as far as a test can tell


def test_catching_up_waits_for_a_short_watchs_bookmark_when_nothing_changes() -> None:
    resource = QuietResource()
    resource.put("a")
    changes: list[Change] = []
    informer = _informer(resource, changes)

    async def run() -> None:
        task = asyncio.create_task(informer.run())
        await resource.idle.wait()
        # The leader being replaced wrote after the standby's watch began, and that
        # watch has not brought it (nor will it, for a minute).
        resource.put("b")
        await asyncio.wait_for(informer.catch_up(), 5)
        assert (None, "b", False) in changes, "the missing write is in the store"
        assert informer.resource_version == str(resource.rv)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    timeouts = [dict(q)["timeoutSeconds"] for q in resource.watches]
    assert timeouts[0] == "300" and timeouts[1] == "3", timeouts
    # The consistent read of the current version: one object, no resourceVersion.
    assert [dict(q) for q in resource.pages][-1] == {"limit": "1"}


def test_a_cache_already_as_new_catches_up_without_ending_its_watch() -> None:
    resource = QuietResource()
    resource.put("a")
    informer = _informer(resource, [])

    async def run() -> None:
        task = asyncio.create_task(informer.run())
        await resource.idle.wait()
        await asyncio.wait_for(informer.catch_up(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert len(resource.watches) == 1


def test_catching_up_lists_again_when_no_bookmark_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server whose short watches bring nothing either: listed afresh after the limit."""
    from paralleljob.runtime import informer as informer_module

    monkeypatch.setattr(informer_module, "CATCH_UP_RELIST_SECONDS", 0.05)
    resource = Resource()
    resource.put("a")

    async def silent(since: int) -> AsyncIterator[dict[str, Any]]:
        await asyncio.Event().wait()
        yield {}

    informer = _informer(resource, [])

    async def run() -> None:
        task = asyncio.create_task(informer.run())
        await informer.synced.wait()
        resource._watch = silent  # type: ignore[method-assign]
        resource.put("b")
        await asyncio.wait_for(informer.catch_up(), 5)
        assert "b" in informer.store
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert informer.lists == 2


@pytest.mark.parametrize(("rv", "number"), [("42", 42), ("", None), ("x1", None), ("0", None)])
def test_version_number(rv: str, number: int | None) -> None:
    assert version_number(rv) == number


def test_an_informer_listing_again_has_not_caught_up_before_its_listing_is_in() -> None:
    """After a 410 the store is being listed afresh: half of it may be old."""
    informer = _informer(Resource(), [])
    informer.resource_version = ""
    assert not informer._reached(1)
    informer.resource_version = "5"
    assert informer._reached(5) and not informer._reached(6)
    informer.resource_version = "not-a-number"
    assert informer._reached(6), "fails open, as upstream"


def test_an_informer_listing_again_keeps_the_version_its_store_applied() -> None:
    """After a 410 the next watch has no version to resume from, but the store is still
    the one from before the gap: read-your-writes reads the version it applied until the
    new listing is in (not None, which would let a sync run on the old store)."""
    resource = Resource()
    for uid in "ab":
        resource.put(uid)
    informer = _informer(resource, [])
    listing = asyncio.Event()
    listed = resource.list_page

    async def held_list_page(query: list[tuple[str, str]]) -> dict[str, Any]:
        await listing.wait()
        return await listed(query)

    async def run() -> None:
        await informer.list_all()
        before = informer.applied_version
        resource.put("c")
        resource.oldest_watchable = resource.rv  # compacted: the watch gets 410
        resource.list_page = held_list_page  # type: ignore[method-assign]
        task = asyncio.create_task(informer.run())
        await wait_until_async(lambda: informer.resource_version == "", timeout=5, what="the 410")
        assert informer.applied_version == before == "2"
        listing.set()
        await wait_until_async(lambda: informer.lists == 2, timeout=5, what="the new listing")
        assert informer.applied_version == informer.resource_version == "3"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())


def test_read_your_writes_reads_what_the_store_applied() -> None:
    caches = Caches(cast(Kube, None), OperatorConfig(manage_jobs=MANAGE_JOBS_OFF))
    [pods] = caches.pod_informers
    pods.applied_version, pods.resource_version = "7", ""  # listing again
    assert caches.cache_version_for(PARALLELJOB.kind)(PODS, "ns") == 7
