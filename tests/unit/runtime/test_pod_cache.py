"""The pods by their jobs' uids (pod_cache.py)."""

from __future__ import annotations

from paralleljob.core.job.model import PodInfo
from paralleljob.runtime.pod_cache import PodCache


def test_a_pod_is_filed_under_its_label_s_job_and_its_controller() -> None:
    cache = PodCache()
    pod = PodInfo("p", "p-1", label_uid="j-1", controller_uid="j-2")
    cache.change(None, pod)
    assert cache.pods_of("j-1") == [pod]
    assert cache.pods_of("j-2") == [pod]


def test_a_relabelled_pod_moves_and_a_gone_one_leaves_no_empty_entry() -> None:
    cache = PodCache()
    before = PodInfo("p", "p-1", label_uid="j-1")
    after = PodInfo("p", "p-1", label_uid="j-3")
    cache.change(None, before)
    cache.change(before, after)
    assert (cache.pods_of("j-1"), cache.pods_of("j-3")) == ([], [after])
    cache.change(after, None)
    assert cache.pods_of("j-3") == []
    assert len(cache) == 0
