"""Leader election's pure decisions (core/lease.py): a Lease's record, what a candidate
saw of it and when, whether it is valid and whose, what to write, how long to wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from paralleljob.core.lease import (
    LeaseRecord,
    Observation,
    claim,
    free_since,
    held_by_another,
    lease_valid,
    leaves_it_to_a_standby,
    micro_time,
    observe,
    record_of,
    released,
    retry_delay,
    spec_of,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_lease_spec_round_trip_and_micro_time() -> None:
    assert micro_time(T0) == "2026-01-02T03:04:05.678901Z"
    assert micro_time(T0.replace(microsecond=0)) == "2026-01-02T03:04:05.000000Z"
    record = LeaseRecord("pod-a", 15, micro_time(T0), micro_time(T0), 3)
    assert record_of({"spec": spec_of(record)}) == record
    assert record_of({}) == LeaseRecord()
    assert spec_of(LeaseRecord("", 1)) == {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "leaseTransitions": 0,
    }


def test_the_observation_time_moves_only_when_the_record_changes() -> None:
    a = LeaseRecord("pod-a", 15, "t0", "t0")
    first = observe(None, a, now=100.0)
    assert observe(first, a, now=110.0) is first
    renewed = LeaseRecord("pod-a", 15, "t0", "t1")
    assert observe(first, renewed, now=110.0) == Observation(renewed, 110.0)


def test_a_lease_is_valid_for_its_own_duration_since_it_was_seen_to_change() -> None:
    seen = Observation(LeaseRecord("pod-a", 15), at=100.0)
    assert lease_valid(seen, 114.9)
    assert not lease_valid(seen, 115.0)
    assert not lease_valid(None, 0.0)
    assert held_by_another(seen, "pod-b", 114.9)
    assert not held_by_another(seen, "pod-b", 115.0)
    assert not held_by_another(seen, "pod-a", 100.0), "its own"
    released_lease = Observation(LeaseRecord("", 1), at=100.0)
    assert not held_by_another(released_lease, "pod-b", 100.0), "nobody's"


def test_claim_renews_or_takes_over() -> None:
    later = T0 + timedelta(seconds=2)
    new = claim("pod-a", 15, T0, None, leading=False)
    assert new == LeaseRecord("pod-a", 15, micro_time(T0), micro_time(T0), 0)
    renewed = claim("pod-a", 15, later, new, leading=True)
    assert renewed == LeaseRecord("pod-a", 15, micro_time(T0), micro_time(later), 0)
    taken = claim("pod-b", 15, later, renewed, leading=False)
    assert taken == LeaseRecord("pod-b", 15, micro_time(later), micro_time(later), 1)
    assert released(later, taken) == LeaseRecord("", 1, micro_time(later), micro_time(later), 1)


def test_retry_delay_is_client_gos_jitter() -> None:
    assert retry_delay(2.0, 0.0) == 2.0
    assert retry_delay(2.0, 0.5) == pytest.approx(3.2)
    assert retry_delay(2.0, 0.999999) == pytest.approx(4.4, abs=1e-5)


@pytest.mark.parametrize(
    ("warm", "handed_over_at", "now", "expected"),
    [
        (True, None, 1000.0, False),  # warm: takes it at once
        (False, None, 1000.0, True),  # cold, the lease free since 995
        (False, None, 1003.8, False),  # cold, and nobody took it within the window (8.8 s)
        (True, 999.0, 1000.0, True),  # warm, but it has just handed it over
        (True, 999.0, 1007.8, False),
    ],
)
def test_leaves_it_to_a_standby(
    warm: bool, handed_over_at: float | None, now: float, expected: bool
) -> None:
    released_at = Observation(LeaseRecord("", 1, "t", "t", 3), 995.0)
    assert (
        leaves_it_to_a_standby(
            released_at, now, warm=warm, handed_over_at=handed_over_at, window=8.8
        )
        is expected
    )


def test_an_expired_lease_is_free_from_its_expiry() -> None:
    held = Observation(LeaseRecord("pod-a", 15, "t", "t", 0), 100.0)
    assert free_since(held) == 115.0
    assert free_since(Observation(LeaseRecord("", 1, "t", "t", 0), 100.0)) == 100.0
