"""Liveness that means progress: is any job loop holding work it is not getting through?

Pure: each job loop reports a few monotonic timestamps (a :class:`LoopClock`) and
:func:`stalls` says which of them have been pending for longer than the threshold.
The kopf probe (``handlers.progress``) turns a non-empty answer into a failing
``/healthz``. What counts as a stall:

* the loop was woken (a pod or job event) or its timer ran out, and no sync has
  started since -- the loop is not running;
* a sync started and has not ended -- it hangs (an API call that never returns);
* a pod the loop created, deleted or released has not been shown by the pod watch
  -- the pod watch is dead (normally this takes a fraction of a second);
* a status write has not come back through the job watch -- the job watch is dead.

A sync that fails and is retried with back-off is not a stall: it ends, and a
restart would not make the API server answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class LoopClock:
    """One job loop's pending work, as monotonic timestamps (None: nothing pending)."""

    #: First wake (pod or job event) since the last sync started.
    woken_at: float | None = None
    #: When the loop's timer runs (or ran) out.
    timer_due: float | None = None
    #: When the sync now running started.
    sync_started: float | None = None
    #: The oldest pod create/delete/release the pod watch has not shown yet.
    unobserved_since: float | None = None
    #: The oldest status write the job watch has not shown yet.
    unechoed_since: float | None = None


@dataclass(frozen=True)
class Stall:
    job: str
    what: str
    seconds: float

    def __str__(self) -> str:
        return f"{self.job}: {self.what} for {self.seconds:.0f}s"


def _due_since(clock: LoopClock, now: float) -> float | None:
    due = [t for t in (clock.woken_at, clock.timer_due) if t is not None and t <= now]
    return min(due) if due else None


def stalls(clocks: Mapping[str, LoopClock], now: float, threshold: float) -> list[Stall]:
    """The job loops whose pending work is older than ``threshold`` seconds, oldest first."""
    found: list[Stall] = []
    for job, clock in clocks.items():
        checks = (
            (_due_since(clock, now), "due and not synced"),
            (clock.sync_started, "sync running"),
            (clock.unobserved_since, "pod change not seen by the pod watch"),
            (clock.unechoed_since, "status write not seen by the job watch"),
        )
        for since, what in checks:
            if since is not None and now - since > threshold:
                found.append(Stall(job, what, now - since))
    return sorted(found, key=lambda s: -s.seconds)


def describe(found: list[Stall], limit: int = 3) -> str:
    """One line for the probe's error: the oldest few stalls."""
    shown = "; ".join(str(s) for s in found[:limit])
    more = f" (and {len(found) - limit} more)" if len(found) > limit else ""
    return f"no progress: {shown}{more}"
