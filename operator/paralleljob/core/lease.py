"""Leader election's decisions, as pure functions: client-go's ``tools/leaderelection``
without its I/O (the elector, election/elector.py, reads and writes the Lease and asks these).

A Lease's spec as a value (``LeaseRecord``, read by ``record_of``, written by ``spec_of``
with ``micro_time`` stamps); what a candidate saw of it, and when by its own monotonic
clock (``Observation``, ``observe``); whether it is still valid, whose it is, what to write
to take, renew or release it, how long to wait between two looks at it, and whether a
candidate that cannot act at once leaves a free lease to a standby that can.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ..config import JITTER_FACTOR
from ..json_types import JsonDict

#: A standby's looks at the lease that a candidate unable to act at once waits for.
YIELD_POLLS = 2


@dataclass(frozen=True)
class LeaseRecord:
    """A Lease's spec: client-go's ``LeaderElectionRecord``."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0


def record_of(lease: JsonDict) -> LeaseRecord:
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=str(spec.get("acquireTime") or ""),
        renew_time=str(spec.get("renewTime") or ""),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def spec_of(record: LeaseRecord) -> JsonDict:
    spec: JsonDict = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "leaseTransitions": record.transitions,
    }
    if record.acquire_time:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time:
        spec["renewTime"] = record.renew_time
    return spec


def micro_time(value: datetime) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Observation:
    """The record a candidate last saw, and when (its monotonic clock) it saw it change:
    client-go's ``observedRecord`` and ``observedTime``."""

    record: LeaseRecord
    at: float


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """The observation after reading ``record``: its time moves only when the record changed."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def lease_valid(observed: Observation | None, now: float) -> bool:
    """isLeaseValid: less than the record's lease duration since it last changed."""
    return observed is not None and observed.at + observed.record.lease_duration_seconds > now


def is_leader(observed: Observation | None, identity: str) -> bool:
    return observed is not None and observed.record.holder == identity


def held_by_another(observed: Observation | None, identity: str, now: float) -> bool:
    """Someone else holds a lease that has not expired: keep off it."""
    return (
        observed is not None
        and observed.record.holder not in ("", identity)
        and lease_valid(observed, now)
    )


def claim(
    identity: str, duration: int, now: datetime, old: LeaseRecord | None, leading: bool
) -> LeaseRecord:
    """The record to write to take (``leading``: to renew) the lease: a renewal keeps the
    acquire time and the transitions, a takeover counts one more transition."""
    stamp = micro_time(now)
    if old is None:
        return LeaseRecord(identity, duration, stamp, stamp, 0)
    if leading:
        return LeaseRecord(identity, duration, old.acquire_time or stamp, stamp, old.transitions)
    return LeaseRecord(identity, duration, stamp, stamp, old.transitions + 1)


def released(now: datetime, old: LeaseRecord) -> LeaseRecord:
    """client-go's release (ReleaseOnCancel): no holder, so a standby takes it at once."""
    stamp = micro_time(now)
    return LeaseRecord("", 1, stamp, stamp, old.transitions)


def retry_delay(retry_period: float, rand: float) -> float:
    """wait.Jitter: between 1 and 1 + JITTER_FACTOR retry periods (``rand`` in [0, 1))."""
    return retry_period * (1 + rand * JITTER_FACTOR)


def yield_window(retry_period: float) -> float:
    """How long a candidate that cannot act at once leaves a free lease to a standby that
    can: two of a standby's longest waits between two looks at the lease (retry_delay)."""
    return YIELD_POLLS * retry_period * (1 + JITTER_FACTOR)


def free_since(observed: Observation) -> float:
    """When the observed lease became free to take (monotonic): when it was seen released
    (no holder), else when it expired."""
    if observed.record.holder == "":
        return observed.at
    return observed.at + observed.record.lease_duration_seconds


def leaves_it_to_a_standby(
    observed: Observation, now: float, *, warm: bool, handed_over_at: float | None, window: float
) -> bool:
    """Whether a candidate leaves a lease that is free to take to a warm standby, for now.

    A candidate whose caches are not in sync could act only once they are (its pods
    listed: 16-27 s at 50,000 pods, issue 23), and one that has just handed over its pod's
    previous lease did so for a standby to take: each leaves it for ``window`` from when it
    became free (or was handed over), then takes it, as no standby did."""
    if handed_over_at is not None and now < handed_over_at + window:
        return True
    return not warm and now < free_since(observed) + window
