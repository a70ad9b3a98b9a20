"""The stub API server's storage: etcd and the watch cache in one, for a few resources.

Every object is kept as the JSON bytes the API server would send (no apiVersion and
kind: a typed list leaves them out of its items, and they are put in front when the
object is sent alone), so that 60,000 objects cost their size and not ten times it as
Python dicts, and a LIST is a join of bytes. One resourceVersion counter for every
resource, as etcd's revision. A LIST with ``limit`` pages a snapshot taken at its first
page (a consistent list, as etcd's), its ``continue`` token naming the snapshot; a
snapshot expires as a compacted revision does (410). A watch starts from a
resourceVersion and is replayed what happened after it from a bounded history (older:
410 Gone), or, from none or "0", sent the current objects as ADDED first. Pure: no I/O
and no event loop (a watcher only sets an asyncio.Event, which needs none).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .labels import EVERYTHING, Selector

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
#: The annotation of the bookmark that ends a watch's initial events (sendInitialEvents).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: The characters the API server appends to a generateName (utilrand's alphabet).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: How long a LIST snapshot (its continue token) lives: kube-apiserver's compaction
#: interval, after which etcd no longer has the revision.
SNAPSHOT_SECONDS = 300.0
#: Watch events kept per resource for a watch that resumes from a resourceVersion.
HISTORY_EVENTS = 200_000

Json = dict[str, Any]


def dumps(obj: object) -> bytes:
    """Compact JSON, as the API server writes it."""
    return json.dumps(obj, separators=(",", ":")).encode()


class ApiStatus(Exception):
    """A refused request, sent as a metav1.Status with this code and reason."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def body(self) -> Json:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


@dataclass(frozen=True)
class Kind:
    """One resource the stub serves, with what discovery says of it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    subresources: tuple[str, ...] = ()
    #: A built-in type's LIST items carry no apiVersion and kind (a typed list); a
    #: custom resource's do (the API server lists it unstructured).
    typed_list: bool = True
    #: False: objects are answered but not kept (Events: nothing reads them back).
    kept: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> bytes:
        """The start of the object's JSON when sent alone: apiVersion and kind."""
        return f'{{"apiVersion":"{self.api_version}","kind":"{self.kind}",'.encode()


