"""The stub API's store: pagination with consistent snapshots, watches resumed from a
resourceVersion in order, 410 for what is too old, and the API server's write rules."""

from __future__ import annotations

import pytest

from tests.support.stub_api import labels
from tests.support.stub_api.store import (
    ADDED,
    BOOKMARK,
    DELETED,
    MODIFIED,
    ApiStatus,
    Json,
    Kind,
    Store,
    Stored,
    Watcher,
)

POD = Kind("", "v1", "pods", "Pod", subresources=("status",))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, namespace: str = "ns", **labels_: str) -> Json:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels_}, "spec": {}}


def store_with(count: int, clock: Clock | None = None) -> Store:
    store = Store([POD], clock=clock or Clock())
    for i in range(count):
        store.create(POD, "ns", pod(f"p{i:02d}", app="a" if i % 2 else "b"))
    return store


def names(items: list[Stored]) -> list[str]:
    return [i.name for i in items]


def events(watcher: Watcher) -> list[tuple[str, int, str]]:
    return [(i.type, i.rv, i.obj.name if i.obj else "") for i in watcher.take()]


# -- LIST --------------------------------------------------------------------------------
def test_an_unpaged_list_is_every_object_by_key_at_the_current_version() -> None:
    store = store_with(3)
    store.create(POD, "aa", pod("z", namespace="aa"))
    page = store.list_page(POD)
    assert [(o.namespace, o.name) for o in page.items] == [
        ("aa", "z"),
        ("ns", "p00"),
        ("ns", "p01"),
        ("ns", "p02"),
    ]
    assert page.rv == store.rv == 4
    assert page.continue_token == ""
    assert page.remaining is None


def test_pages_follow_one_snapshot_until_the_last() -> None:
    store = store_with(5)
    first = store.list_page(POD, limit=2)
    assert names(first.items) == ["p00", "p01"]
    assert first.remaining == 3
    assert first.continue_token
    # Changes after the first page are not in the later ones: a consistent list.
    store.create(POD, "ns", pod("p99"))
    store.update(POD, "ns", "p02", lambda o: {**o, "spec": {"changed": True}})
    second = store.list_page(POD, limit=2, token=first.continue_token)
    last = store.list_page(POD, limit=2, token=second.continue_token)
    assert names(second.items) == ["p02", "p03"]
    assert second.items[0].rv == 3  # p02 as it was at the first page
    assert names(last.items) == ["p04"]
    assert (last.continue_token, last.remaining) == ("", 0)
    assert first.rv == second.rv == last.rv == 5


def test_a_list_that_fits_its_limit_has_no_continue_token() -> None:
    page = store_with(2).list_page(POD, limit=2)
    assert names(page.items) == ["p00", "p01"]
    assert page.continue_token == ""


def test_pages_hold_the_selected_objects_only() -> None:
    store = store_with(6)
    selector = labels.parse("app=a")
    first = store.list_page(POD, selector=selector, limit=2)
    second = store.list_page(POD, selector=selector, limit=2, token=first.continue_token)
    assert names(first.items) + names(second.items) == ["p01", "p03", "p05"]


def test_an_expired_continue_token_is_410() -> None:
    clock = Clock()
    store = store_with(4, clock)
    first = store.list_page(POD, limit=2)
    clock.now += store.snapshot_seconds + 1
    with pytest.raises(ApiStatus) as refused:
        store.list_page(POD, limit=2, token=first.continue_token)
    assert (refused.value.code, refused.value.reason) == (410, "Expired")


def test_a_finished_listing_forgets_its_snapshot() -> None:
    store = store_with(3)
    first = store.list_page(POD, limit=2)
    store.list_page(POD, limit=2, token=first.continue_token)
    with pytest.raises(ApiStatus) as refused:
        store.list_page(POD, limit=2, token=first.continue_token)
    assert refused.value.code == 410


def test_a_garbled_continue_token_is_400() -> None:
    with pytest.raises(ApiStatus) as refused:
        store_with(3).list_page(POD, limit=2, token="not-a-token")
    assert refused.value.code == 400


# -- WATCH ----------------------------------------------------------------------------------
def test_a_watch_from_a_version_gets_what_came_after_in_order() -> None:
    store = store_with(3)
    since = store.rv
    store.update(POD, "ns", "p00", lambda o: {**o, "spec": {"a": 1}})
    store.create(POD, "ns", pod("p10"))
    watcher = store.watch(POD, since=str(since))
    store.delete(POD, "ns", "p01")
    got = events(watcher)
    assert got == [(MODIFIED, 4, "p00"), (ADDED, 5, "p10"), (DELETED, 6, "p01")]
    assert [rv for _, rv, _ in got] == sorted(rv for _, rv, _ in got)


def test_a_watch_from_an_older_version_than_the_history_is_410() -> None:
    store = store_with(3)
    store.compact()  # as a seeded store is
    store.create(POD, "ns", pod("p10"))
    with pytest.raises(ApiStatus) as refused:
        store.watch(POD, since="2")
    assert refused.value.code == 410
    assert events(store.watch(POD, since="3")) == [(ADDED, 4, "p10")]


def test_a_bounded_history_compacts_its_oldest_events() -> None:
    store = Store([POD], clock=Clock(), history_events=2)
    for i in range(4):
        store.create(POD, "ns", pod(f"p{i}"))
    with pytest.raises(ApiStatus):
        store.watch(POD, since="1")
    assert events(store.watch(POD, since="2")) == [(ADDED, 3, "p2"), (ADDED, 4, "p3")]


