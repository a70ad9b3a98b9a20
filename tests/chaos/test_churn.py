"""Jobs created and deleted while the leader is killed (issue 34): two operator
replicas, the leader SIGKILLed every few seconds and restarted in place (the standby
takes the Lease, or the restarted process hands it over), while ParallelJobs are
created and some of them deleted mid-run. Each job that stays ends with exact counts,
no pod created twice, never more than ``parallelism`` active; the deleted jobs' pods
keep no finalizer, and no loop revives a deleted job."""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

import pytest

from tests.e2e.conftest import Pair
from tests.e2e.support import Kubectl, PodWatch, held, kwok_template
from tests.support.wait import wait_until

from .support import ActiveSampler, Run, assert_exact

pytestmark = [pytest.mark.chaos, pytest.mark.localcluster, pytest.mark.kwok]

JOBS = 9
#: Every third job is deleted a few seconds after it was created.
DELETED = frozenset(range(1, JOBS, 3))


def test_jobs_created_and_deleted_while_the_leader_is_killed(
    pair: Pair, k: Kubectl, core_v1: Any
) -> None:
    runs = [Run(f"churn-{i}", completions=6, parallelism=3, duration="2s") for i in range(JOBS)]
    kept = [run for i, run in enumerate(runs) if i not in DELETED]
    chaos = random.Random(34)
    kills = 0
    with contextlib.ExitStack() as stack:
        watches = {
            run.name: stack.enter_context(PodWatch(core_v1, k.ns, run.name, survive_outages=True))
            for run in kept
        }
        samplers = {
            run.name: stack.enter_context(ActiveSampler(core_v1, k.ns, run.name, run.parallelism))
            for run in kept
        }
        next_kill = time.monotonic() + chaos.uniform(2, 4)
        for i, run in enumerate(runs):
            k.create_pj(
                run.name,
                kwok_template(run.duration),
                completions=run.completions,
                parallelism=run.parallelism,
            )
            if i - 1 in DELETED:
                # The job before this one, mid-run by now.
                k.run("delete", "pj", runs[i - 1].name, "--wait=false")
            # The chaos schedule itself: a job every second, the leader killed every 2-4 s.
            time.sleep(1)
            if time.monotonic() >= next_kill:
                leader = pair.leader(k)
                if leader is not None:
                    leader.kill()
                    kills += 1
                    leader.start()
                next_kill = time.monotonic() + chaos.uniform(2, 4)
        for run in kept:
            assert_exact(k, watches[run.name], samplers[run.name], run)
            assert len(watches[run.name].created) == run.completions, f"{run.name}: a pod twice"
    assert kills >= 2

    def released() -> list[str]:
        pods: list[dict[str, Any]] = k.json("get", "pods")["items"]
        return held(pods)

    assert wait_until(lambda: released() == [], timeout=120, what="no finalizer left") is True
    for i in sorted(DELETED):
        assert k.run("get", "pj", runs[i].name, check=False).returncode != 0, "stays deleted"
