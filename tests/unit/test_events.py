"""The Event spam filter (client-go's EventSourceObjectSpamFilter)."""

from __future__ import annotations

from paralleljob.events import JobRef, SpamFilter

JOB = JobRef("ns", "big-job", "u-1")
OTHER = JobRef("ns", "other-job", "u-2")


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
    assert spam.allows(JobRef("ns", "third", "u-3"), "Normal", 0.0)
    # JOB's bucket was evicted: it starts full again, as in client-go's LRU.
    assert spam.allows(JOB, "Normal", 0.0)
    assert not spam.allows(JobRef("ns", "third", "u-3"), "Normal", 0.0)