@pytest.mark.parametrize("since", [None, "", "0"])
def test_a_watch_from_no_version_starts_with_the_objects_as_added(since: str | None) -> None:
    store = store_with(2)
    watcher = store.watch(POD, since=since)
    assert events(watcher) == [(ADDED, 1, "p00"), (ADDED, 2, "p01")]


def test_initial_events_end_with_a_bookmark_that_says_so() -> None:
    store = store_with(2)
    items = store.watch(POD, send_initial=True).take()
    assert [i.type for i in items] == [ADDED, ADDED, BOOKMARK]
    assert items[-1].initial_end and items[-1].rv == store.rv


def test_a_bookmark_comes_after_the_events_already_pending() -> None:
    store = store_with(1)
    watcher = store.watch(POD, since=str(store.rv))
    store.create(POD, "ns", pod("p10"))
    watcher.bookmark(store.rv)
    items = watcher.take()
    assert [(i.type, i.rv) for i in items] == [(ADDED, 2), (BOOKMARK, 2)]
    assert not watcher.ready.is_set()


def test_a_watch_sees_objects_enter_and_leave_its_selector() -> None:
    store = store_with(0)
    store.create(POD, "ns", pod("x", app="a"))
    watcher = store.watch(POD, selector=labels.parse("app=a"), since=str(store.rv))

    def relabel(app: str) -> None:
        store.update(
            POD, "ns", "x", lambda o: {**o, "metadata": {**o["metadata"], "labels": {"app": app}}}
        )

    relabel("b")
    relabel("c")  # outside before and after: nothing
    relabel("a")
    assert [t for t, _, _ in events(watcher)] == [DELETED, ADDED]


def test_a_watch_of_one_namespace_sees_only_it() -> None:
    store = store_with(0)
    watcher = store.watch(POD, namespace="ns", since="0")
    store.create(POD, "other", pod("x", namespace="other"))
    store.create(POD, "ns", pod("y"))
    assert events(watcher) == [(ADDED, 2, "y")]


# -- writes -------------------------------------------------------------------------------
def test_a_write_answers_a_new_version_and_keeps_what_cannot_change() -> None:
    store = store_with(1)
    before = store.get(POD, "ns", "p00")
    after = store.update(
        POD,
        "ns",
        "p00",
        lambda o: {**o, "metadata": {**o["metadata"], "uid": "forged"}, "spec": {"x": 1}},
    )
    meta = after.load()["metadata"]
    assert after.rv == before.rv + 1 == int(meta["resourceVersion"])
    assert meta["uid"] == before.uid
    assert meta["generation"] == 2  # the spec changed


def test_a_write_that_changes_nothing_is_no_write() -> None:
    store = store_with(1)
    watcher = store.watch(POD, since=str(store.rv))
    same = store.update(POD, "ns", "p00", lambda o: o)
    assert same.rv == 1 and store.rv == 1
    assert events(watcher) == []


def test_a_stale_resource_version_or_uid_is_a_conflict() -> None:
    store = store_with(1)
    store.update(POD, "ns", "p00", lambda o: {**o, "spec": {"x": 1}})
    for rv, uid in (("1", None), (None, "someone-else")):
        with pytest.raises(ApiStatus) as refused:
            store.update(POD, "ns", "p00", lambda o: o, precondition_rv=rv, precondition_uid=uid)
        assert refused.value.code == 409


def test_deleting_an_object_with_finalizers_marks_it_until_they_are_gone() -> None:
    store = store_with(0)
    store.create(POD, "ns", {"metadata": {"name": "f", "finalizers": ["x/y"]}})
    watcher = store.watch(POD, since=str(store.rv))
    marked = store.delete(POD, "ns", "f")
    assert marked.load()["metadata"]["deletionTimestamp"]

    def release(o: Json) -> Json:
        o["metadata"]["finalizers"] = []
        return o

    store.update(POD, "ns", "f", release)
    assert [t for t, _, _ in events(watcher)] == [MODIFIED, DELETED]
    with pytest.raises(ApiStatus) as gone:
        store.get(POD, "ns", "f")
    assert gone.value.code == 404


def test_generate_name_gets_five_characters_and_a_name_taken_is_409() -> None:
    store = store_with(0)
    made = store.create(POD, "ns", {"metadata": {"generateName": "job-"}})
    assert made.name.startswith("job-") and len(made.name) == len("job-") + 5
    with pytest.raises(ApiStatus) as taken:
        store.create(POD, "ns", {"metadata": {"name": made.name}})
    assert taken.value.code == 409


def test_an_object_is_sent_with_its_kind_and_listed_without() -> None:
    store = store_with(1)
    stored = store.get(POD, "ns", "p00")
    assert stored.full(POD).startswith(b'{"apiVersion":"v1","kind":"Pod","metadata"')
    assert stored.bare.startswith(b'{"metadata"')
    partial = stored.metadata_only()
    assert partial.startswith(b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1"')


def test_objects_of_a_kind_not_kept_are_answered_and_forgotten() -> None:
    events_kind = Kind("", "v1", "events", "Event", kept=False)
    store = Store([events_kind])
    made = store.create(events_kind, "ns", {"metadata": {"generateName": "e."}})
    assert made.rv == 1
    assert store.count(events_kind) == 0
