"""The pods by their jobs' uids: the index a job's sync reads (claims.PodsOf), kept
from the pod informer's changes (informer.py). A pod is filed under every job that must
look at it (core's candidate_jobs: the job its label names and its controller)."""

from __future__ import annotations

from ..core import PodInfo, candidate_jobs


class PodCache:
    def __init__(self) -> None:
        self._by_job: dict[str, dict[str, PodInfo]] = {}

    def pods_of(self, job_uid: str) -> list[PodInfo]:
        pods = self._by_job.get(job_uid)
        return list(pods.values()) if pods else []

    def change(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """``old`` (the pod as it was filed) replaced by ``new`` (None: no longer kept)."""
        if old is not None:
            for uid in candidate_jobs(old):
                pods = self._by_job.get(uid)
                if pods is not None:
                    pods.pop(old.uid, None)
                    if not pods:
                        del self._by_job[uid]
        if new is not None:
            for uid in candidate_jobs(new):
                self._by_job.setdefault(uid, {})[new.uid] = new

    def __len__(self) -> int:
        """The jobs some pod is filed under."""
        return len(self._by_job)
