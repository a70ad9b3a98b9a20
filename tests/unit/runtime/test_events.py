"""Events (events.py): the spam filter (client-go's EventSourceObjectSpamFilter) and the
recorder that posts them."""

from __future__ import annotations

import asyncio

from paralleljob import constants as c
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.events import EventRecorder, JobRef, SpamFilter
from tests.unit.fake_api import FakeApi, JsonDict


def _ref(name: str, uid: str) -> JobRef:
    return JobRef(PARALLELJOB.api_version, PARALLELJOB.kind, "ns", name, uid)


JOB = _ref("big-job", "u-1")
OTHER = _ref("other-job", "u-2")


def test_a_job_posts_25_events_of_a_type_then_one_per_five_minutes() -> None:
    spam = SpamFilter()
    allowed = [spam.allows(JOB, "Normal", 0.0) for _ in range(1000)]
    assert allowed.count(True) == 25
    assert spam.allows(JOB, "Warning", 0.0), "each type has its own budget"
    assert spam.allows(OTHER, "Normal", 0.0), "each job has its own budget"
    assert not spam.allows(JOB, "Normal", 299.0)
    assert spam.allows(JOB, "Normal", 301.0)


def test_the_least_recently_used_buckets_are_forgotten_beyond_the_cache_size() -> None:
    spam = SpamFilter(burst=1, entries=2)
    assert spam.allows(JOB, "Normal", 0.0)
    assert spam.allows(OTHER, "Normal", 0.0)
    assert spam.allows(_ref("third", "u-3"), "Normal", 0.0)
    # JOB's bucket was evicted: it starts full again, as in client-go's LRU.
    assert spam.allows(JOB, "Normal", 0.0)
    assert not spam.allows(_ref("third", "u-3"), "Normal", 0.0)


SINK_JOB: JsonDict = {"metadata": {"name": "big-job", "namespace": "ns", "uid": "u-1"}}


async def _calls(sink: FakeApi, n: int) -> None:
    """Waits until the recorder's workers have made ``n`` calls to ``sink``."""
    async with asyncio.timeout(5):
        while len(sink.calls) < n:
            await asyncio.sleep(0.001)


def test_the_recorder_posts_an_event_about_the_job_to_its_sink() -> None:
    async def post() -> list[JsonDict]:
        sink = FakeApi(SINK_JOB)
        recorder = EventRecorder(sink, workers=1)
        recorder.record(JOB, "Warning", "FailedCreate", "x" * 2000)
        await _calls(sink, 1)
        await recorder.close()
        return sink.events

    [event] = asyncio.run(post())
    assert event["involvedObject"] == {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": "big-job",
        "namespace": "ns",
        "uid": "u-1",
    }
    assert (event["type"], event["reason"]) == ("Warning", "FailedCreate")
    assert len(event["message"]) == 1024
    assert event["metadata"]["namespace"] == "ns"


def test_an_event_the_sink_refuses_is_dropped_and_the_next_still_posted() -> None:
    async def post() -> list[JsonDict]:
        sink = FakeApi(SINK_JOB)
        sink.fail("create_event", ApiError(403, "Forbidden", "events is forbidden"))
        recorder = EventRecorder(sink, workers=1)
        recorder.record(JOB, "Normal", "SuccessfulCreate", "Created pod: a")
        await _calls(sink, 1)
        sink.heal("create_event")
        recorder.record(JOB, "Normal", "SuccessfulCreate", "Created pod: b")
        await _calls(sink, 2)
        await recorder.close()
        return sink.events

    assert [e["message"] for e in asyncio.run(post())] == ["Created pod: b"]


def test_an_event_waits_while_the_rate_limited_client_is_busy() -> None:
    class BusySink(FakeApi):
        """Counts how often the recorder asks for room."""

        asked = 0

        def has_spare_budget(self) -> bool:
            self.asked += 1
            return super().has_spare_budget()

    async def post() -> None:
        sink = BusySink(SINK_JOB)
        sink.busy = True
        recorder = EventRecorder(sink, workers=1)
        recorder.record(JOB, "Normal", "SuccessfulCreate", "Created pod: a")
        # Held back: the worker has asked for room again after a refusal, posting nothing.
        async with asyncio.timeout(5):
            while sink.asked < 3:
                await asyncio.sleep(0.001)
        assert sink.calls == []
        sink.busy = False
        await _calls(sink, 1)
        await recorder.close()
        assert [e["message"] for e in sink.events] == ["Created pod: a"]

    asyncio.run(post())


def test_a_repeated_event_patches_the_count_of_the_one_posted() -> None:
    async def post() -> list[JsonDict]:
        sink = FakeApi(SINK_JOB)
        recorder = EventRecorder(sink, workers=1)
        for _ in range(3):
            recorder.record(JOB, "Normal", "JobAlreadyActive", "waiting")
        await _calls(sink, 3)
        await recorder.close()
        return sink.events

    [event] = asyncio.run(post())
    assert (event["reason"], event["count"]) == ("JobAlreadyActive", 3)