@dataclass(slots=True)
class Stored:
    """One object: its key, what selectors and preconditions read, and its JSON."""

    namespace: str
    name: str
    uid: str
    rv: int
    labels: Mapping[str, str]
    #: The object's JSON without apiVersion and kind.
    bare: bytes
    #: Its metadata alone as a PartialObjectMetadata, made when first asked for.
    partial: bytes | None = None

    def full(self, kind: Kind) -> bytes:
        """The object as sent alone (a GET, a write's answer, a watch event)."""
        return kind.prefix + self.bare[1:] if len(self.bare) > 2 else kind.prefix[:-1] + b"}"

    def metadata_only(self) -> bytes:
        if self.partial is None:
            meta = json.loads(self.bare).get("metadata", {})
            self.partial = dumps(
                {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
            )
        return self.partial

    def load(self) -> Json:
        loaded: Json = json.loads(self.bare)
        return loaded


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write, as a watch sees it: ``old_labels`` is None for a creation."""

    type: str
    rv: int
    obj: Stored
    old_labels: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class WatchItem:
    """What one watcher is sent: an event with its object, or a bookmark (obj None)."""

    type: str
    rv: int
    obj: Stored | None = None
    initial_end: bool = False


class Watcher:
    """One open watch: the events it is owed, in resourceVersion order."""

    def __init__(self, kind: Kind, namespace: str, selector: Selector) -> None:
        self.kind = kind
        self.namespace = namespace
        self.selector = selector
        self.pending: deque[WatchItem] = deque()
        #: Set when something is pending (the server's writer waits on it).
        self.ready = asyncio.Event()

    def _put(self, item: WatchItem) -> None:
        self.pending.append(item)
        self.ready.set()

    def offer(self, change: Change) -> None:
        """A change, as this watch sees it: an object that starts or stops matching its
        selector is ADDED or DELETED for it, as the watch cache sends them."""
        obj = change.obj
        if self.namespace and obj.namespace != self.namespace:
            return
        now = self.selector.matches(obj.labels)
        before = now if change.old_labels is None else self.selector.matches(change.old_labels)
        if change.type == MODIFIED and now != before:
            self._put(WatchItem(ADDED if now else DELETED, change.rv, obj))
        elif now or (change.type == DELETED and before):
            self._put(WatchItem(change.type, change.rv, obj))

    def bookmark(self, rv: int, initial_end: bool = False) -> None:
        """Every event up to ``rv`` is already pending: a bookmark after them says so."""
        self._put(WatchItem(BOOKMARK, rv, None, initial_end))

    def take(self) -> list[WatchItem]:
        items = list(self.pending)
        self.pending.clear()
        self.ready.clear()
        return items


@dataclass(frozen=True)
class Page:
    items: list[Stored]
    rv: int
    continue_token: str = ""
    #: Items after this page (metadata.remainingItemCount), None for an unpaged list.
    remaining: int | None = None


@dataclass
class _Snapshot:
    items: list[Stored]
    rv: int
    taken: float


@dataclass
class _Resource:
    kind: Kind
    objects: dict[tuple[str, str], Stored] = field(default_factory=dict)
    history: deque[Change] = field(default_factory=deque)
    #: Events at or below this resourceVersion are no longer in the history.
    compacted: int = 0
    watchers: set[Watcher] = field(default_factory=set)


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}


def _without_type(obj: Mapping[str, Any]) -> Json:
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def _now_rfc3339(clock: Callable[[], float]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))


class Store:
    def __init__(
        self,
        kinds: Iterable[Kind],
        *,
        clock: Callable[[], float] = time.time,
        snapshot_seconds: float = SNAPSHOT_SECONDS,
        history_events: int = HISTORY_EVENTS,
    ) -> None:
        self.rv = 0
        self.clock = clock
        self.snapshot_seconds = snapshot_seconds
        self.history_events = history_events
        self._resources = {k: _Resource(k) for k in kinds}
        self._snapshots: dict[int, _Snapshot] = {}
        self._snapshot_ids = 0
        #: Called with every committed change (the harness counts writes with it).
        self.observers: list[Callable[[Kind, Change], None]] = []

    # -- reads ---------------------------------------------------------------------------
    def kinds(self) -> list[Kind]:
        return list(self._resources)

    def count(self, kind: Kind) -> int:
        return len(self._res(kind).objects)

    def get(self, kind: Kind, namespace: str, name: str) -> Stored:
        found = self._res(kind).objects.get((namespace, name))
        if found is None:
            raise _not_found(kind, name)
        return found

    def list_page(
        self,
        kind: Kind,
        namespace: str = "",
        selector: Selector = EVERYTHING,
        limit: int = 0,
        token: str = "",
    ) -> Page:
        """One page: everything (``limit`` 0), or ``limit`` items from the snapshot the
        first page took (``token`` empty) or that ``token`` names."""
        if token:
            snap_id, offset = self._decode(token)
            snapshot = self._snapshots.get(snap_id)
            if snapshot is None or self.clock() - snapshot.taken > self.snapshot_seconds:
                self._snapshots.pop(snap_id, None)
                raise ApiStatus(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent "
                    "list result. You can start a new list without the continue parameter.",
                )
        else:
            items = self._matching(kind, namespace, selector)
            if limit <= 0 or len(items) <= limit:
                return Page(items, self.rv)
            self._expire_snapshots()
            self._snapshot_ids += 1
            snap_id, offset = self._snapshot_ids, 0
            snapshot = _Snapshot(items, self.rv, self.clock())
            self._snapshots[snap_id] = snapshot
        size = limit if limit > 0 else len(snapshot.items)
        end = offset + size
        remaining = max(len(snapshot.items) - end, 0)
        if not remaining:
            self._snapshots.pop(snap_id, None)
            return Page(snapshot.items[offset:end], snapshot.rv, "", 0)
        return Page(snapshot.items[offset:end], snapshot.rv, self._encode(snap_id, end), remaining)

    def _matching(self, kind: Kind, namespace: str, selector: Selector) -> list[Stored]:
        objects = self._res(kind).objects
        return [
            objects[key]
            for key in sorted(objects)
            if (not namespace or key[0] == namespace) and selector.matches(objects[key].labels)
        ]

    def _expire_snapshots(self) -> None:
        now = self.clock()
        for snap_id, snap in list(self._snapshots.items()):
            if now - snap.taken > self.snapshot_seconds:
                del self._snapshots[snap_id]

    @staticmethod
    def _encode(snap_id: int, offset: int) -> str:
        raw = json.dumps({"s": snap_id, "o": offset}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    @staticmethod
    def _decode(token: str) -> tuple[int, int]:
        try:
            raw = json.loads(base64.urlsafe_b64decode(token.encode()))
            return int(raw["s"]), int(raw["o"])
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise ApiStatus(400, "BadRequest", f"invalid continue token: {exc}") from exc

    # -- watches ---------------------------------------------------------------------------
    def watch(
        self,
        kind: Kind,
        namespace: str = "",
        selector: Selector = EVERYTHING,
        since: str | None = None,
        send_initial: bool = False,
    ) -> Watcher:
        """A watcher owed what happened after ``since`` (the objects as ADDED first when
        none, "0", or ``send_initial``; then, with ``send_initial``, a bookmark saying so).
        Raises ApiStatus 410 for a resourceVersion older than the history."""
        res = self._res(kind)
        watcher = Watcher(kind, namespace, selector)
        if send_initial or not since or since == "0":
            for obj in self._matching(kind, namespace, selector):
                watcher.pending.append(WatchItem(ADDED, obj.rv, obj))
            if send_initial:
                watcher.bookmark(self.rv, initial_end=True)
        else:
            start = _resource_version(since)
            if start < res.compacted:
                raise ApiStatus(
                    410, "Expired", f"too old resource version: {start} ({res.compacted})"
                )
            for change in res.history:
                if change.rv > start:
                    watcher.offer(change)
        if watcher.pending:
            watcher.ready.set()
        res.watchers.add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._res(watcher.kind).watchers.discard(watcher)

    def compact(self) -> None:
        """Forgets every event so far, as etcd's compaction does (a seeded store starts
        with an empty history: watching from before the seed is 410)."""
        for res in self._resources.values():
            res.history.clear()
            res.compacted = self.rv

    # -- writes ---------------------------------------------------------------------------
    def create(self, kind: Kind, namespace: str, obj: Mapping[str, Any]) -> Stored:
        """A new object: named (generateName gets 5 random characters), given a uid,
        creationTimestamp, generation and resourceVersion unless it has them (a seed)."""
        res = self._res(kind)
        meta = dict(obj.get("metadata") or {})
        if kind.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        name = meta.get("name") or self._generate_name(res, meta)
        key = (str(meta.get("namespace", "")), str(name))
        if key in res.objects:
            raise ApiStatus(409, "AlreadyExists", f'{kind.plural} "{name}" already exists')
        meta["name"] = name
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now_rfc3339(self.clock))
        if kind.kind != "Event":
            meta.setdefault("generation", 1)
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        body = {**_without_type(obj), "metadata": meta}
        stored = Stored(key[0], key[1], str(meta["uid"]), self.rv, _labels(body), dumps(body))
        if kind.kept:
            res.objects[key] = stored
            self._commit(res, Change(ADDED, self.rv, stored))
        return stored

    def _generate_name(self, res: _Resource, meta: Mapping[str, Any]) -> str:
        prefix = str(meta.get("generateName") or "")
        if not prefix:
            raise ApiStatus(422, "Invalid", "name or generateName is required")
        while True:
            name = prefix + "".join(random.choices(_NAME_ALPHABET, k=5))
            if (str(meta.get("namespace", "")), name) not in res.objects:
                return name

    def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        mutate: Callable[[Json], Json],
        *,
        precondition_rv: str | None = None,
        precondition_uid: str | None = None,
    ) -> Stored:
        """The object as ``mutate`` turns it (given its JSON, apiVersion and kind left
        out); name, uid and creation time cannot change, a spec change bumps generation,
        a write that changes nothing is no write (same resourceVersion, no event), and an
        object being deleted whose last finalizer goes is deleted."""
        res = self._res(kind)
        current = self.get(kind, namespace, name)
        _check_preconditions(kind, current, precondition_rv, precondition_uid)
        before = current.load()
        after = _without_type(mutate(current.load()))
        meta = dict(after.get("metadata") or {})
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
            if fixed in before["metadata"]:
                meta[fixed] = before["metadata"][fixed]
        if after.get("spec") != before.get("spec") and "generation" in meta:
            meta["generation"] = int(before["metadata"].get("generation", 1)) + 1
        after["metadata"] = meta
        if after == before:
            return current
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(res, current)
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        stored = Stored(namespace, name, current.uid, self.rv, _labels(after), dumps(after))
        res.objects[(namespace, name)] = stored
        self._commit(res, Change(MODIFIED, self.rv, stored, current.labels))
        return stored

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        *,
        precondition_rv: str | None = None,
        precondition_uid: str | None = None,
    ) -> Stored:
        """Deletes the object; one with finalizers is only marked (deletionTimestamp)
        until they are removed. No grace period: no kubelet runs to honour it."""
        current = self.get(kind, namespace, name)
        _check_preconditions(kind, current, precondition_rv, precondition_uid)
        if current.load().get("metadata", {}).get("finalizers"):

            def mark(obj: Json) -> Json:
                obj["metadata"].setdefault("deletionTimestamp", _now_rfc3339(self.clock))
                obj["metadata"].setdefault("deletionGracePeriodSeconds", 0)
                return obj

            return self.update(kind, namespace, name, mark)
        return self._remove(self._res(kind), current)

    def _remove(self, res: _Resource, current: Stored) -> Stored:
        self.rv += 1
        obj = current.load()
        obj["metadata"]["resourceVersion"] = str(self.rv)
        gone = Stored(
            current.namespace, current.name, current.uid, self.rv, current.labels, dumps(obj)
        )
        del res.objects[(current.namespace, current.name)]
        self._commit(res, Change(DELETED, self.rv, gone, current.labels))
        return gone

    def _commit(self, res: _Resource, change: Change) -> None:
        res.history.append(change)
        while len(res.history) > self.history_events:
            res.compacted = res.history.popleft().rv
        for watcher in res.watchers:
            watcher.offer(change)
        for observer in self.observers:
            observer(res.kind, change)

    def _res(self, kind: Kind) -> _Resource:
        return self._resources[kind]


def _resource_version(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ApiStatus(400, "BadRequest", f"invalid resourceVersion: {text!r}") from None


def _check_preconditions(kind: Kind, current: Stored, rv: str | None, uid: str | None) -> None:
    if uid and uid != current.uid:
        raise ApiStatus(
            409,
            "Conflict",
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current.uid}",
        )
    if rv and rv != str(current.rv):
        raise ApiStatus(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {kind.plural} "{current.name}": the object has '
            "been modified; please apply your changes to the latest version and try again",
        )


def _not_found(kind: Kind, name: str) -> ApiStatus:
    group = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
    return ApiStatus(404, "NotFound", f'{group} "{name}" not found')
