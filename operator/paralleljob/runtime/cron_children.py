"""The ParallelJobs each ParallelCronJob controls, by its uid, as the ParallelJob informer
sees them (one watch per kind: the cron controller reads the job informer's events, it
does not watch ParallelJobs again). Kept while standing by too, so that a new leader's
first cron sync knows every job its predecessor started."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core import ChildJob, child_job, cron_owner_uid


class CronChildren:
    """ParallelJobs with a ParallelCronJob as their controller, by the owner's uid."""

    def __init__(self) -> None:
        self._by_owner: dict[str, dict[str, ChildJob]] = {}
        self._owner_of: dict[str, str] = {}
        #: Called with the owner's uid when one of its jobs changed or went.
        self.changed: Callable[[str], None] = lambda owner: None

    def observe(self, body: Mapping[str, Any]) -> None:
        """A ParallelJob listed, added or modified."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        owner = cron_owner_uid(meta)
        if not uid:
            return
        if owner is None:
            self.forget(uid)  # released, or never a cron job's
            return
        previous = self._owner_of.get(uid)
        if previous is not None and previous != owner:
            self.forget(uid)
        self._owner_of[uid] = owner
        self._by_owner.setdefault(owner, {})[uid] = child_job(body)
        self.changed(owner)

    def forget(self, uid: str) -> None:
        """A ParallelJob deleted (or no longer a cron job's)."""
        owner = self._owner_of.pop(uid, None)
        if owner is None:
            return
        jobs = self._by_owner.get(owner, {})
        jobs.pop(uid, None)
        if not jobs:
            self._by_owner.pop(owner, None)
        self.changed(owner)

    def of(self, owner: str) -> tuple[ChildJob, ...]:
        return tuple(self._by_owner.get(owner, {}).values())
